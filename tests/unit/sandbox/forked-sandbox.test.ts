/**
 * A fork's sandbox reports the fork's changes merged with its own: its own word wins for a
 * path, an inherited path it removed again is dropped (looked up in bounded commands), and
 * nothing held out of the sandbox is inherited.
 */
import { describe, expect, it } from 'vitest';
import { ForkedSandbox } from '../../../src/sandbox/fork/forked-sandbox.js';
import { forkedSandbox } from '../../../src/sandbox/fork/fork.js';
import type { ExecResult, PathChange, Sandbox } from '../../../src/sandbox/types.js';

/** A sandbox whose own scan says `own` and in which `gone` no longer exist; it records every command. */
function inner(own: PathChange[], gone: ReadonlySet<string> = new Set()) {
  const commands: string[] = [];
  const sandbox = {
    id: 'child',
    image: 'fork',
    labels: {},
    changes: async () => ({ changes: own, complete: true }),
    exec: async (command: string): Promise<ExecResult> => {
      commands.push(command);
      // The names between `for p in` and `; do` (plain ones are not quoted).
      const list = /^for p in (.*); do /.exec(command)?.[1] ?? '';
      const named = list.split(' ').map((w) => w.replace(/^'|'$/g, ''));
      return {
        exitCode: 0,
        stdout: named.filter((p) => gone.has(p)).join('\0'),
        stderr: '',
        timedOut: false,
        truncated: false,
        durationMs: 1,
      };
    },
  } as unknown as Sandbox;
  return { sandbox, commands };
}

const added = (path: string): PathChange => ({ path, kind: 'added', type: 'file', size: 1, mode: 0o644 });

describe('ForkedSandbox', () => {
  it('merges: its own change wins, a removed inherited file is dropped, an inherited deletion stays', async () => {
    const { sandbox } = inner(
      [{ path: 'src/a.js', kind: 'modified', type: 'file', size: 2 }],
      new Set(['src/gone.js']),
    );
    const forked = new ForkedSandbox(sandbox, [
      added('src/a.js'),
      added('src/gone.js'),
      added('src/kept.js'),
      { path: 'src/old.js', kind: 'deleted' },
    ]);
    const { changes, complete } = await forked.changes();
    expect(complete).toBe(true);
    expect(changes.map((c) => [c.path, c.kind])).toEqual([
      ['src/a.js', 'modified'],
      ['src/kept.js', 'added'],
      ['src/old.js', 'deleted'],
    ]);
  });

  it('looks inherited paths up in commands that stay well under the kernel cap on one argument', async () => {
    const long = Array.from({ length: 3000 }, (_, i) => added(`${'d'.repeat(400)}/${i}.js`));
    const { sandbox, commands } = inner([]);
    const { changes } = await new ForkedSandbox(sandbox, long).changes();
    expect(changes).toHaveLength(3000);
    expect(commands.length).toBeGreaterThan(1);
    for (const command of commands) expect(Buffer.byteLength(command)).toBeLessThan(128 * 1024);
  });

  it('inherits nothing at or under a path held out of the new sandbox', async () => {
    const { sandbox } = inner([]);
    const fork = {
      image: 'fork',
      imageId: 'sha256:f',
      durationMs: 1,
      inherited: [
        added('test/hidden.test.js'),
        { path: 'test/secret', kind: 'deleted' as const },
        added('src/a.js'),
      ],
    };
    const { changes } = await forkedSandbox(sandbox, fork, ['test/hidden.test.js', 'test/secret']).changes();
    expect(changes.map((c) => c.path)).toEqual(['src/a.js']);
  });
});
