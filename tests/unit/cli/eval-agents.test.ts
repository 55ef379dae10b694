/** `eval --agent` repeated: the agents checked before anything runs, and the side-by-side rows. */
import { describe, expect, it } from 'vitest';
import {
  agentRows,
  agentsMarkdown,
  agentsOf,
  type EvalCommandOptions,
} from '../../../src/cli/commands/eval.js';
import { UsageError } from '../../../src/errors.js';
import type { SuiteResult } from '../../../src/evals/run-suite.js';

function summaryOf(
  passes: number,
  scored: number,
  perSolvedUsd: number | null,
): Pick<SuiteResult, 'summary'> {
  return {
    summary: {
      overall: {
        passes,
        scored,
        passRate: scored ? passes / scored : null,
        interval: { low: 0.1, high: 0.9 },
        passAtK: [
          { k: 1, value: scored ? passes / scored : null },
          { k: 2, value: passes > 0 ? 1 : 0 },
        ],
        durationMs: { mean: 65_000, median: 65_000, total: 130_000 },
        cost: { totalUsd: 1, perTrial: { mean: 0.5, median: 0.5, total: 1 }, perSolvedUsd },
      },
    } as unknown as SuiteResult['summary'],
  };
}

describe('eval across agents', () => {
  it('takes each agent once, in order, and refuses an unknown one before anything runs', () => {
    expect(agentsOf({ agent: ['codex', 'builtin', 'codex'] } as EvalCommandOptions)).toEqual([
      'codex',
      'builtin',
    ]);
    expect(agentsOf({} as EvalCommandOptions)).toEqual([]);
    expect(() => agentsOf({ agent: ['aider'] } as EvalCommandOptions)).toThrow(UsageError);
  });

  it('puts the agents side by side: passes, pass rate with its interval, cost per solved task, time', () => {
    const rows = agentRows([
      { agent: 'builtin', result: summaryOf(3, 4, 0.25) },
      { agent: 'codex', result: summaryOf(0, 4, null) },
    ]);
    expect(rows[0]).toEqual([
      'agent',
      'passed',
      'pass rate',
      '95% interval',
      'pass@k',
      'per solved',
      'mean time',
    ]);
    expect(rows[1]!.slice(0, 6)).toEqual(['builtin', '3/4', '75%', '[10%, 90%]', '@1 75%, @2 100%', '$0.25']);
    expect(rows[2]!.slice(0, 6)).toEqual(['codex', '0/4', '0%', '[10%, 90%]', '@1 0%, @2 0%', '-']);
    expect(rows[1]![6]).toMatch(/1m0?5s/);
    // The same rows as a page beside the agents' own folders.
    const page = agentsMarkdown('shipping', rows, ['builtin', 'codex']);
    expect(page).toContain('| builtin | 3/4 | 75% | [10%, 90%] | @1 75%, @2 100% | $0.25 |');
    expect(page).toContain('- codex: [report](codex/report.md)');
  });
});
