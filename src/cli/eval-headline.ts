/** The first line a person reads of an eval, a shard of one, or a merge. */
import type { EvalSummary } from '../evals/summary.js';

export function percent(rate: number | null): string {
  return rate === null ? '-' : `${(rate * 100).toFixed(0)}%`;
}

/**
 * The one line a person reads first. When not every trial could be scored it says so before
 * the rate, so "100%" over half the trials never reads as a clean pass.
 */
export function headline(
  name: string,
  summary: EvalSummary,
  run: {
    results: unknown[];
    total: number;
    resumed: number;
    interrupted: boolean;
    rerun?: number;
    shard?: { index: number; count: number };
  },
): string {
  const o = summary.overall;
  const unscored = [
    o.infrastructure ? `${o.infrastructure} infrastructure` : '',
    o.errors ? `${o.errors} error` : '',
    o.interrupted ? `${o.interrupted} interrupted` : '',
    run.total > run.results.length ? `${run.total - run.results.length} not run` : '',
  ].filter(Boolean);
  const scored = unscored.length > 0 ? `${o.scored}/${run.total} scored, ${unscored.join(', ')}; ` : '';
  const shard = run.shard ? ` (shard ${run.shard.index}/${run.shard.count})` : '';
  return `${name}${shard}: ${scored}${o.passes}/${o.scored} passed (${percent(o.passRate)})${run.resumed ? `, ${run.resumed} resumed` : ''}${run.rerun ? `, ${run.rerun} unscored run again` : ''}${run.interrupted ? ', INTERRUPTED' : ''}`;
}
