/**
 * The acceptance case with a fake trial runner: three tasks, three trials each,
 * one always passing, one always failing, one passing on trials 0 and 2 only. Every
 * expected number below is worked out by hand in the comments.
 */
import { describe, expect, it } from 'vitest';
import { runEval } from '../../../src/evals/runner.js';
import { summarize, type EvalSummary, type TaskSummary } from '../../../src/evals/summary.js';
import type { TrialRunner } from '../../../src/evals/types.js';
import { fakeSuite, result, withTempDir } from './helpers.js';

const runner: TrialRunner = async (spec) => {
  if (spec.taskId === 'always') return result(spec, 'ready-for-review', { turns: 3 });
  if (spec.taskId === 'never') return result(spec, 'tests-failed', { turns: 10 });
  return result(spec, spec.trial === 1 ? 'max-turns' : 'ready-for-review', { turns: 5 + spec.trial });
};

async function evaluate(): Promise<EvalSummary> {
  return withTempDir(async (dir) => {
    const suite = fakeSuite(['always', 'never', 'flaky']);
    const run = await runEval({ suite, n: 3, concurrency: 2, outDir: dir, runner });
    return summarize(run.results, {
      suite,
      n: 3,
      startedAt: run.startedAt,
      finishedAt: run.finishedAt,
      harnessVersion: '0.0.0-test',
    });
  });
}

function task(summary: EvalSummary, id: string): TaskSummary {
  const found = summary.tasks.find((t) => t.taskId === id);
  if (!found) throw new Error(`no task ${id}`);
  return found;
}

const values = (list: Array<{ value: number | null }>): Array<number | null> => list.map((v) => v.value);

describe('a 3-task x 3-trial eval', () => {
  it('counts passes and failures per task', async () => {
    const s = await evaluate();
    expect(s.tasks.map((t) => [t.taskId, t.scored, t.passes, t.failures])).toEqual([
      ['always', 3, 3, 0],
      ['never', 3, 0, 3],
      ['flaky', 3, 2, 1],
    ]);
    expect(task(s, 'flaky').passRate).toBeCloseTo(2 / 3, 12);
  });

  it('gives pass@k per task: always [1,1,1], never [0,0,0], flaky [2/3,1,1]', async () => {
    const s = await evaluate();
    expect(values(task(s, 'always').passAtK)).toEqual([1, 1, 1]);
    expect(values(task(s, 'never').passAtK)).toEqual([0, 0, 0]);
    // flaky, n=3 c=2: k=1 1 - C(1,1)/C(3,1) = 2/3; k=2 1 - C(1,2)/C(3,2) = 1 - 0; k=3 likewise
    expect(values(task(s, 'flaky').passAtK)).toEqual([expect.closeTo(2 / 3, 12), 1, 1]);
  });

  it('gives pass^k per task: flaky [2/3, 1/3, 0]', async () => {
    const s = await evaluate();
    expect(values(task(s, 'always').passHatK)).toEqual([1, 1, 1]);
    expect(values(task(s, 'never').passHatK)).toEqual([0, 0, 0]);
    // C(2,1)/C(3,1) = 2/3, C(2,2)/C(3,2) = 1/3, C(2,3)/C(3,3) = 0
    expect(values(task(s, 'flaky').passHatK)).toEqual([
      expect.closeTo(2 / 3, 12),
      expect.closeTo(1 / 3, 12),
      0,
    ]);
  });

  it('averages pass@k and pass^k over tasks for the overall curve', async () => {
    const s = await evaluate();
    // pass@k: k=1 (1 + 0 + 2/3)/3 = 5/9; k=2 (1 + 0 + 1)/3 = 2/3; k=3 2/3
    expect(values(s.overall.passAtK)).toEqual([
      expect.closeTo(5 / 9, 12),
      expect.closeTo(2 / 3, 12),
      expect.closeTo(2 / 3, 12),
    ]);
    // pass^k: k=1 5/9; k=2 (1 + 0 + 1/3)/3 = 4/9; k=3 (1 + 0 + 0)/3 = 1/3
    expect(values(s.overall.passHatK)).toEqual([
      expect.closeTo(5 / 9, 12),
      expect.closeTo(4 / 9, 12),
      expect.closeTo(1 / 3, 12),
    ]);
  });

  it('pools 5 passes of 9 for the overall rate with its Wilson interval [0.2667, 0.8112]', async () => {
    const s = await evaluate();
    expect(s.overall).toMatchObject({ scored: 9, passes: 5, failures: 4, planned: 9, recorded: 9 });
    expect(s.overall.passRate).toBeCloseTo(5 / 9, 12);
    expect(s.overall.interval.low).toBeCloseTo(0.2667, 3);
    expect(s.overall.interval.high).toBeCloseTo(0.8112, 3);
    // 2/3 for the flaky task: [0.2077, 0.9385]
    expect(task(s, 'flaky').interval.low).toBeCloseTo(0.2077, 3);
    expect(task(s, 'flaky').interval.high).toBeCloseTo(0.9385, 3);
  });

  it('names only the flaky task as flaky and counts failure categories', async () => {
    const s = await evaluate();
    expect(s.overall.flakyTasks).toEqual(['flaky']);
    expect(s.overall.categories).toMatchObject({
      'ready-for-review': 5,
      'tests-failed': 3,
      'max-turns': 1,
      infrastructure: 0,
    });
  });

  it('gives mean and median turns per task', async () => {
    const s = await evaluate();
    // flaky turns are 5, 6, 7
    expect(task(s, 'flaky').turns).toEqual({ mean: 6, median: 6, total: 18 });
    // all nine: 3,3,3, 10,10,10, 5,6,7 -> total 57, mean 57/9, sorted middle (5th) value 6
    expect(s.overall.turns.total).toBe(57);
    expect(s.overall.turns.mean).toBeCloseTo(57 / 9, 12);
    expect(s.overall.turns.median).toBe(6);
  });
});
