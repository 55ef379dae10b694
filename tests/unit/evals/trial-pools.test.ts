/**
 * The eval's shared pool: the first sandboxes of the trials about to start (the next ones of
 * the eval's order, as many as run at once) are warmed from the spec an earlier trial of
 * their task asked for, under their own run ids (fixed ahead), and handed to those trials
 * only; nothing is warmed for a trial far off, nor for one that started; a retry has a run id
 * of its own; what nobody took is drained at the end.
 */
import { describe, expect, it } from 'vitest';
import { TrialPools, type TrialPoolsOptions } from '../../../src/evals/trial-pools.js';
import { MemoryBackend } from '../../fakes/memory-sandbox.js';
import type { SandboxSpec } from '../../../src/sandbox/types.js';

const AT = new Date('2026-12-02T10:00:00.123Z');

/** The plan's order: trial 0 of every task, then trial 1, ... */
const order = (tasks: string[], n: number) =>
  Array.from({ length: n }, (_, trial) => tasks.map((taskId) => ({ taskId, trial }))).flat();

function setup(options: Partial<TrialPoolsOptions> = {}) {
  const backend = new MemoryBackend({ 'src/a.ts': 'one\n' });
  const pools = new TrialPools({
    capacity: 8,
    order: order(['fees'], 3),
    ahead: 1,
    startedAt: AT,
    ...options,
  });
  return { backend, pools, pool: pools.poolFor('local', backend) };
}

const first = (runId: string): SandboxSpec => ({
  image: 'memory:repo',
  runId,
  role: 'attempt-1',
  hidden: [],
});

const made = (backend: MemoryBackend) => backend.created.map((c) => `${c.spec.runId} ${c.spec.role}`);

describe('TrialPools', () => {
  it("run ids are fixed by the eval's start, a retry's with a suffix of its own", () => {
    const { pools } = setup();
    const id = pools.runIdOf('fees', 0);
    expect(id).toMatch(/^fees-t0-20261202T100000123-[0-9a-f]{6}$/);
    expect(pools.runIdOf('fees', 0)).toBe(id);
    expect(pools.runIdOf('fees', 0, 1)).toBe(`${id}-r1`);
    // Another eval started in the same millisecond: ids of its own.
    expect(setup().pools.runIdOf('fees', 0)).not.toBe(id);
  });

  it('each try of a trial begins under its own run id, and a begun trial is not warmed for', async () => {
    const { backend, pools, pool } = setup({ order: order(['fees'], 2) });
    expect(pools.begin('fees', 1)).toBe(pools.runIdOf('fees', 1));
    expect(pools.begin('fees', 1)).toBe(pools.runIdOf('fees', 1, 1));
    await pool.create(first(pools.begin('fees', 0)));
    await vi_settle();
    expect(backend.created).toHaveLength(1);
  });

  it("a trial's first sandbox warms the next trial's, which takes it; the last trial warms nothing", async () => {
    const { backend, pools, pool } = setup({ order: order(['fees'], 2) });
    const t0 = pools.begin('fees', 0);
    const mine = await pool.create(first(t0));
    expect(mine.labels).toMatchObject({ run: t0 });
    // The next trial's, warming under its own run id.
    const t1 = pools.runIdOf('fees', 1);
    await vi_settle();
    expect(backend.created.map((c) => c.spec.runId)).toEqual([t0, t1]);
    pools.begin('fees', 1);
    const taken = await pool.create(first(t1));
    expect(taken).toBe(backend.created[1]!.sandbox);
    expect(pool.stats()).toMatchObject({ handedOut: 1, cold: 1 });
    // t1 is the last trial: nothing more is made.
    await vi_settle();
    expect(backend.created).toHaveLength(2);
  });

  it('warms just in time: the trial that starts next once its task is known, never one far off', async () => {
    const { backend, pools, pool } = setup({ order: order(['a', 'b', 'c'], 2), ahead: 1 });
    for (const task of ['a', 'b']) await pool.create(first(pools.begin(task, 0)));
    await vi_settle();
    // Next in line is c's trial 0, whose task no trial has asked for yet: nothing to warm.
    expect(made(backend)).toEqual([
      `${pools.runIdOf('a', 0)} attempt-1`,
      `${pools.runIdOf('b', 0)} attempt-1`,
    ]);
    await pool.create(first(pools.begin('c', 0)));
    await vi_settle();
    // Now a's trial 1 is next: warmed from a's spec; b's trial 1 (not next yet) is not.
    expect(made(backend).slice(3)).toEqual([`${pools.runIdOf('a', 1)} attempt-1`]);
    const a1 = pools.begin('a', 1);
    await vi_settle();
    // a's trial 1 started: b's trial 1 is next, warmed before a1 even asks for its own.
    expect(made(backend).slice(4)).toEqual([`${pools.runIdOf('b', 1)} attempt-1`]);
    expect(await pool.create(first(a1))).toBe(backend.created[3]!.sandbox);
    expect(pool.stats()).toMatchObject({ handedOut: 1 });
    await pools.drain();
  });

  it('warms as many trials ahead as run at once', async () => {
    const { backend, pools, pool } = setup({ order: order(['a', 'b'], 3), ahead: 2 });
    await pool.create(first(pools.begin('a', 0)));
    await vi_settle();
    // Two not started: b's trial 0 (its task unknown) and a's trial 1, warmed.
    expect(made(backend)).toEqual([
      `${pools.runIdOf('a', 0)} attempt-1`,
      `${pools.runIdOf('a', 1)} attempt-1`,
    ]);
    await pool.create(first(pools.begin('b', 0)));
    await vi_settle();
    // Then a's and b's trial 1; a's trial 2 is three ahead, not warmed.
    expect(made(backend).slice(2)).toEqual([
      `${pools.runIdOf('b', 0)} attempt-1`,
      `${pools.runIdOf('b', 1)} attempt-1`,
    ]);
    await pools.drain();
  });

  it("nothing is warmed from an image that does not last past its trial (a trial's own setup)", async () => {
    const { backend, pools, pool } = setup({ lasts: (image) => image !== 'fork:own-setup' });
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

  it('a sandbox warmed for a trial goes to nothing else: another run, another spec, another task', async () => {
    const { backend, pools, pool } = setup({ order: order(['fees', 'parcels'], 3), ahead: 1 });
    const t0 = pools.begin('fees', 0);
    await pool.create(first(t0));
    const p0 = pools.begin('parcels', 0);
    await pool.create(first(p0));
    await vi_settle();
    // Next in line: fees' trial 1.
    const warmed = backend.created[2]!.sandbox;
    expect(made(backend)[2]).toBe(`${pools.runIdOf('fees', 1)} attempt-1`);
    const other = await pool.create(first(pools.runIdOf('parcels', 1)));
    const sameRunOtherRole = await pool.create({ ...first(pools.runIdOf('fees', 1)), role: 'verify-1' });
    expect([other, sameRunOtherRole]).not.toContain(warmed);
    // fees t1's verification asked for (a replayed patch's run) is learned for fees; its
    // trial 1 has no warm of it (asked already), and nothing else starts before it.
    expect(made(backend).slice(3)).toEqual([
      `${pools.runIdOf('parcels', 1)} attempt-1`,
      `${pools.runIdOf('fees', 1)} verify-1`,
    ]);
    await pools.drain();
  });

  it('a trial that started already is not warmed for; a run that ends takes only its own waiting sandboxes; drain takes the rest', async () => {
    const { backend, pools, pool } = setup({ order: order(['fees'], 3), ahead: 2 });
    const t0 = pools.begin('fees', 0);
    const t1 = pools.begin('fees', 1);
    await pool.create(first(t0));
    await vi_settle();
    // t1 started: only t2 is warmed.
    const t2 = pools.runIdOf('fees', 2);
    expect(made(backend)).toEqual([`${t0} attempt-1`, `${t2} attempt-1`]);
    // t1's own verification warmed by its run; its first request of it warms t2's too.
    pool.warm({ ...first(t1), role: 'verify-1' });
    await pool.create({ ...first(t1), role: 'verify-1' });
    pool.warm({ ...first(t1), role: 'verify-1' });
    await vi_settle();
    expect(pool.stats().ready).toBe(3);
    await pool.drainRun(t1);
    expect(pool.stats().ready).toBe(2);
    await pools.drain();
    expect(pool.stats()).toMatchObject({ ready: 0, starting: 0 });
    const held = backend.created.filter((c) => c.spec.runId === t2);
    expect(held.map((c) => c.spec.role).sort()).toEqual(['attempt-1', 'verify-1']);
    for (const c of held) expect(c.sandbox.disposed).toEqual({ keep: false });
    // t1's verification, taken and in use, is the run's.
    const taken = backend.created.filter((c) => c.spec.runId === t1 && c.spec.role === 'verify-1');
    expect(taken.map((c) => c.sandbox.disposed)).toContain(undefined);
  });
});

/** Lets the pool's background starts finish. */
async function vi_settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}
