/**
 * Progress for a running eval: one redrawn line on a terminal, plain lines elsewhere (CI
 * logs and pipes do not understand `\r`). Formatting is pure so it can be pinned by tests.
 */
import { UNSCORED_CATEGORIES, type TrialResult } from './types.js';
import { formatDuration } from '../format.js';
import type { PoolStats } from '../sandbox/pool/warm-pool.js';

export interface EvalProgress {
  /** Trials finished, including those found on disk when resuming. */
  done: number;
  total: number;
  passed: number;
  /** Task failures: every scored trial that did not pass. */
  failed: number;
  infrastructure: number;
  /** Trials that ended with an error of the harness or the task's configuration (not scored). */
  errors: number;
  inFlight: number;
  /** Trials taken from an earlier run's results.jsonl. */
  resumed: number;
  elapsedMs: number;
  /** `null` until a trial of this run has finished. */
  etaMs: number | null;
  /** The trial that just finished, if this update was caused by one. */
  last?: TrialResult;
  /** Something a person should see at once (an engine was lost). */
  notice?: string;
  /** Per engine: the engines of this eval in order, then engines only resumed results ran on. */
  engines?: EngineProgress[];
  /** On a cluster: trials whose sandbox waits in its queue, and the reason it gives most. */
  queued?: QueueProgress | undefined;
  /** With `--pool`: the eval's warm pools (one per engine), summed (`poolTally`). */
  pool?: PoolProgress | undefined;
}

export interface PoolProgress {
  /** Started and waiting to be taken, over every engine's pool. */
  ready: number;
  /** Sandboxes this eval took warm from a pool, and made cold because none waited. */
  taken: number;
  cold: number;
}

/**
 * The warm pools of an eval (one per engine) as one count: what waits now, and what the trials
 * took warm or had to make cold. `onChange` hears every change of either.
 */
export function poolTally(onChange: (pool: PoolProgress) => void) {
  const pools = new Map<string, PoolStats>();
  let shown = '';
  return (engine: string, stats: PoolStats): void => {
    pools.set(engine, stats);
    const pool: PoolProgress = { ready: 0, taken: 0, cold: 0 };
    for (const s of pools.values()) {
      pool.ready += s.ready;
      pool.taken += s.handedOut;
      pool.cold += s.cold;
    }
    const key = `${pool.ready}|${pool.taken}|${pool.cold}`;
    if (key === shown) return;
    shown = key;
    onChange(pool);
  };
}

export interface QueueProgress {
  count: number;
  reason: string;
}

/**
 * The jobs of a cluster backend that wait in its queue (`QueueEvent`s, by job): how many, and
 * the reason most of them wait for. `onChange` hears every change of either.
 */
export function queueTally(onChange: (queued: QueueProgress) => void) {
  const waiting = new Map<string, string>();
  let shown = '';
  return (event: { job: string; state: string; reason: string }): void => {
    if (event.state === 'PENDING' || event.state === 'CONFIGURING') waiting.set(event.job, event.reason);
    else waiting.delete(event.job);
    const reasons = new Map<string, number>();
    for (const reason of waiting.values()) reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
    const reason = [...reasons].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '';
    const key = `${waiting.size}|${reason}`;
    if (key === shown) return;
    shown = key;
    onChange({ count: waiting.size, reason });
  };
}

export interface EngineProgress {
  name: string;
  /** False for an engine only results of an earlier (resumed) run name. */
  inFleet: boolean;
  capacity: number;
  running: number;
  lost: boolean;
  /** Trial runs there, first tries that failed as infrastructure included. */
  trials: number;
  passes: number;
  infrastructure: number;
  meanTrialMs: number | null;
}

/**
 * Remaining time from this run's throughput. Using wall time per finished trial (rather
 * than the mean trial duration) already accounts for concurrency; trials resumed from disk
 * are left out because they cost this run nothing.
 */
export function estimateEtaMs(finishedThisRun: number, remaining: number, elapsedMs: number): number | null {
  if (remaining <= 0) return 0;
  if (finishedThisRun <= 0) return null;
  return Math.round((elapsedMs / finishedThisRun) * remaining);
}

/** `[#######.............]`; the filled part rounds down so a bar is only full when done. */
export function formatBar(done: number, total: number, width = 20): string {
  const fraction = total <= 0 ? 1 : Math.min(1, Math.max(0, done / total));
  const filled = Math.floor(fraction * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

function counts(p: EvalProgress): string {
  const infra = p.infrastructure > 0 ? ` infra ${p.infrastructure}` : '';
  const errors = p.errors > 0 ? ` error ${p.errors}` : '';
  return `pass ${p.passed} fail ${p.failed}${infra}${errors}`;
}

/** Only an eval over more than one engine says which engine did what. */
function fleetOf(p: EvalProgress): EngineProgress[] {
  const engines = (p.engines ?? []).filter((e) => e.inFleet);
  return engines.length > 1 ? engines : [];
}

/** `a 2/2`, `b lost`: running trials over capacity, per engine. */
function engineLoads(p: EvalProgress): string {
  const engines = fleetOf(p);
  if (engines.length === 0) return '';
  return ` [${engines.map((e) => `${e.name} ${e.lost ? 'lost' : `${e.running}/${e.capacity}`}`).join(' ')}]`;
}

/** `a 4 run, 3 pass, 1 infra, 41s avg`: what each engine did so far. */
export function formatEngineTally(
  e: Pick<EngineProgress, 'name' | 'trials' | 'passes' | 'infrastructure' | 'meanTrialMs'> & {
    lost?: boolean;
  },
): string {
  const parts = [`${e.trials} run`, `${e.passes} pass`];
  if (e.infrastructure > 0) parts.push(`${e.infrastructure} infra`);
  if (e.meanTrialMs !== null) parts.push(`${formatDuration(e.meanTrialMs)} avg`);
  return `${e.name}${e.lost ? ' (lost)' : ''} ${parts.join(', ')}`;
}

/** `queued 3 (Resources)`: trials whose sandbox waits in the cluster's queue, and why. */
function queuedPart(p: EvalProgress): string {
  if (!p.queued || p.queued.count === 0) return '';
  return ` queued ${p.queued.count}${p.queued.reason ? ` (${p.queued.reason})` : ''}`;
}

/** `pool 3 warm (12 taken, 1 cold)`: what the warm pools hold and gave. */
function poolPart(p: EvalProgress): string {
  if (!p.pool) return '';
  return ` pool ${p.pool.ready} warm (${p.pool.taken} taken, ${p.pool.cold} cold)`;
}

/** The single line redrawn on a terminal. */
export function formatProgressLine(p: EvalProgress, barWidth = 20): string {
  // A queued trial is in flight too: `running` counts only those that are not waiting.
  const active = p.inFlight - (p.queued?.count ?? 0);
  const running = active > 0 ? ` running ${active}` : '';
  return `${formatBar(p.done, p.total, barWidth)} ${p.done}/${p.total} ${counts(p)}${running}${queuedPart(p)}${poolPart(p)}${engineLoads(p)} elapsed ${formatDuration(p.elapsedMs)} eta ${formatDuration(p.etaMs)}`;
}

/** One log line per finished trial, for non-terminals. */
export function formatProgressEvent(p: EvalProgress): string {
  const prefix = `[${p.done}/${p.total}]`;
  if (p.notice) return `${prefix} ${p.notice}`;
  if (!p.last) return `${prefix} ${counts(p)}${p.resumed > 0 ? ` (${p.resumed} resumed)` : ''}${poolPart(p)}`;
  const r = p.last;
  const fleet = fleetOf(p);
  const where = fleet.length > 0 && r.engine ? ` on ${r.engine}` : '';
  const retried = r.infraRetried
    ? `, retried after infrastructure failure${r.firstTry?.engine && fleet.length > 0 ? ` on ${r.firstTry.engine}` : ''}`
    : '';
  const perEngine = fleet.length > 0 ? ` | ${fleet.map(formatEngineTally).join('; ')}` : '';
  return `${prefix} ${r.taskId}#${r.trial} ${r.category}${where} (${r.turns} turns, ${formatDuration(r.durationMs)}${retried}) ${counts(p)} eta ${formatDuration(p.etaMs)}${poolPart(p)}${perEngine}${notScoredReason(r)}`;
}

/** Longest reason a progress line shows; the report and the run record keep more. */
const REASON_MAX = 200;

/** `; not scored: <reason>` for a trial left out of the pass rate; empty for a scored one. */
export function notScoredReason(r: TrialResult): string {
  if (!UNSCORED_CATEGORIES.has(r.category)) return '';
  const text = (r.error ?? 'no reason recorded').replace(/\s+/g, ' ').trim();
  const capped = text.length > REASON_MAX ? `${text.slice(0, REASON_MAX - 1)}…` : text;
  return `; not scored: ${capped}`;
}

export interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean | undefined;
  columns?: number | undefined;
}

export interface ProgressReporter {
  update(progress: EvalProgress): void;
  /** The cluster's queue changed (`queueTally`): shown with the last progress. */
  queue?(queued: QueueProgress): void;
  /** The warm pools changed (`poolTally`): redrawn on a terminal, said with the next line in a log. */
  pool?(pool: PoolProgress): void;
  /** Ends the redrawn line so later output starts on a fresh one. */
  finish(): void;
}

export function createProgressReporter(
  stream: ProgressStream,
  options: {
    tty?: boolean;
    /** Makes a line safe for the terminal (task ids and reasons are data); the CLI passes its own. */
    safe?: (text: string) => string;
  } = {},
): ProgressReporter {
  const tty = options.tty ?? stream.isTTY === true;
  const safe = options.safe ?? ((text: string) => text);
  let drawn = 0;
  let queued: QueueProgress | undefined;
  let pool: PoolProgress | undefined;
  let last: EvalProgress | undefined;
  return {
    pool(now) {
      pool = now;
      // A log line per pool change would drown the trials: a log shows it on the next line.
      if (!last || !tty) return;
      const { notice: _notice, last: _last, ...counts } = last;
      this.update(counts);
    },
    queue(now) {
      const before = queued;
      queued = now;
      if (!last) return;
      if (tty) {
        // Redrawn with the last counts; what was said once (a notice, a finished trial) is not said again.
        const { notice: _notice, last: _last, ...counts } = last;
        this.update(counts);
        return;
      }
      // A log gets a line when the wait starts, ends or changes its reason; not one per job.
      const said = (q: QueueProgress | undefined) => (q && q.count > 0 ? q.reason : undefined);
      if (said(before) === said(now)) return;
      const text = now.count > 0 ? `queued ${now.count}: ${now.reason}` : 'no trial waits in the queue';
      stream.write(`${safe(`[${last.done}/${last.total}] ${text}`)}\n`);
    },
    update(given) {
      const progress = { ...given, queued, ...(pool ? { pool } : {}) };
      last = progress;
      if (!tty) {
        stream.write(`${safe(formatProgressEvent(progress))}\n`);
        return;
      }
      const unscored = progress.last ? notScoredReason(progress.last) : '';
      if (unscored) {
        // A trial that cannot be scored stays on screen with its reason, like a notice.
        const r = progress.last as TrialResult;
        const line = safe(`${r.taskId}#${r.trial} ${r.category}${unscored}`);
        stream.write(`\r${line.padEnd(drawn)}\n`);
        drawn = 0;
      }
      if (progress.notice) {
        // A notice stays on screen: it takes the redrawn line's place, which is drawn again below it.
        stream.write(`\r${safe(progress.notice).padEnd(drawn)}\n`);
        drawn = 0;
      }
      let line = safe(formatProgressLine(progress));
      // A line longer than the terminal wraps, and `\r` then only rewinds the last row.
      const columns = stream.columns;
      if (columns !== undefined && columns > 1 && line.length >= columns) line = line.slice(0, columns - 1);
      stream.write(`\r${line.padEnd(drawn)}`);
      drawn = line.length;
    },
    finish() {
      if (tty && drawn > 0) stream.write('\n');
      drawn = 0;
    },
  };
}
