/**
 * The first step of fix writes nothing before the inputs are known good and the engine
 * answers: an engine that does not answer ends the run before a record exists.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runFix } from '../../../src/fix/run-fix.js';
import { ConfigError, SandboxUnavailable } from '../../../src/errors.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';
import { MemoryBackend } from '../../fakes/memory-sandbox.js';
import { scripted, text } from '../agent/helpers.js';

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

describe('prepare', () => {
  it('an engine that does not answer ends fix before anything is written', async () => {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-prepare-'));
    roots.push(root);
    await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
    const run = runFix(
      {
        ticket: 'OPS-412',
        catalogFile: join(root, 'shipping-service.yaml'),
        keep: 'on-failure',
        apply: true,
        force: false,
        rebuild: false,
        cwd: root,
        env: {},
        signal: new AbortController().signal,
        readStdin: async () => '',
        provider: 'replay',
      },
      {
        backend: new MemoryBackend({}),
        ping: async () => {
          throw new SandboxUnavailable('cannot reach the Docker daemon');
        },
        image: async () => {
          throw new Error('never asked');
        },
        createProvider: async () => scripted([{ content: [text('x')] }]),
      },
    );
    await expect(run).rejects.toBeInstanceOf(SandboxUnavailable);
    expect(await readdir(join(root, 'repo'))).not.toContain('.sandbox-harness');
  });
});

describe('prepare with sandbox.egress', () => {
  async function withEgress(egressProblem: (() => Promise<string | undefined>) | undefined) {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-prepare-egress-'));
    roots.push(root);
    await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
    const file = join(root, 'shipping-service.yaml');
    const text0 = await readFile(file, 'utf8');
    await writeFile(
      file,
      text0.replace(/^sandbox:\n/m, 'sandbox:\n  egress:\n    allow: [registry.npmjs.org]\n'),
    );
    expect(await readFile(file, 'utf8')).toContain('registry.npmjs.org');
    const backend = new MemoryBackend({});
    if (egressProblem) Object.assign(backend, { egressProblem });
    return runFix(
      {
        ticket: 'OPS-412',
        catalogFile: file,
        keep: 'on-failure',
        apply: true,
        force: false,
        rebuild: false,
        cwd: root,
        env: {},
        signal: new AbortController().signal,
        readStdin: async () => '',
        provider: 'replay',
      },
      {
        backend,
        ping: async () => undefined,
        image: async () => {
          throw new Error('never asked');
        },
        createProvider: async () => scripted([{ content: [text('x')] }]),
      },
    ).then(
      () => undefined,
      (error: unknown) => ({ error, written: readdir(join(root, 'repo')) }),
    );
  }

  it('is refused before anything is made when the backend cannot enforce it, never run with more network', async () => {
    for (const problem of [undefined, async () => 'this engine is not on this machine']) {
      const failed = await withEgress(problem);
      expect(failed?.error).toBeInstanceOf(ConfigError);
      expect((failed?.error as Error).message).toMatch(/sandbox\.egress cannot be enforced here/);
      expect(await failed!.written).not.toContain('.sandbox-harness');
    }
  });
});
