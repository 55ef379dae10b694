import { describe, expect, it } from 'vitest';
import { summarize } from '../../../src/evals/summary.js';
import { fakeSuite, result } from './helpers.js';

const meta = {
  suite: fakeSuite(['reviewed', 'plain']),
  n: 4,
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:01:00.000Z',
  harnessVersion: '1.0.0',
};

describe('the checker next to the tests in an eval summary', () => {
  it('reports the approval rate and the trials where the two verdicts disagree', () => {
    const t = (trial: number, approved: boolean, verified = true) =>
      result({ taskId: 'reviewed', trial }, approved ? 'ready-for-review' : 'not-approved', {
        verified,
        approved,
      });
    const summary = summarize(
      [
        t(0, true),
        t(1, false),
        t(2, false),
        result({ taskId: 'reviewed', trial: 3 }, 'tests-failed', { verified: false }),
        result({ taskId: 'plain', trial: 0 }, 'ready-for-review', { verified: true }),
      ],
      meta,
    );
    const task = summary.tasks.find((s) => s.taskId === 'reviewed')!;
    expect(task.review).toEqual({
      reviewed: 3,
      approved: 1,
      approvalRate: 1 / 3,
      testsPassed: 3,
      testsPassedNotApproved: 2,
    });
    expect(task.passes).toBe(1);
    expect(summary.tasks.find((s) => s.taskId === 'plain')!.review).toBeUndefined();
    expect(summary.overall.review).toMatchObject({ reviewed: 3, approved: 1, testsPassed: 4 });
  });

  it('has no review data when nothing was reviewed', () => {
    const summary = summarize([result({ taskId: 'plain', trial: 0 }, 'ready-for-review')], meta);
    expect(summary.overall.review).toBeUndefined();
  });
});
