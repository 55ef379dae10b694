/**
 * The eval's shared pool: while a trial asks for its first sandbox, the same sandbox is warmed
 * for the next trial of its task, under that trial's run id (fixed ahead), and handed to that
 * trial only; the last trial warms nothing; a retry has a run id of its own; what nobody took
 * is drained at the end.
 */
import { describe, expect, it } from 'vitest';
import { TrialPools } from '../../../src/evals/trial-pools.js';
import { MemoryBackend } from '../../fakes/memory-sandbox.js';
import type { SandboxSpec } from '../../../src/sandbox/types.js';

const AT = new Date('2026-12-02T10:00:00.123Z');

function setup(trials = 3) {
  const backend = new MemoryBackend({ 'src/a.ts': 'one\n' });
  const pools = new TrialPools({ capacity: 8, trials, startedAt: AT });
  return { backend, pools, pool: pools.poolFor('local', backend) };
}

const first = (runId: string): SandboxSpec => ({
  image: 'memory:repo',
  runId,
  role: 'attempt-1',
  hidden: [],
});

describe('TrialPools', () => {
  it("run ids are fixed by the eval's start, a retry's with a suffix of its own", () => {
    const { pools } = setup();
    expect(pools.runIdOf('fees', 0)).toBe('fees-t0-20261202T100000123');
    expect(pools.runIdOf('fees', 0, 1)).toBe('fees-t0-20261202T100000123-r1');
  });

  it('each try of a trial begins under its own run id, and a begun trial is not warmed for', async () => {
    const { backend, pools, pool } = setup();
    expect(pools.begin('fees', 1)).toBe(pools.runIdOf('fees', 1));
    expect(pools.begin('fees', 1)).toBe(pools.runIdOf('fees', 1, 1));
    await pool.create(first(pools.begin('fees', 0)));
    await vi_settle();
    expect(backend.created).toHaveLength(1);
  });

  it("a trial's first sandbox warms the next trial's, which takes it; the last trial warms nothing", async () => {
    const { backend, pools, pool } = setup(2);
    const t0 = pools.runIdOf('fees', 0);
    pools.start(t0);
    const mine = await pool.create(first(t0));
    expect(mine.labels).toMatchObject({ run: t0 });
    // The next trial's, warming under its own run id.
    const t1 = pools.runIdOf('fees', 1);
    await vi_settle();
    expect(backend.created.map((c) => c.spec.runId)).toEqual([t0, t1]);
    pools.start(t1);
    const taken = await pool.create(first(t1));
    expect(taken).toBe(backend.created[1]!.sandbox);
    expect(pool.stats()).toMatchObject({ handedOut: 1, cold: 1 });
    // t1 is the last trial: nothing more is made.
    await vi_settle();
    expect(backend.created).toHaveLength(2);
  });

  it("nothing is warmed from an image that does not last past its trial (a trial's own setup)", async () => {
    const backend = new MemoryBackend({ 'src/a.ts': 'one\n' });
    const pools = new TrialPools({
      capacity: 8,
      trials: 3,
      startedAt: AT,
      lasts: (image) => image !== 'fork:own-setup',
    });
    const pool = pools.poolFor('local', backend);
    const t0 = pools.begin('fees', 0);
    await pool.create({ ...first(t0), image: 'fork:own-setup' });
    await vi_settle();
    expect(backend.created.map((c) => c.spec.runId)).toEqual([t0]);
    // One that lasts (the pristine image, a shared setup) is warmed as before.
    const t1 = pools.begin('fees', 1);
    await pool.create(first(t1));
    await vi_settle();
    expect(backend.created.map((c) => c.spec.runId)).toEqual([t0, t1, pools.runIdOf('fees', 2)]);
    await pools.drain();
  });

  it('a sandbox warmed for the next trial goes to nothing else: another run, another spec, another task', async () => {
    const { backend, pools, pool } = setup();
    const t0 = pools.runIdOf('fees', 0);
    await pool.create(first(t0));
    await vi_settle();
    const warmed = backend.created[1]!.sandbox;
    const other = await pool.create(first(pools.runIdOf('parcels', 1)));
    const sameRunOtherRole = await pool.create({ ...first(pools.runIdOf('fees', 1)), role: 'verify-1' });
    expect([other, sameRunOtherRole]).not.toContain(warmed);
    // Only the pool's own warm for the next trial: it never warms on from there by itself.
    expect(backend.created.map((c) => [c.spec.runId, c.spec.role])).toEqual([
      [t0, 'attempt-1'],
      [pools.runIdOf('fees', 1), 'attempt-1'],
      [pools.runIdOf('parcels', 1), 'attempt-1'],
      [pools.runIdOf('parcels', 2), 'attempt-1'],
      [pools.runIdOf('fees', 1), 'verify-1'],
      // fees t1's first sandbox asked for (a verification's: a replayed patch's run) warms t2's.
      [pools.runIdOf('fees', 2), 'verify-1'],
    ]);
  });

  it('a trial that started already is not warmed for; a run that ends takes only its own waiting sandboxes; drain takes the rest', async () => {
    const { backend, pools, pool } = setup();
    const t0 = pools.runIdOf('fees', 0);
    const t1 = pools.runIdOf('fees', 1);
    pools.start(t1);
    await pool.create(first(t0));
    await vi_settle();
    expect(backend.created).toHaveLength(1);
    // t1's own verification warmed, and t2's warmed from it; t1's attempt sandbox warms t2's.
    pool.warm({ ...first(t1), role: 'verify-1' });
    await pool.create(first(t1));
    await vi_settle();
    expect(pool.stats().ready).toBe(3);
    await pool.drainRun(t1);
    expect(pool.stats().ready).toBe(2);
    await pools.drain();
    expect(pool.stats()).toMatchObject({ ready: 0, starting: 0 });
    // What the pool held is gone; t1's attempt sandbox, made cold and in use, is the run's.
    const t2 = pools.runIdOf('fees', 2);
    const held = backend.created.filter((c) => c.spec.runId === t2 || c.spec.role === 'verify-1');
    expect(held.map((c) => `${c.spec.runId} ${c.spec.role}`).sort()).toEqual(
      [`${t1} verify-1`, `${t2} attempt-1`, `${t2} verify-1`].sort(),
    );
    for (const c of held) expect(c.sandbox.disposed).toEqual({ keep: false });
    expect(
      backend.created.find((c) => c.spec.role === 'attempt-1' && c.spec.runId === t1)!.sandbox.disposed,
    ).toBe(undefined);
  });
});

/** Lets the pool's background starts finish. */
async function vi_settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}
