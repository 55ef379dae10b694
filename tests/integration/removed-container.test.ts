/**
 * After `gc --run` (or `docker rm`), a run's kept containers are gone while its record still
 * names them: on real Docker, `inspect` says they were removed and suggests no shell, and
 * `shell`/`rerun-tests` refuse with that reason (exit 2), not as an engine failure (exit 3).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exitCodeForError } from '../../src/cli/exit-codes.js';
import { inspectCommand } from '../../src/cli/commands/inspect.js';
import { rerunTestsCommand } from '../../src/cli/commands/rerun-tests.js';
import { shellCommand } from '../../src/cli/commands/shell.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { memoryRun, type MemoryRun } from '../helpers/memory-run.js';
import { capturedContext } from '../helpers/cli.js';
import { text, toolUse } from '../unit/agent/helpers.js';

let run: MemoryRun;

beforeAll(async () => {
  await dockerEngine().ping(5000);
  // A failed run that kept its attempt's container (never fixed: the threshold stays 50). Each
  // attempt runs a command before giving up: a sandbox where nothing ran is not kept.
  run = await memoryRun({
    turns: [1, 2, 3].flatMap((n) => [
      { content: [toolUse(`ls-${n}`, 'run_command', { command: 'ls' })] },
      { content: [text('no idea')] },
    ]),
    overrides: { keep: 'on-failure' },
  });
  // Its record as a run on the local engine leaves it: the ids it names are on no engine now.
  const file = join(run.result.runDir, 'run.json');
  const record = JSON.parse(await readFile(file, 'utf8')) as {
    engine?: string;
    containers: { engine?: string }[];
  };
  record.engine = 'local';
  for (const c of record.containers) c.engine = 'local';
  await writeFile(file, JSON.stringify(record));
}, 120_000);

afterAll(async () => {
  await run?.remove();
});

async function failure(promise: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await promise;
  } catch (error) {
    return { code: exitCodeForError(error), message: (error as Error).message };
  }
  throw new Error('expected a refusal');
}

describe('a kept container that was removed', () => {
  it('inspect shows it as removed and suggests no shell for it', async () => {
    expect(run.result.outcome).toBe('failed');
    expect(run.result.record.containers.filter((c) => c.kept).map((c) => c.role)).toContain('attempt-3');
    const ctx = capturedContext(run.root);
    expect(await inspectCommand(ctx, 'last', { runsDir: run.runsDir })).toBe(0);
    const out = ctx.out();
    expect(out).toMatch(/attempt-3\s+\S{12}\s+removed \(sandbox-harness gc, or by hand\)/);
    expect(out).not.toMatch(/sandbox-harness shell/);
  });

  it('shell and rerun-tests say it was removed, exit 2', async () => {
    for (const command of [shellCommand, rerunTestsCommand]) {
      const refused = await failure(command(capturedContext(run.root), 'last', { runsDir: run.runsDir }));
      expect(refused.code).toBe(2);
      expect(refused.message).toMatch(/was removed \(sandbox-harness gc, or by hand\)/);
    }
  });
});
