/** `runs`: the recorded runs, a line each. */
import { Command } from '@commander-js/extra-typings';
import { costKnown, formatDuration, formatUsd, textTable } from '../../format.js';
import type { RunRecord } from '../../runs/record.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { withRunsLocation } from '../shared-options.js';

function declaration() {
  return withRunsLocation(
    new Command('runs').description(
      'list recorded runs: id, ticket, outcome, attempts, duration, tokens, cost',
    ),
  ).option(
    '--json',
    'JSON output: numbers as numbers (durationMs, tokens, costUsd), ISO start and end times, runtime',
  );
}

export type RunsOptions = OptionsOf<typeof declaration>;

/** A run as a table row: text for people. */
function summaryRow(record: RunRecord) {
  return {
    id: record.id,
    ticket: record.ticket.id ?? '',
    outcome: record.outcome,
    attempts: String(record.attempts.length),
    duration: formatDuration(record.durationMs),
    tokens: String(record.tokens.input + record.tokens.output),
    cost: costKnown(record.cost) ? formatUsd(record.cost?.usd) : '-',
    applied: appliedCell(record),
  };
}

/**
 * A run for scripts: numbers as numbers (milliseconds, counts, US dollars), times as ISO 8601,
 * `null` where the record does not say; never the table's display text.
 */
export function runJson(record: RunRecord, dir: string) {
  return {
    id: record.id,
    ticket: record.ticket.id ?? null,
    outcome: record.outcome,
    startedAt: record.startedAt,
    finishedAt: record.finishedAt ?? null,
    durationMs: record.durationMs ?? null,
    attempts: record.attempts.length,
    turns: record.turns,
    tokens: { input: record.tokens.input, output: record.tokens.output },
    /** US dollars; `null` when unknown (no model that answered had a price, or an older record). */
    costUsd: costKnown(record.cost) ? (record.cost?.usd ?? null) : null,
    unpriced: record.cost?.unpriced ?? [],
    /** Whether the verified fix is in the working tree; `null` for a run without one. */
    applied: appliedCell(record) === '-' ? null : record.applied === true,
    appliedAt: record.appliedAt ?? null,
    provider: record.provider,
    backend: record.backend ?? 'docker',
    engine: record.engine ?? 'local',
    runtime: record.runtime ?? null,
    dir,
  };
}

/**
 * `yes` (by fix, or `yes (apply)` later), `no` for a verified fix that is not in the working
 * tree (`sandbox-harness apply <run>` writes it), `-` for a run without one.
 */
export function appliedCell(record: Pick<RunRecord, 'outcome' | 'applied' | 'appliedAt'>): string {
  if (record.applied === true) return record.appliedAt ? 'yes (apply)' : 'yes';
  if (record.outcome === 'ready-for-review' || record.outcome === 'not-applied') return 'no';
  return '-';
}

export async function runsCommand(ctx: CliContext, options: RunsOptions): Promise<number> {
  const { listRuns } = await import('../../runs/record.js');
  const { runsDirOf } = await import('../run-lookup.js');
  const dir = await runsDirOf(ctx, options);
  const runs = await listRuns(dir);
  if (options.json) {
    printJson(
      ctx,
      runs.map((r) => runJson(r.record, r.dir)),
    );
    return 0;
  }
  if (runs.length === 0) {
    print(ctx, `No runs recorded in ${dir}.`);
    return 0;
  }
  print(
    ctx,
    textTable(
      runs.map((r) => summaryRow(r.record)),
      ['id', 'ticket', 'outcome', 'attempts', 'duration', 'tokens', 'cost', 'applied'],
    ),
  );
  // Said once under the table, not as a column of $0.0000.
  const unpriced = [
    ...new Set(runs.flatMap((r) => (costKnown(r.record.cost) ? [] : (r.record.cost?.unpriced ?? [])))),
  ];
  if (unpriced.length > 0)
    print(
      ctx,
      `cost -: no price for ${unpriced.join(', ')} (a model gets one in the catalog's agent.prices)`,
    );
  return 0;
}

export const runs = declareCommand(declaration, runsCommand);
