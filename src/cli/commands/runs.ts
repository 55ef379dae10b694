/** `runs`: the recorded runs, a line each. */
import { Command } from '@commander-js/extra-typings';
import { formatDuration, textTable } from '../../format.js';
import type { RunRecord } from '../../runs/record.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { withRunsLocation } from '../shared-options.js';

function declaration() {
  return withRunsLocation(
    new Command('runs').description('list recorded runs: id, ticket, outcome, attempts, duration, tokens'),
  ).option('--json', 'JSON output');
}

export type RunsOptions = OptionsOf<typeof declaration>;

function summaryRow(record: RunRecord) {
  return {
    id: record.id,
    ticket: record.ticket.id ?? '',
    outcome: record.outcome,
    attempts: String(record.attempts.length),
    duration: record.durationMs === undefined ? '-' : formatDuration(record.durationMs),
    tokens: String(record.tokens.input + record.tokens.output),
    applied: appliedCell(record),
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
      runs.map((r) => ({ ...summaryRow(r.record), dir: r.dir })),
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
      ['id', 'ticket', 'outcome', 'attempts', 'duration', 'tokens', 'applied'],
    ),
  );
  return 0;
}

export const runs = declareCommand(declaration, runsCommand);
