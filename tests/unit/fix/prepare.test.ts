/**
 * The first step of fix writes nothing before the inputs are known good and the engine
 * answers: an engine that does not answer ends the run before a record exists.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runFix } from '../../../src/fix/run-fix.js';
import { SandboxUnavailable } from '../../../src/errors.js';
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
