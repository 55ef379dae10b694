/**
 * The OCI runtime of a run: the catalog's `sandbox.runtime` or `--runtime` reaches every
 * sandbox spec and the run record; a runtime the engine lacks ends `fix` as a configuration
 * error before an image is built or a record is written.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runFix } from '../../../src/fix/run-fix.js';
import type { FixDeps, FixOptions } from '../../../src/fix/types.js';
import { ConfigError } from '../../../src/errors.js';
import { exitCodeForError } from '../../../src/cli/exit-codes.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';
import type { SandboxSpec } from '../../../src/sandbox/types.js';
import { MemoryBackend } from '../../fakes/memory-sandbox.js';
import { scripted, text } from '../agent/helpers.js';

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

async function example(): Promise<{ root: string; catalogFile: string }> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-runtime-'));
  roots.push(root);
  await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
  return { root, catalogFile: join(root, 'shipping-service.yaml') };
}

function options(root: string, catalogFile: string, extra: Partial<FixOptions> = {}): FixOptions {
  return {
    ticket: 'OPS-412',
    catalogFile,
    keep: 'never',
    apply: false,
    force: true,
    rebuild: false,
    cwd: root,
    env: { XDG_STATE_HOME: join(root, 'state') },
    signal: new AbortController().signal,
    readStdin: async () => '',
    provider: 'replay',
    maxAttempts: 1,
    ...extra,
  };
}

/** An engine that lists runc and runsc, with runc its default. */
function deps(specs: SandboxSpec[], images: string[]): FixDeps {
  return {
    backend: new MemoryBackend(
      { 'README.md': Buffer.from('x') },
      () => ({ exitCode: 1 }),
      (_s, spec) => specs.push(spec),
    ),
    ping: async () => undefined,
    runtime: async (asked) => {
      if (asked && !['runc', 'runsc'].includes(asked))
        throw new ConfigError(
          `runtime "${asked}" is not available on the local engine: it lists runc, runsc`,
        );
      return asked ?? 'runc';
    },
    image: async () => {
      images.push('built');
      return { tag: 'memory:repo', imageId: 'sha256:memory', reused: true, hostFiles: new Map() };
    },
    createProvider: async () => scripted([{ content: [text('nothing to do')] }]),
  };
}

describe('the runtime of a run', () => {
  it('without a catalog runtime or a flag, sandboxes get the engine default, and the record names it', async () => {
    const { root, catalogFile } = await example();
    const specs: SandboxSpec[] = [];
    const result = await runFix(options(root, catalogFile), deps(specs, []));
    expect(result.record.runtime).toBe('runc');
    expect(specs.length).toBeGreaterThan(0);
    for (const spec of specs) expect(spec.runtime).toBeUndefined();
    const onDisk = JSON.parse(await readFile(join(result.runDir, 'run.json'), 'utf8')) as {
      runtime?: string;
    };
    expect(onDisk.runtime).toBe('runc');
  });

  it("the catalog's sandbox.runtime reaches every sandbox and the record; --runtime overrides it", async () => {
    const { root, catalogFile } = await example();
    const yaml = await readFile(catalogFile, 'utf8');
    await writeFile(catalogFile, yaml.replace(/^sandbox:\n/m, 'sandbox:\n  runtime: runsc\n'));
    const specs: SandboxSpec[] = [];
    const result = await runFix(options(root, catalogFile), deps(specs, []));
    expect(result.record.runtime).toBe('runsc');
    expect(specs.map((s) => s.runtime)).toEqual(specs.map(() => 'runsc'));

    const flagged: SandboxSpec[] = [];
    const overridden = await runFix(options(root, catalogFile, { runtime: 'runc' }), deps(flagged, []));
    expect(overridden.record.runtime).toBe('runc');
    expect(flagged.every((s) => s.runtime === 'runc')).toBe(true);
  });

  it('a runtime the engine lacks is a configuration error (exit 2) before any image, sandbox or record', async () => {
    const { root, catalogFile } = await example();
    const specs: SandboxSpec[] = [];
    const images: string[] = [];
    const failure = await runFix(options(root, catalogFile, { runtime: 'kata' }), deps(specs, images)).catch(
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ConfigError);
    expect(String(failure)).toMatch(/runtime "kata" is not available.*lists runc, runsc/);
    expect(exitCodeForError(failure)).toBe(2);
    expect(images).toEqual([]);
    expect(specs).toEqual([]);
    expect(await readdir(join(root, 'repo'))).not.toContain('.sandbox-harness');
  });
});
