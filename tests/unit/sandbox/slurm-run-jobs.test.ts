/**
 * A run's sandboxes share the run's one Slurm job (src/sandbox/slurm/run-jobs.ts): a run never
 * waits in the queue for a second allocation while it holds one, which deadlocks a full cluster.
 */
import { describe, expect, it } from 'vitest';
import { RunJobs } from '../../../src/sandbox/slurm/run-jobs.js';

function jobs() {
  const cancelled: string[] = [];
  let next = 100;
  const placed: string[] = [];
  const runJobs = new RunJobs(async (job) => {
    cancelled.push(job);
  });
  const place = async () => {
    const job = String(next++);
    placed.push(job);
    return { job, node: `node${placed.length}` };
  };
  return { runJobs, place, placed, cancelled };
}

describe('one Slurm job per run', () => {
  it("a run's second sandbox joins the job its first holds, with a name of its own; the job ends with the last", async () => {
    const { runJobs, place, placed, cancelled } = jobs();
    const attempt = await runJobs.acquire('run-a', place);
    const verify = await runJobs.acquire('run-a', place);
    expect(placed).toEqual(['100']);
    expect([attempt.job, verify.job]).toEqual(['100', '100']);
    expect([attempt.seq, verify.seq]).toEqual([0, 1]);
    await attempt.release();
    await attempt.release();
    expect(cancelled).toEqual([]);
    await verify.release();
    expect(cancelled).toEqual(['100']);
    // The run holds nothing now: its next sandbox waits for a job like any other.
    const next = await runJobs.acquire('run-a', place);
    expect([next.job, next.seq]).toEqual(['101', 0]);
  });

  it('other runs and sandboxes without a run get jobs of their own', async () => {
    const { runJobs, place, placed, cancelled } = jobs();
    const a = await runJobs.acquire('run-a', place);
    const b = await runJobs.acquire('run-b', place);
    const loose = await runJobs.acquire(undefined, place);
    expect(placed).toEqual(['100', '101', '102']);
    await loose.release();
    expect(cancelled).toEqual(['102']);
    await Promise.all([a.release(), b.release()]);
    expect(cancelled.sort()).toEqual(['100', '101', '102']);
  });

  it('a job whose node was lost is not joined again; a failed placement is not remembered', async () => {
    const { runJobs, place, placed } = jobs();
    const first = await runJobs.acquire('run-a', place);
    runJobs.forget(first.job);
    await new Promise((r) => setImmediate(r));
    const second = await runJobs.acquire('run-a', place);
    expect(second.job).not.toBe(first.job);
    await expect(runJobs.acquire('run-c', async () => Promise.reject(new Error('no node')))).rejects.toThrow(
      'no node',
    );
    const third = await runJobs.acquire('run-c', place);
    expect(third.seq).toBe(0);
    expect(placed).toHaveLength(3);
  });

  it("the eval's shared baseline joins a job this process holds instead of queueing behind the runs that wait for it", async () => {
    const { runJobs, place, placed, cancelled } = jobs();
    let grant: (() => void) | undefined;
    const slow = () =>
      new Promise<{ job: string; node: string }>((resolve) => (grant = () => void place().then(resolve)));
    // Run b's job waits in the queue; the baseline waits for it rather than submit its own.
    const b = runJobs.acquire('run-b', slow);
    const baseline = runJobs.acquire('run-a', place, { shared: true });
    await new Promise((r) => setTimeout(r, 10));
    expect(placed).toEqual([]);
    grant!();
    const [bLease, baseLease] = await Promise.all([b, baseline]);
    expect(baseLease.job).toBe(bLease.job);
    expect(baseLease.seq).toBe(1);
    await baseLease.release();
    expect(cancelled).toEqual([]);
    await bLease.release();
    expect(cancelled).toEqual([bLease.job]);
    // Nothing held: a job of its own.
    const alone = await runJobs.acquire('run-a', place, { shared: true });
    expect(alone.seq).toBe(0);
    expect(placed).toHaveLength(2);
  });

  it('the shared baseline joins no job on a node left out since it was placed: it places its own at once', async () => {
    const { runJobs, place, placed } = jobs();
    const held = await runJobs.acquire('run-b', place);
    const baseline = await runJobs.acquire('run-a', place, {
      shared: true,
      usable: (job) => job.node !== held.node,
    });
    expect(baseline.job).not.toBe(held.job);
    expect([baseline.seq, placed]).toEqual([0, [held.job, baseline.job]]);
  });
});
