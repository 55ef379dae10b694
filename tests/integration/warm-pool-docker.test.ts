/**
 * The warm pool on a real engine: it never hands out a used, stale (the tag now names another
 * image) or differently-configured sandbox, and an abort midway leaves nothing `gc --run`
 * does not remove. The pool's rules in general are in tests/unit/sandbox/warm-pool.test.ts.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { DockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { collectGarbage } from '../../src/sandbox/docker/operator/collect-garbage.js';
import { WarmPool } from '../../src/sandbox/pool/warm-pool.js';
import type { Sandbox, SandboxSpec } from '../../src/sandbox/types.js';
import { fixtureImage } from '../helpers/docker.js';

const run = promisify(execFile);
const engine = dockerEngine();
const runId = `pool-test-${randomBytes(3).toString('hex')}`;
const made: Sandbox[] = [];
const tags: string[] = [];

afterAll(async () => {
  await Promise.all(made.map((s) => s.dispose().catch(() => undefined)));
  await collectGarbage(engine, { runId });
  for (const tag of tags) await run('docker', ['rmi', tag]).catch(() => undefined);
});

async function ofRun(): Promise<string[]> {
  return (await engine.containers.list({ [LABEL.run]: runId })).map((c) => c.id);
}

describe('warm pool on Docker', () => {
  it('hands out a warmed sandbox whose workspace is the image, and never the same one twice', async () => {
    const spec: SandboxSpec = { image: await fixtureImage('conformance'), runId, role: 'attempt-1' };
    const pool = new WarmPool(new DockerBackend(engine), { capacity: 2 });
    pool.warm(spec, 2);
    const a = await pool.create(spec);
    const b = await pool.create(spec);
    made.push(a, b);
    expect(a.id).not.toBe(b.id);
    expect(pool.stats()).toMatchObject({ handedOut: 2, cold: 0 });
    expect((await a.exec('cat src/greeting.txt')).stdout).toBe('hello\n');
    await pool.drain();
  });

  it('never hands out a used sandbox: one whose workspace changed is removed and another made', async () => {
    const spec: SandboxSpec = { image: await fixtureImage('conformance'), runId, role: 'used' };
    const backend = new DockerBackend(engine);
    // A pool whose sandbox someone wrote to while it waited (a bug elsewhere, a hostile image's
    // start-up): the change list proves it is not pristine.
    let tampered: Sandbox | undefined;
    const pool = new WarmPool(
      new Proxy(backend, {
        get(target, key, receiver) {
          if (key === 'create')
            return async (s: SandboxSpec) => {
              const box = await target.create(s);
              if (!tampered) {
                tampered = box;
                await box.exec('printf x > planted.txt');
              }
              return box;
            };
          const value: unknown = Reflect.get(target, key, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      }),
      { capacity: 2 },
    );
    pool.warm(spec);
    const got = await pool.create(spec);
    made.push(got);
    expect(got.id).not.toBe(tampered!.id);
    expect(pool.discards).toEqual(['not pristine: its workspace changed']);
    expect(await engine.containers.inspect(tampered!.id)).toBeUndefined();
    expect((await got.changes()).changes).toEqual([]);
  });

  it('never hands out a stale sandbox: the tag was moved to another image after warming', async () => {
    const image = await fixtureImage('conformance');
    const tag = `sandbox-harness-pool-test:${randomBytes(3).toString('hex')}`;
    tags.push(tag);
    await run('docker', ['tag', image, tag]);
    const spec: SandboxSpec = { image: tag, runId, role: 'stale' };
    const pool = new WarmPool(new DockerBackend(engine), { capacity: 2 });
    pool.warm(spec);
    await new Promise((r) => setTimeout(r, 50));
    // The tag now names another image: what was warmed from the old one may not be used.
    const other = await fixtureImage('tiny-node');
    await run('docker', ['tag', other, tag]);
    const got = await pool.create(spec);
    made.push(got);
    expect(pool.discards).toEqual(['stale: the image reference names another image now']);
    expect((await engine.containers.inspect(got.id))?.imageId).toBe((await engine.images.inspect(other))?.id);
  });

  it('never hands a sandbox to a spec that differs (role, limits, runtime, env)', async () => {
    const image = await fixtureImage('conformance');
    const spec: SandboxSpec = { image, runId, role: 'config' };
    const pool = new WarmPool(new DockerBackend(engine), { capacity: 4 });
    pool.warm(spec);
    const warmed = await pool.create(spec);
    made.push(warmed);
    pool.warm(spec);
    for (const other of [
      { ...spec, role: 'config-2' },
      { ...spec, resources: { memoryBytes: 300 * 1024 * 1024 } },
      { ...spec, env: { EXTRA: '1' } },
    ]) {
      const got = await pool.create(other);
      made.push(got);
      expect(pool.stats().cold).toBeGreaterThan(0);
      const labels = (await engine.containers.inspect(got.id))?.labels ?? {};
      expect(labels[LABEL.role]).toBe(other.role);
    }
    expect(pool.stats()).toMatchObject({ handedOut: 1, cold: 3, ready: 1 });
    await pool.drain();
  });

  it('an abort midway (drain while sandboxes start) leaves nothing; a crash leaves only what gc --run removes', async () => {
    const image = await fixtureImage('conformance');
    const spec: SandboxSpec = { image, runId, role: 'abort' };
    const before = new Set(await ofRun());
    const pool = new WarmPool(new DockerBackend(engine), { capacity: 3 });
    pool.warm(spec, 3);
    await pool.drain();
    expect((await ofRun()).filter((id) => !before.has(id))).toEqual([]);
    // A crash: the process dies with the pool full. Its sandboxes carry the run's labels.
    const crashed = new WarmPool(new DockerBackend(engine), { capacity: 2 });
    crashed.warm({ ...spec, role: 'crash' }, 2);
    await crashed.create({ ...spec, role: 'crash' }).then((s) => made.push(s));
    await new Promise((r) => setTimeout(r, 1000));
    expect((await ofRun()).filter((id) => !before.has(id)).length).toBeGreaterThan(0);
    await collectGarbage(engine, { runId });
    expect(await ofRun()).toEqual([]);
  });
});
