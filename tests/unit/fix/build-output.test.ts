/**
 * A new image's build output on the way to a person: a live terminal line shows the latest
 * step, a log (CI, a pipe) gets the phase and its end, never the whole `docker build` log
 * (the log is a file of the run or the check; a failed build's error quotes its last lines).
 */
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { terminalProgress } from '../../../src/cli/progress-line.js';
import { sha256 } from '../../../src/changes/hash.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';
import { runCheck } from '../../../src/fix/check.js';
import type { FixDeps, HostFileState } from '../../../src/fix/run-fix.js';
import { MemoryBackend } from '../../fakes/memory-sandbox.js';
import { listFiles, npmTest } from '../../helpers/memory-run.js';

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

const STEPS = Array.from({ length: 40 }, (_, i) => `Step ${i + 1}/40 : RUN something-${i}`);

async function check(isTTY: boolean): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-build-output-'));
  roots.push(root);
  await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
  const files: Record<string, Buffer> = {};
  const hostFiles = new Map<string, HostFileState>();
  for (const path of await listFiles(join(root, 'repo'))) {
    const content = await readFile(join(root, 'repo', path));
    files[path] = content;
    hostFiles.set(path, { sha256: sha256(content), mode: 0o644, type: 'file' });
  }
  const deps: FixDeps = {
    backend: new MemoryBackend(files, npmTest),
    ping: async () => undefined,
    image: async (request) => {
      for (const line of STEPS) request.onProgress?.(line);
      return { tag: 'memory:repo', imageId: 'sha256:memory', reused: false, hostFiles };
    },
  };
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (c: Buffer) => (text += c.toString()));
  await runCheck(
    {
      catalogFile: join(root, 'shipping-service.yaml'),
      cwd: root,
      rebuild: false,
      expect: 'failing',
      signal: new AbortController().signal,
      progress: terminalProgress(stream, isTTY),
    },
    deps,
  );
  return text;
}

describe("a new image's build output", () => {
  it('is not streamed whole into a log: the phase and its end only', async () => {
    const text = await check(false);
    expect(text).toContain('[image] sandbox image');
    expect(text).toMatch(/-> memory:repo \(built\)/);
    expect(text).not.toContain('Step 1/40');
    expect(text).not.toContain('Step 40/40');
  });

  it('shows on a live terminal line as it goes', async () => {
    const text = await check(true);
    expect(text).toContain('Step 40/40 : RUN something-39');
  });
});
