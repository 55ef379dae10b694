import { describe, expect, it } from 'vitest';
import { SandboxPool } from '../../../src/fix/sandboxes.js';
import { WarmPool } from '../../../src/sandbox/pool/warm-pool.js';
import { BackgroundRemovals } from '../../../src/sandbox/removals.js';
import type { Sandbox } from '../../../src/sandbox/types.js';
import { MemoryBackend } from '../../fakes/memory-sandbox.js';

/** Holds every `dispose({ keep: false })` of the backend's sandboxes until `open()`. */
function heldRemovals(backend: MemoryBackend): { open: () => void } {
  let open = () => {};
  const gate = new Promise<void>((resolve) => (open = resolve));
  const create = backend.create.bind(backend);
  backend.create = async (spec) => {
    const sandbox: Sandbox = await create(spec);
    const dispose = sandbox.dispose.bind(sandbox);
    sandbox.dispose = async (options = {}) => {
      if (!options.keep) await gate;
      return dispose(options);
    };
    return sandbox;
  };
  return { open };
}

describe('SandboxPool', () => {
  it('does not record a verification sandbox made ahead for an attempt that was never verified', async () => {
    const backend = new MemoryBackend({ 'a.txt': Buffer.from('a') });
    const pool = new SandboxPool(
      backend,
      (role) => ({ image: 'memory:repo', runId: 'r1', role }),
      'on-failure',
    );
    const attempt = await pool.create('attempt-1');
    pool.makeAhead('verify-1');
    // The attempt was rejected: its verification sandbox is dropped unused.
    await pool.dropAhead('verify-1');
    await pool.closeAll(true, () => undefined);
    expect(pool.records.map((r) => [r.role, r.kept])).toEqual([['attempt-1', true]]);
    expect(pool.records[0]?.id).toBe(attempt.id);
    // It was made, and it is gone: nothing of it is left on the engine.
    const verify = backend.created.find((c) => c.spec.role === 'verify-1');
    expect(verify?.sandbox.disposed).toEqual({ keep: false });
  });

  it('records a verification sandbox that was used, kept by the policy', async () => {
    const backend = new MemoryBackend({ 'a.txt': Buffer.from('a') });
    const pool = new SandboxPool(
      backend,
      (role) => ({ image: 'memory:repo', runId: 'r1', role }),
      'on-failure',
    );
    await pool.create('attempt-1');
    pool.makeAhead('verify-1');
    await pool.create('verify-1');
    await pool.dropAhead('verify-1');
    await pool.closeAll(true, () => undefined);
    expect(pool.records.map((r) => [r.role, r.kept])).toEqual([
      ['attempt-1', true],
      ['verify-1', true],
    ]);
  });

  it('with a warm pool, a sandbox made ahead comes from the pool, and what no step took is drained, not kept', async () => {
    const backend = new MemoryBackend({ 'a.txt': Buffer.from('a') });
    const warm = new WarmPool(backend, { capacity: 4 });
    const pool = new SandboxPool(warm, (role) => ({ image: 'memory:repo', runId: 'r1', role }), 'on-failure');
    pool.makeAhead('attempt-1');
    pool.makeAhead('verify-1');
    const attempt = await pool.create('attempt-1');
    expect(warm.stats()).toMatchObject({ handedOut: 1, cold: 0 });
    await pool.closeAll(true, () => undefined);
    expect(pool.records.map((r) => [r.role, r.kept, r.id])).toEqual([['attempt-1', true, attempt.id]]);
    const verify = backend.created.find((c) => c.spec.role === 'verify-1');
    expect(verify?.sandbox.disposed).toEqual({ keep: false });
    expect(warm.stats()).toMatchObject({ ready: 0, starting: 0 });
  });

  it("with an eval's shared pool, the run's own sandboxes are made ahead as without one; closing drains only the run's", async () => {
    const backend = new MemoryBackend({ 'a.txt': Buffer.from('a') });
    const warm = new WarmPool(backend, { capacity: 4, shared: true });
    // Another trial's sandbox waiting in the same pool.
    warm.warm({ image: 'memory:repo', runId: 'r2', role: 'attempt-1' });
    const pool = new SandboxPool(warm, (role) => ({ image: 'memory:repo', runId: 'r1', role }), 'never');
    pool.makeAhead('verify-1');
    const verify = await pool.create('verify-1');
    // Made for this run straight away (no proof on its path), never parked in the pool.
    expect(backend.created.find((c) => c.spec.runId === 'r1')?.sandbox).toBe(verify);
    expect(warm.stats()).toMatchObject({ handedOut: 0, cold: 1 });
    await pool.closeAll(false, () => undefined);
    // r2's sandbox still waits for r2.
    expect(warm.stats()).toMatchObject({ ready: 1 });
    await warm.drain();
  });

  it("with an eval's removals, a run closes before its sandboxes not kept are gone; kept ones and egress ones go on its path", async () => {
    const backend = new MemoryBackend({ 'a.txt': Buffer.from('a') });
    const held = heldRemovals(backend);
    const removals = new BackgroundRemovals();
    const pool = new SandboxPool(
      backend,
      (role) => ({ image: 'memory:repo', runId: 'r1', role }),
      'never',
      undefined,
      removals,
    );
    await pool.create('attempt-1');
    await pool.create('verify-1');
    let closed = false;
    const closing = pool.closeAll(false, () => undefined).then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // The run's end did not wait for the engine; its record already says neither was kept.
    expect(closed).toBe(true);
    expect(pool.records.map((r) => [r.role, r.kept])).toEqual([
      ['attempt-1', false],
      ['verify-1', false],
    ]);
    expect(removals.size).toBe(2);
    expect(backend.created.every((c) => c.sandbox.disposed === undefined)).toBe(true);
    held.open();
    await closing;
    expect(await removals.settle()).toEqual([]);
    expect(backend.created.map((c) => c.sandbox.disposed)).toEqual([{ keep: false }, { keep: false }]);

    // A sandbox with an egress proxy is removed on the run's path (its log is read after).
    const proxied = new SandboxPool(
      backend,
      (role) => ({
        image: 'memory:repo',
        runId: 'r2',
        role,
        egress: {
          allow: [{ host: 'example.test', ports: [443] }],
          deny: [],
          privateRanges: [],
          resolvers: [],
        },
      }),
      'never',
      undefined,
      removals,
    );
    await proxied.create('attempt-1');
    await proxied.closeAll(false, () => undefined);
    expect(removals.size).toBe(0);
    expect(backend.created.at(-1)?.sandbox.disposed).toEqual({ keep: false });
  });

  it("with an eval's removals, a kept sandbox is stopped and kept on the run's path, never in the background", async () => {
    const backend = new MemoryBackend({ 'a.txt': Buffer.from('a') });
    const removals = new BackgroundRemovals();
    const pool = new SandboxPool(
      backend,
      (role) => ({ image: 'memory:repo', runId: 'r1', role }),
      'always',
      undefined,
      removals,
    );
    await pool.create('attempt-1');
    await pool.closeAll(true, () => undefined);
    expect(removals.size).toBe(0);
    expect(backend.created[0]?.sandbox.disposed).toEqual({ keep: true });
    expect(pool.records.map((r) => [r.role, r.kept])).toEqual([['attempt-1', true]]);
  });

  it("after an infrastructure failure, a run removes its sandboxes on its path even with an eval's removals", async () => {
    const backend = new MemoryBackend({ 'a.txt': Buffer.from('a') });
    const held = heldRemovals(backend);
    const removals = new BackgroundRemovals();
    const pool = new SandboxPool(
      backend,
      (role) => ({ image: 'memory:repo', runId: 'r1', role }),
      'never',
      undefined,
      removals,
    );
    await pool.create('attempt-1');
    let closed = false;
    const closing = pool.closeAll(true, () => undefined, true).then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Removing is how a backend learns a node is lost: the retry must not come before it.
    expect(closed).toBe(false);
    expect(removals.size).toBe(0);
    held.open();
    await closing;
    expect(backend.created[0]?.sandbox.disposed).toEqual({ keep: false });
  });
});
