import { describe, expect, it } from 'vitest';
import {
  planOrder,
  planTrials,
  shardAssignment,
  trialFileName,
  trialKey,
  type TrialId,
} from '../../../src/evals/trial-plan.js';
import { fakeSuite } from './helpers.js';

const ids = (tasks: string[], n: number): TrialId[] =>
  tasks.flatMap((taskId) => Array.from({ length: n }, (_, trial) => ({ taskId, trial })));

describe('the trial plan', () => {
  it('names each trial by a file that is safe on every file system and never shared by two trials that read alike', () => {
    const names = ['a/b', 'a_b', '../x', '.hidden', 'é', ''].map((taskId) =>
      trialFileName({ taskId, trial: 0 }),
    );
    for (const name of names) {
      expect(name).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*\.json$/);
      expect(name).not.toContain('..');
    }
    expect(new Set(names).size).toBe(names.length);
    expect(trialFileName({ taskId: 'a', trial: 1 })).not.toBe(trialFileName({ taskId: 'a', trial: 10 }));
    expect(trialFileName({ taskId: 'x'.repeat(5000), trial: 0 }).length).toBeLessThan(120);
  });

  it('keys a trial unambiguously (a task id holding the separator of another key does not collide)', () => {
    expect(trialKey({ taskId: 'a",1', trial: 0 })).not.toBe(trialKey({ taskId: 'a', trial: 1 }));
  });

  it('orders trials the same whatever order the suite lists its tasks in: trial 0 of every task, then trial 1', () => {
    const a = planOrder(ids(['b', 'a', 'c'], 2)).map((t) => `${t.taskId}#${t.trial}`);
    const b = planOrder(ids(['c', 'b', 'a'], 2)).map((t) => `${t.taskId}#${t.trial}`);
    expect(a).toEqual(b);
    expect(a).toEqual(['a#0', 'b#0', 'c#0', 'a#1', 'b#1', 'c#1']);
  });

  it('deals the trials to shards so that every trial has exactly one shard and sizes differ by at most one', () => {
    for (const count of [1, 2, 3, 7, 40]) {
      const all = ids(['t1', 't2', 't3', 't4', 't5'], 3);
      const shards = shardAssignment(all, count);
      expect(shards.size).toBe(all.length);
      const sizes = Array.from(
        { length: count },
        (_, i) => [...shards.values()].filter((s) => s === i + 1).length,
      );
      expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    }
  });

  it("gives the shards of one eval disjoint shares whose union is the eval's trials", () => {
    const suite = fakeSuite(['x', 'y', 'z']);
    const all = planTrials(suite, 3).all.map(trialKey).sort();
    const shares = [1, 2, 3, 4].map((index) => planTrials(suite, 3, { index, count: 4 }).mine.map(trialKey));
    expect(shares.flat().sort()).toEqual(all);
    expect(new Set(shares.flat()).size).toBe(all.length);
    // The same split from a suite whose list is in another order (another machine's listing).
    const reordered = fakeSuite(['z', 'x', 'y']);
    expect(planTrials(reordered, 3, { index: 2, count: 4 }).mine.map(trialKey).sort()).toEqual(
      [...shares[1]!].sort(),
    );
  });

  it('is unsharded for 1/1', () => {
    const plan = planTrials(fakeSuite(['a']), 2, { index: 1, count: 1 });
    expect(plan.mine).toEqual(plan.all);
    expect(plan.shardOf).toBeUndefined();
  });
});
