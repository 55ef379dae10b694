/** `logs <run>`: a run's event log (model calls, tool calls, attempts), readable. */
import { Command } from '@commander-js/extra-typings';
import { oneLine } from '../../agent/tool-summary.js';
import { costKnown, formatCost, formatDuration, formatUsd } from '../../format.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { formatConversation } from '../conversation-text.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { withRunsLocation } from '../shared-options.js';

function declaration() {
  return withRunsLocation(
    new Command('logs').description("a run's event log (model calls, tool calls, attempts), readable"),
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .option('--json', 'the events as JSON')
    .option(
      '--verbose',
      'also the whole conversation: model text, tool inputs and results (each cut at 2,000 characters, with a note)',
    );
}

export type LogsOptions = OptionsOf<typeof declaration>;

export interface LoggedEvent {
  time: string;
  kind: string;
  attempt?: number;
  trial?: string;
  turn?: number;
  tool?: string;
  toolUseId?: string;
  /** Of a tool call: its input in one line (the command, path or pattern). */
  input?: string;
  durationMs?: number;
  exitCode?: number;
  isError?: boolean;
  tokens?: { input: number; output: number };
  status?: string;
  message?: string;
  agent?: string;
  parent?: string;
  /** Of an attempt's end: what it cost; of it and the run's end, the run's cost so far. */
  costUsd?: number;
  cost?: { usd: number; unpriced?: string[] };
}

/**
 * What an attempt or the run cost, as the log line says it: an attempt's dollars when the
 * run's models had a price, the run's cost (or its "no price") once at its end. Read back as
 * data: a field of the wrong shape says nothing.
 */
function costFact(e: LoggedEvent): string {
  const cost = e.cost;
  if (typeof cost !== 'object' || cost === null || typeof cost.usd !== 'number') return '';
  const unpriced = Array.isArray(cost.unpriced) ? cost.unpriced.filter((m) => typeof m === 'string') : [];
  const facts = { usd: cost.usd, unpriced };
  if (e.kind === 'run_end') return formatCost(facts);
  if (e.kind === 'attempt_end' && typeof e.costUsd === 'number' && costKnown(facts))
    return formatUsd(e.costUsd);
  return '';
}

/** A call's identity in a log: tool-use ids repeat across attempts and trials (cassettes reuse them). */
function callKey(e: LoggedEvent, id: string | undefined): string {
  return JSON.stringify([e.trial ?? null, e.attempt ?? null, id ?? null]);
}

/**
 * The event log as text. A sub-agent's events (they carry `parent`, the id of the `delegate`
 * call that started it) are shown indented under that call's line, although they were
 * written before it (the call's line is written when it ends); those of a call that never
 * ended stay where they are, indented under a note.
 */
export function formatEventLog(events: readonly LoggedEvent[]): string[] {
  // A sub-agent's events belong to the next call with their key: ids can repeat in one log.
  const owner = new Map<number, number>();
  const pending = new Map<string, number[]>();
  events.forEach((e, i) => {
    if (e.kind === 'tool_call' && e.toolUseId !== undefined) {
      const key = callKey(e, e.toolUseId);
      for (const child of pending.get(key) ?? []) owner.set(child, i);
      pending.delete(key);
    }
    if (e.parent !== undefined) {
      const key = callKey(e, e.parent);
      pending.set(key, [...(pending.get(key) ?? []), i]);
    }
  });
  const children = new Map<number, number[]>();
  for (const [child, parent] of owner) children.set(parent, [...(children.get(parent) ?? []), child]);

  const start = events[0] ? Date.parse(events[0].time) : 0;
  const lines: string[] = [];
  const show = (i: number, depth: number): void => {
    const e = events[i]!;
    const since = Date.parse(e.time) - start;
    // `-` for a time that cannot be placed (unreadable, or before the first event).
    const offset = (since >= 0 ? `+${formatDuration(since)}` : '-').padStart(8);
    const where = [e.attempt !== undefined ? `a${e.attempt}` : '', e.turn !== undefined ? `t${e.turn}` : '']
      .filter(Boolean)
      .join(' ');
    const facts = [
      e.tool,
      // Written by the loop, read back as data: one line, whatever a tampered log holds.
      typeof e.input === 'string' ? oneLine(e.input) : '',
      e.status,
      e.exitCode !== undefined ? `exit ${e.exitCode}` : '',
      e.isError ? 'error' : '',
      e.durationMs !== undefined ? formatDuration(e.durationMs) : '',
      e.tokens ? `${e.tokens.input}+${e.tokens.output} tok` : '',
      costFact(e),
      e.message ?? '',
    ]
      .filter(Boolean)
      .join('  ');
    const indent = '  '.repeat(depth);
    lines.push(`${offset}  ${indent}${e.kind.padEnd(14)} ${where.padEnd(7)} ${facts}`);
    // Ownership only points forward, so this recursion ends.
    for (const child of children.get(i) ?? []) show(child, depth + 1);
  };
  let unfinished: string | undefined;
  events.forEach((e, i) => {
    if (owner.has(i)) return;
    if (e.parent === undefined) {
      unfinished = undefined;
      show(i, 0);
      return;
    }
    const key = callKey(e, e.parent);
    if (unfinished !== key) {
      lines.push(`${' '.repeat(10)}${e.agent ?? 'sub-agent'} of call ${e.parent} (the call did not finish):`);
      unfinished = key;
    }
    show(i, 1);
  });
  return lines;
}

export async function logsCommand(ctx: CliContext, ref: string, options: LogsOptions): Promise<number> {
  const { readRunFile, resolveRun } = await import('../../runs/record.js');
  const { runsDirOf } = await import('../run-lookup.js');
  const { formatEgressLine, readEgressLogs } = await import('../egress-log-lines.js');
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const text = (await readRunFile(run, 'events.jsonl')) ?? '';
  const events: LoggedEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line) as LoggedEvent);
    } catch {
      // A torn last line (the process was killed mid-write) is skipped.
    }
  }
  if (options.json) {
    printJson(ctx, events);
    return 0;
  }
  for (const line of formatEventLog(events)) print(ctx, line);
  for (const log of await readEgressLogs(run)) {
    for (const entry of log.entries) print(ctx, formatEgressLine(log.role, entry));
  }
  if (options.verbose) {
    const transcript = await readRunFile(run, 'transcript.json');
    let parsed: unknown;
    try {
      parsed = transcript === undefined ? undefined : JSON.parse(transcript);
    } catch {
      parsed = undefined;
    }
    print(ctx, '\nconversation:');
    for (const line of formatConversation(parsed)) print(ctx, line);
  }
  return 0;
}

export const logs = declareCommand(declaration, logsCommand);
