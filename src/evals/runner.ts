/**
 * The eval scheduler: every task n times, each trial on an engine with a free slot (the local
 * engine alone, or a fleet), a bounded number at once, each result made durable the moment
 * it exists so a crash or Ctrl-C costs only the trials in flight.
 *
 * An infrastructure failure says nothing about the agent, so it gets one more try, on
 * another engine when there is one: the engine of the first try is checked first (a lost
 * one is never used again) and avoided by the retry. A trial whose engine is found lost
 * while it runs is stopped at once and counts as that infrastructure failure.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { SandboxUnavailable, UsageError } from '../errors.js';
import type { EngineLoad } from '../fleet/placement.js';
import { PASSING_CATEGORY, UNSCORED_CATEGORIES } from '../outcomes.js';
import { estimateEtaMs, type EngineProgress, type EvalProgress } from './eval-progress.js';
import {
  checkSamePlan,
  createEvalLock,
  planLock,
  readEvalLock,
  replaceEvalLock,
  type EvalLock,
  type PlanSettings,
} from './eval-lock.js';
import { acquireHolderLock, type HeldLock, type HolderLockOptions } from './holder-lock.js';
import {
  jsonlStore,
  SUPERSEDED_FILE,
  type ResultCheck,
  type ResultsLog,
  type ResultStore,
} from './results-file.js';
import { summarizeEngines, type EngineSummary } from './summary.js';
import type { Suite } from './suite.js';
import { trialFilesStore } from './trial-files.js';
import {
  planTrials,
  shardFolderName,
  shardLabel,
  trialKey,
  type Shard,
  type TrialPlan,
} from './trial-plan.js';
import { localPlacement, type TrialPlacement, type TrialSlot } from './trial-placement.js';
import { runOnce } from './trial-try.js';
import type { TrialResult, TrialRunner, TrialSpec } from './types.js';

/**
 * How long a trial whose engine was found lost may take to give up by itself before the
 * scheduler stops waiting for it: on an engine that hangs rather than refuses, even its
 * clean-up can wait forever.
 */
const LOST_ENGINE_GRACE_MS = 30_000;

/** The folder of a sharded eval's shards, each in `<K>-of-<N>/` (its results, history, holder). */
export const SHARDS_DIR = 'shards';

export interface RunEvalOptions {
  suite: Suite;
  /** Trials per task; defaults to the suite's `defaults.n`. */
  n?: number;
  /** Trials at once; defaults to the suite's `defaults.concurrency`. Ignored with `placement`, which has its own cap. */
  concurrency?: number;
  /** The engines to run on; default: the local engine with `concurrency` slots. */
  placement?: TrialPlacement;
  outDir: string;
  resume?: boolean;
  /**
   * `--rerun-unscored`: an eval resumed, and the trials whose result is unscored (`error`,
   * `infrastructure`: `UNSCORED_CATEGORIES`) run again; their results move to the history.
   */
  rerunUnscored?: boolean;
  /** Only this shard's trials, its results in `<outDir>/shards/<K>-of-<N>/` (N = 1: unsharded). */
  shard?: Shard;
  /** What decides a trial besides the suite and n (recorded in the lock); default: nothing else. */
  settings?: Omit<PlanSettings, 'n'>;
  /** The harness's version, recorded in the lock. */
  harnessVersion?: string;
  runner: TrialRunner;
  /** Ctrl-C: no new trial starts, in-flight ones see their signal abort. */
  signal?: AbortSignal;
  onProgress?: (progress: EvalProgress) => void;
  /** Notes on the folder: the shard, trials run again, a holder waited for. */
  say?: (line: string) => void;
  /** Per-trial time budget; defaults to the suite's `defaults.timeouts.trialSec`. */
  trialTimeoutSec?: number;
  /** See LOST_ENGINE_GRACE_MS. */
  lostEngineGraceMs?: number;
  /** How the folder's holder lock beats and what counts as stale (tests). */
  holder?: Pick<HolderLockOptions, 'beatMs' | 'staleMs' | 'identity'>;
}

export interface EvalRun {
  /** Every finished trial (resumed ones included) of this run's trials, in suite task order then trial order. */
  results: TrialResult[];
  /** How many of `results` came from an earlier run. */
  resumed: number;
  /** Trials whose unscored result was moved to the history and that were run again (`--rerun-unscored`). */
  rerun: number;
  /** Trials this run was meant to have: tasks x n, or the shard's share. */
  total: number;
  n: number;
  /** The shard this run was (absent: unsharded). */
  shard?: Shard;
  /** The plan's hash, as the folder's lock has it. */
  planSha256: string;
  /** True when the signal aborted before every trial had a result. */
  interrupted: boolean;
  /** Set when every engine was lost, so the trials left were not run (`--resume` runs them). */
  enginesLost?: string;
  startedAt: string;
  finishedAt: string;
  /** Where the results are: results.jsonl, or the shard's folder of results. */
  resultsFile: string;
}

/**
 * The eval, as named steps: settle the options -> plan the trials (all, or a shard's) ->
 * claim the output folder (its lock, its holder) -> resume what an earlier run finished ->
 * run the trials left (each on a slot, retried elsewhere after an infrastructure failure, its
 * result on disk before its slot is freed) -> the run's account.
 */
export async function runEval(options: RunEvalOptions): Promise<EvalRun> {
  const settled = settleOptions(options);
  const startedAt = new Date();
  const plan = planTrials(options.suite, settled.n, options.shard);
  const folder = await claimOutput(options, settled.n, plan);
  try {
    const finished = await resumeFinished(options, folder);
    const pending = plan.mine.filter((s) => !finished.results.has(trialKey(s)));
    const state = openEval(options, settled, startedAt, folder, finished, plan.mine.length);
    await runTrials(state, pending);
    if (folder.holder.lost.aborted) throw folder.holder.lost.reason;
    return evalRunOf(state);
  } finally {
    await folder.holder.release();
  }
}

/** How the trials run: how many of each task, where, and their time budgets. */
interface Settled {
  n: number;
  placement: TrialPlacement;
  timeoutSec: number | undefined;
  graceMs: number;
}

/** The output folder as this run holds it. */
interface EvalFolder {
  lock: EvalLock;
  store: ResultStore;
  check: ResultCheck;
  holder: HeldLock;
  shard?: Shard;
}

/** What was on disk when the run started. */
interface Finished {
  results: Map<string, TrialResult>;
  rerun: number;
}

/** One eval as it runs: what its steps share. */
interface EvalState {
  options: RunEvalOptions;
  plan: Settled;
  folder: EvalFolder;
  startedAt: Date;
  /** Trials this run was meant to have. */
  total: number;
  /** Every trial on disk (resumed ones included), by `key`. */
  finished: Map<string, TrialResult>;
  /** How many of `finished` came from an earlier run. */
  resumed: number;
  rerun: number;
  /** Trials stopped by Ctrl-C: in the account, never on disk. */
  interrupted: TrialResult[];
  tally: Tally;
  /** Ctrl-C (the caller's signal). */
  userSignal: AbortSignal;
  /** A failed write (or the folder taken by another process) stops the eval: results that are not on disk would be re-run silently. */
  internal: AbortController;
  /** Either of the two. */
  stop: AbortSignal;
  /** Set when a slot was refused because every engine is lost. */
  enginesLost?: SandboxUnavailable;
}

type Tally = {
  passed: number;
  failed: number;
  infrastructure: number;
  errors: number;
  inFlight: number;
  finishedThisRun: number;
};

/** Step settle: the options checked (before anything is written) and their defaults from the suite. */
function settleOptions(options: RunEvalOptions): Settled {
  const { suite } = options;
  const n = options.n ?? suite.defaults.n;
  const concurrency = options.concurrency ?? suite.defaults.concurrency;
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`-n must be a positive integer, got ${n}`);
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new UsageError(`--concurrency must be a positive integer, got ${concurrency}`);
  }
  return {
    n,
    placement: options.placement ?? localPlacement(concurrency),
    timeoutSec: options.trialTimeoutSec ?? suite.defaults.timeouts.trialSec,
    graceMs: options.lostEngineGraceMs ?? LOST_ENGINE_GRACE_MS,
  };
}

/**
 * Step claim: the output folder made and held by this process (one writer per store: the
 * folder, or the shard's folder), holding this plan's results only. A fresh eval refuses a
 * store that already has results; a resumed one, or a shard joining its siblings, refuses a
 * folder locked for another plan (see `checkSamePlan`).
 */
async function claimOutput(options: RunEvalOptions, n: number, plan: TrialPlan): Promise<EvalFolder> {
  const outDir = path.resolve(options.outDir);
  const shard = options.shard && options.shard.count > 1 ? options.shard : undefined;
  const resume = options.resume === true || options.rerunUnscored === true;
  const writerDir = shard ? path.join(outDir, SHARDS_DIR, shardFolderName(shard)) : outDir;
  await mkdir(writerDir, { recursive: true });
  const mine = planLock(
    options.suite,
    { source: {}, ...options.settings, n },
    shard?.count ?? 1,
    options.harnessVersion ?? 'unknown',
  );
  const store = shard ? trialFilesStore(writerDir, plan.mine.length) : jsonlStore(outDir);
  const what = shard ? `shard ${shardLabel(shard)} of this eval (n=${n})` : `this suite with n=${n}`;
  const check: ResultCheck = {
    taskIds: new Set(options.suite.tasks.map((t) => t.id)),
    n,
    what,
    ...(shard && plan.shardOf ? { belongs: (id) => plan.shardOf?.get(trialKey(id)) === shard.index } : {}),
  };
  // Held before anything is looked at: nobody else writes here while this run decides.
  const holder = await acquireHolderLock(writerDir, {
    purpose: shard ? `eval, shard ${shardLabel(shard)}` : 'eval',
    ...(options.say ? { say: options.say } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...options.holder,
  });
  try {
    const lock = await lockFolder(outDir, mine, store, { resume, shard, what });
    return { lock, store, check, holder, ...(shard ? { shard } : {}) };
  } catch (error) {
    await holder.release();
    throw error;
  }
}

/** The folder's lock for this plan: found and checked, or written (see `claimOutput`). */
async function lockFolder(
  outDir: string,
  mine: EvalLock,
  store: ResultStore,
  context: { resume: boolean; shard: Shard | undefined; what: string },
): Promise<EvalLock> {
  const { resume, shard, what } = context;
  const existing = await readEvalLock(outDir);
  const empty = await store.isEmpty();
  if (!existing) {
    if (resume && !empty)
      throw new UsageError(
        `cannot resume the eval in ${outDir}: ${store.where} has results but suite.lock.json is missing`,
        {
          hint: 'start a new eval with another --out',
        },
      );
    if (await createEvalLock(outDir, mine)) return mine;
    // Another shard wrote it a moment ago: join it if it is the same plan.
    const theirs = await readEvalLock(outDir);
    if (theirs) checkSamePlan(theirs, mine, outDir, shard);
    return mine;
  }
  if (!resume && !empty)
    throw new UsageError(
      `${shard ? `${what} already has results in ${store.where}` : `${outDir} already holds eval results`}`,
      {
        hint: `pass --resume to finish ${shard ? 'that shard' : 'that eval'}, or choose another --out`,
      },
    );
  const unshardedFresh = !resume && !shard && (existing.version !== 2 || existing.shards === 1);
  if (unshardedFresh) {
    // A folder with a lock and no results holds nothing to protect: a fresh eval takes it.
    await replaceEvalLock(outDir, mine);
    return mine;
  }
  checkSamePlan(existing, mine, outDir, shard);
  return existing.version === 2 ? existing : mine;
}

/** Step resume: the trials an earlier run of this eval finished (`--resume`), by `key`; unscored ones moved aside with `--rerun-unscored`. */
async function resumeFinished(options: RunEvalOptions, folder: EvalFolder): Promise<Finished> {
  const resume = options.resume === true || options.rerunUnscored === true;
  const previous = resume ? await folder.store.read(folder.check, true) : [];
  const unscored = options.rerunUnscored ? previous.filter((r) => UNSCORED_CATEGORIES.has(r.category)) : [];
  if (unscored.length > 0) {
    await folder.store.supersede(unscored);
    options.say?.(
      `${unscored.length} unscored trial(s) run again; their results are kept in ${path.join(path.dirname(folder.store.where), SUPERSEDED_FILE)}`,
    );
  }
  const rerun = new Set(unscored.map(trialKey));
  const results = new Map<string, TrialResult>();
  for (const r of previous) if (!rerun.has(trialKey(r))) results.set(trialKey(r), r);
  return { results, rerun: unscored.length };
}

/** The eval's shared state, its counts started from the resumed results; lost engines reported. */
function openEval(
  options: RunEvalOptions,
  plan: Settled,
  startedAt: Date,
  folder: EvalFolder,
  { results: finished, rerun }: Finished,
  total: number,
): EvalState {
  const userSignal = options.signal ?? new AbortController().signal;
  const internal = new AbortController();
  // Another process took the folder: stop at once, write nothing more.
  const lost = folder.holder.lost;
  lost.addEventListener('abort', () => internal.abort(lost.reason), { once: true });
  const tally: Tally = {
    passed: 0,
    failed: 0,
    infrastructure: 0,
    errors: 0,
    inFlight: 0,
    finishedThisRun: 0,
  };
  for (const r of finished.values()) count(tally, r);
  const state: EvalState = {
    options,
    plan,
    folder,
    startedAt,
    total,
    finished,
    resumed: finished.size,
    rerun,
    interrupted: [],
    tally,
    userSignal,
    internal,
    stop: AbortSignal.any([userSignal, internal.signal]),
  };
  plan.placement.onLost?.((engine, reason) =>
    reportProgress(
      state,
      undefined,
      `engine ${engine} lost (${reason}); its trials are retried on the other engines`,
    ),
  );
  return state;
}

/** The eval's progress as it stands, to the caller's `onProgress`. */
function reportProgress(state: EvalState, last?: TrialResult, notice?: string): void {
  const { options, tally, finished, total } = state;
  if (!options.onProgress) return;
  const elapsedMs = Date.now() - state.startedAt.getTime();
  const done = finished.size;
  const progress: EvalProgress = {
    done,
    total,
    passed: tally.passed,
    failed: tally.failed,
    infrastructure: tally.infrastructure,
    errors: tally.errors,
    inFlight: tally.inFlight,
    resumed: state.resumed,
    elapsedMs,
    etaMs: estimateEtaMs(tally.finishedThisRun, total - done, elapsedMs),
    engines: engineProgress(state.plan.placement.loads(), summarizeEngines([...finished.values()])),
  };
  if (last) progress.last = last;
  if (notice) progress.notice = notice;
  options.onProgress(progress);
}

/** Step run: every pending trial, at once up to the slots there are; the first failure to record one is thrown. */
async function runTrials(state: EvalState, pending: readonly TrialSpec[]): Promise<void> {
  const log = await state.folder.store.open();
  reportProgress(state);
  try {
    const settled = await Promise.allSettled(
      pending.map(async (spec) => {
        const done = await runTrial(state, spec);
        if (done) await recordTrial(state, log, done);
      }),
    );
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failure) throw failure.reason;
  } finally {
    await log.close();
  }
}

/**
 * One trial: a first try, and after an infrastructure failure a second on another engine
 * (the first's slot handed over). Undefined when it never started.
 */
async function runTrial(
  state: EvalState,
  spec: TrialSpec,
): Promise<{ result: TrialResult; slot?: TrialSlot } | undefined> {
  const first = await tryOnEngine(state, spec, new Set());
  if (!first) return undefined;
  if (!retryAfter(first.result, state.stop)) return first;
  const second = await tryOnEngine(state, spec, new Set([first.slot.engine]), first.slot);
  if (!second) {
    if (state.stop.aborted) return { result: { ...first.result, category: 'interrupted' } };
    const why = state.enginesLost?.message ?? 'no engine left';
    return {
      result: {
        ...first.result,
        error: `${first.result.error ?? 'infrastructure failure'}; not retried: ${why}`,
      },
    };
  }
  return {
    slot: second.slot,
    result: {
      ...second.result,
      infraRetried: true,
      firstTry: {
        // Where it really ran: a backend that places sandboxes itself names the node.
        engine: first.result.engine ?? first.slot.engine,
        category: first.result.category,
        durationMs: first.result.durationMs,
        ...(first.result.error ? { error: first.result.error } : {}),
        ...(first.result.runId ? { runId: first.result.runId } : {}),
      },
    },
  };
}

/**
 * One try on one engine; undefined when it never started (stopped, or no engine left). The
 * slot stays taken until the caller has written the result (or hands it over to a retry),
 * so `--concurrency 1` never starts a trial before the last one is on disk.
 */
async function tryOnEngine(
  state: EvalState,
  spec: TrialSpec,
  avoid: ReadonlySet<string>,
  replacing?: TrialSlot,
): Promise<{ result: TrialResult; slot: TrialSlot } | undefined> {
  const { plan, stop, tally } = state;
  let slot: TrialSlot;
  try {
    slot = await plan.placement.acquire({
      signal: stop,
      avoid,
      first: replacing !== undefined,
      ...(replacing ? { replacing } : {}),
    });
  } catch (error) {
    if (stop.aborted) return undefined;
    if (error instanceof SandboxUnavailable) {
      state.enginesLost ??= error;
      return undefined;
    }
    throw error;
  }
  tally.inFlight++;
  try {
    const result = await runOnce(
      state.options.runner,
      spec,
      state.userSignal,
      state.internal.signal,
      plan.timeoutSec,
      slot,
      plan.graceMs,
    );
    // Checked while the slot is still held, so a lost engine is marked before anyone else lands there.
    if (result.category === 'infrastructure' && !stop.aborted) {
      await plan.placement.checkEngine(slot.engine).catch(() => undefined);
    }
    return { result, slot };
  } catch (error) {
    slot.release();
    throw error;
  } finally {
    tally.inFlight--;
  }
}

/** A trial's result on disk and in the counts, then its slot freed; a failed write stops the eval. */
async function recordTrial(
  state: EvalState,
  log: ResultsLog,
  { result, slot }: { result: TrialResult; slot?: TrialSlot },
): Promise<void> {
  try {
    // An interrupted trial measured nothing; leaving it off disk makes `--resume` run it again.
    if (result.category === 'interrupted') {
      state.interrupted.push(result);
      return;
    }
    try {
      if (state.folder.holder.lost.aborted) throw state.folder.holder.lost.reason;
      await log.append(result);
    } catch (error) {
      state.internal.abort(error);
      throw error;
    }
    state.finished.set(trialKey(result), result);
    state.tally.finishedThisRun++;
    count(state.tally, result);
    reportProgress(state, result);
  } finally {
    slot?.release();
  }
}

/** Step account: every result in suite task order then trial order, and whether the eval finished. */
function evalRunOf(state: EvalState): EvalRun {
  const { finished, total } = state;
  const order = new Map(state.options.suite.tasks.map((t, i) => [t.id, i]));
  const results = [...finished.values(), ...state.interrupted].sort(
    (a, b) => (order.get(a.taskId) ?? 0) - (order.get(b.taskId) ?? 0) || a.trial - b.trial,
  );
  const lost = finished.size < total && !state.stop.aborted ? state.enginesLost : undefined;
  return {
    results,
    resumed: state.resumed,
    rerun: state.rerun,
    total,
    n: state.plan.n,
    ...(state.folder.shard ? { shard: state.folder.shard } : {}),
    planSha256: state.folder.lock.planSha256,
    interrupted: finished.size < total && !lost,
    ...(lost ? { enginesLost: lost.message } : {}),
    startedAt: state.startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    resultsFile: state.folder.store.where,
  };
}

/**
 * Whether a trial's first try earns it a second: only an infrastructure failure (Docker, the
 * model API, a lost engine), and not once the eval is stopping. An `error` (a bad catalog, a
 * cassette that ran out) is deterministic and never retried; a task failure is a result.
 */
export function retryAfter(first: TrialResult, stop: AbortSignal): boolean {
  return first.category === 'infrastructure' && !stop.aborted;
}

/** The engines of the placement in its order, then engines only earlier (resumed) results name. */
function engineProgress(loads: readonly EngineLoad[], done: readonly EngineSummary[]): EngineProgress[] {
  const tally = (name: string) => {
    const e = done.find((d) => d.engine === name);
    return {
      trials: e?.trials ?? 0,
      passes: e?.passes ?? 0,
      infrastructure: e?.infrastructure ?? 0,
      meanTrialMs: e?.meanTrialMs ?? null,
    };
  };
  const rows: EngineProgress[] = loads.map((l) => ({
    name: l.name,
    inFleet: true,
    capacity: l.capacity,
    running: l.running,
    lost: l.lost,
    ...tally(l.name),
  }));
  for (const e of done) {
    if (!loads.some((l) => l.name === e.engine)) {
      rows.push({ name: e.engine, inFleet: false, capacity: 0, running: 0, lost: false, ...tally(e.engine) });
    }
  }
  return rows;
}

function count(
  tally: { passed: number; failed: number; infrastructure: number; errors: number },
  r: TrialResult,
): void {
  if (r.category === PASSING_CATEGORY) tally.passed++;
  else if (r.category === 'infrastructure') tally.infrastructure++;
  else if (r.category === 'error') tally.errors++;
  else tally.failed++;
}
