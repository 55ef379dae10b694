/**
 * Money in eval summaries and reports: cost per trial and per task, cost per solved task,
 * pass@1 at the eval's budget, and unpriced models named rather than hidden.
 */
import { describe, expect, it } from 'vitest';
import { summarize } from '../../../src/evals/summary.js';
import { renderMarkdown } from '../../../src/evals/report.js';
import { renderHtml } from '../../../src/evals/report-html.js';
import type { TrialResult } from '../../../src/evals/types.js';
import { fakeSuite, result } from './helpers.js';

const meta = (costLimitUsd?: number) => ({
  suite: fakeSuite(['a', 'b']),
  n: 3,
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:01:00.000Z',
  harnessVersion: '1.0.0',
  ...(costLimitUsd !== undefined ? { costLimitUsd } : {}),
});

const results: TrialResult[] = [
  result({ taskId: 'a', trial: 0 }, 'ready-for-review', { costUsd: 0.2 }),
  result({ taskId: 'a', trial: 1 }, 'ready-for-review', { costUsd: 0.6 }),
  result({ taskId: 'a', trial: 2 }, 'tests-failed', { costUsd: 0.4 }),
  result({ taskId: 'b', trial: 0 }, 'budget', { costUsd: 0.5 }),
  result({ taskId: 'b', trial: 1 }, 'tests-failed', { costUsd: 0.3 }),
  // Unscored, but it spent money: in the total, not in cost per solved task.
  result({ taskId: 'b', trial: 2 }, 'infrastructure', { costUsd: 0.1, unpriced: ['mystery-model'] }),
];

describe('eval cost summary', () => {
  it('gives cost per trial, per task and per solved task', () => {
    const s = summarize(results, meta());
    const [a, b] = s.tasks;
    expect(a?.cost?.totalUsd).toBeCloseTo(1.2, 12);
    expect(a?.cost?.perTrial.mean).toBeCloseTo(0.4, 12);
    expect(a?.cost?.perSolvedUsd).toBeCloseTo(1.2 / 2, 12);
    expect(b?.cost?.totalUsd).toBeCloseTo(0.9, 12);
    expect(b?.cost?.perSolvedUsd).toBeNull();
    expect(s.overall.cost?.totalUsd).toBeCloseTo(2.1, 12);
    // Scored trials' cost (2.0) over the 2 passes.
    expect(s.overall.cost?.perSolvedUsd).toBeCloseTo(1.0, 12);
    expect(s.overall.cost?.unpriced).toEqual(['mystery-model']);
    expect(s.overall.cost?.atBudget).toBeUndefined();
    // A budget stop is a scored failure of its own category.
    expect(s.overall.categories.budget).toBe(1);
  });

  it('pass@1 at a fixed budget counts a pass only within that budget', () => {
    const s = summarize(results, meta(0.5));
    // Of 5 scored trials, one passed within $0.50 (the $0.60 pass does not count).
    expect(s.overall.cost?.atBudget).toEqual({ budgetUsd: 0.5, passRate: 1 / 5 });
    expect(s.tasks[0]?.cost?.atBudget?.passRate).toBeCloseTo(1 / 3, 12);
  });

  it('the report has a cost section, and none when no trial has a cost', () => {
    const md = renderMarkdown(summarize(results, meta(0.5)));
    expect(md).toContain('## Cost');
    expect(md).toContain('| **all** | $2.10 | $0.3500 | $1.00 | 20.0% |');
    expect(md).toContain('pass@1 within $0.5000');
    expect(md).toContain('No price for: mystery-model');
    const old = results.map(({ costUsd: _c, unpriced: _u, ...rest }) => rest);
    expect(renderMarkdown(summarize(old, meta()))).not.toContain('## Cost');
  });

  it('says "no price" once when no model that answered had one (replayed cassettes), not a table of $0.0000', () => {
    const replayed = results.map((r) => ({ ...r, costUsd: 0, unpriced: ['recorded-demo'] }));
    const md = renderMarkdown(summarize(replayed, meta()));
    expect(md).toContain('## Cost');
    expect(md).not.toContain('$0.0000');
    expect(md.match(/No price for: recorded-demo/g)).toHaveLength(1);
    expect(md).toContain('not known');
    const page = renderHtml(summarize(replayed, meta()));
    expect(page).not.toContain('$0.0000');
    expect(page).toContain('No price for: recorded-demo');
  });
});
