import { describe, expect, it } from 'vitest';
import { renderHtml, renderMarkdown } from '../../../src/evals/report.js';
import { summarize } from '../../../src/evals/summary.js';
import { trialResultSchema, type TrialTests } from '../../../src/evals/types.js';
import { fakeSuite, result } from './helpers.js';

const tests = (extra: Partial<TrialTests>): TrialTests => ({
  passed: 3,
  failed: 0,
  skipped: 0,
  exitCode: 0,
  failing: [],
  ...extra,
});

describe('per-test results in the eval summary and reports', () => {
  const results = [
    result({ taskId: 'inst-1', trial: 0 }, 'ready-for-review', {
      tests: tests({ verdict: 'resolved', exitCode: 1 }),
    }),
    result({ taskId: 'inst-1', trial: 1 }, 'tests-failed', {
      tests: tests({ verdict: 'unresolved', failed: 1, failing: ['test/a.test.ts > boundary'] }),
    }),
    result({ taskId: 'inst-1', trial: 2 }, 'tests-failed', {
      tests: tests({
        verdict: 'no-report',
        passed: 0,
        refused: 'report.xml refused: nested deeper than 32 elements',
        failing: ['test/a.test.ts > boundary', 'x'],
      }),
    }),
    result({ taskId: 'plain', trial: 0 }, 'ready-for-review'),
    result({ taskId: 'plain', trial: 1 }, 'ready-for-review'),
    result({ taskId: 'plain', trial: 2 }, 'ready-for-review'),
  ];
  const summary = summarize(results, {
    suite: fakeSuite(['inst-1', 'plain']),
    n: 3,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:01:00.000Z',
    harnessVersion: '1.2.3',
  });

  it('counts resolved trials and the tests failing most often, per task; tasks without reports have none', () => {
    expect(summary.tasks[0]?.tests).toEqual({
      trials: 3,
      refused: 1,
      named: 3,
      resolved: 1,
      failing: [
        { id: 'test/a.test.ts > boundary', trials: 2 },
        { id: 'x', trials: 1 },
      ],
    });
    expect(summary.tasks[1]?.tests).toBeUndefined();
  });

  it('adds a section to both reports, only when some trial had a report', () => {
    const md = renderMarkdown(summary);
    expect(md).toContain('## Per-test results');
    expect(md).toContain('| inst-1 | 3 | 1 | 1/3 | test/a.test.ts > boundary (2); x (1) |');
    expect(renderHtml(summary)).toContain('<h2>Per-test results</h2>');
    const plain = summarize(results.slice(3), {
      suite: fakeSuite(['plain']),
      n: 3,
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:01:00.000Z',
      harnessVersion: '1.2.3',
    });
    expect(renderMarkdown(plain)).not.toContain('Per-test results');
  });

  it('results.jsonl lines with tests read back for --resume', () => {
    const line = JSON.parse(JSON.stringify(results[1]));
    expect(trialResultSchema.parse(line).tests).toEqual(results[1]?.tests);
  });
});
