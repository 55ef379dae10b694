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
import { PASSING_CATEGORY } from '../outcomes.js';
import { estimateEtaMs, type EngineProgress, type EvalProgress } from './eval-progress.js';
import {
  claimOutDir,
  openResultsLog,
  readResults,
  RESULTS_FILE,
  trialKey,
  type ResultsLog,
} from './results-file.js';
import { summarizeEngines, type EngineSummary } from './summary.js';
import { trialSpecs, type Suite } from './suite.js';
import { localPlacement, type TrialPlacement, type TrialSlot } from './trial-placement.js';
import { runOnce } from './trial-try.js';
import type { TrialResult, TrialRunner, TrialSpec } from './types.js';

/**
 * How long a trial whose engine was found lost may take to give up by itself before the
 * scheduler stops waiting for it: on an engine that hangs rather than refuses, even its
 * clean-up can wait forever.
 */
const LOST_ENGINE_GRACE_MS = 30_000;

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
  runner: TrialRunner;
  /** Ctrl-C: no new trial starts, in-flight ones see their signal abort. */
  signal?: AbortSignal;
  onProgress?: (progress: EvalProgress) => void;
  /** Per-trial time budget; defaults to the suite's `defaults.timeouts.trialSec`. */
  trialTimeoutSec?: number;
  /** See LOST_ENGINE_GRACE_MS. */
  lostEngineGraceMs?: number;
}

export interface EvalRun {
  /** Every finished trial (resumed ones included), in suite task order then trial order. */
  results: TrialResult[];
  /** How many of `results` came from an earlier run. */
  resumed: number;
  /** Trials the eval was meant to have: tasks x n. */
  total: number;
  n: number;
  /** True when the signal aborted before every trial had a result. */
  interrupted: boolean;
  /** Set when every engine was lost, so the trials left were not run (`--resume` runs them). */
  enginesLost?: string;
  startedAt: string;
  finishedAt: string;
  resultsFile: string;
}

/**
 * The eval, as named steps: plan the trials -> claim the output folder -> resume what an
 * earlier run finished -> run the trials left (each on a slot, retried elsewhere after an
 * infrastructure failure, its result on disk before its slot is freed) -> the run's account.
 */
export async function runEval(options: RunEvalOptions): Promise<EvalRun> {
  const plan = planTrials(options);
  const startedAt = new Date();
  const resultsFile = await claimOutput(options, plan.n);
  const finished = await resumeFinished(options, resultsFile, plan.n);
  const specs = trialSpecs(options.suite, plan.n);
  const pending = specs.filter((s) => !finished.has(trialKey(s.taskId, s.trial)));
  const state = openEval(options, plan, startedAt, resultsFile, finished, specs.length);
  await runTrials(state, pending);
  return evalRunOf(state);
}

/** How the trials run: how many of each task, where, and their time budgets. */
interface TrialPlan {
  n: number;
  placement: TrialPlacement;
  timeoutSec: number | undefined;
  graceMs: number;
}

/** One eval as it runs: what its steps share. */
interface EvalState {
  options: RunEvalOptions;
  plan: TrialPlan;
  startedAt: Date;
  resultsFile: string;
  /** Trials the eval was meant to have: tasks x n. */
  total: number;
  /** Every trial on disk (resumed ones included), by `key`. */
  finished: Map<string, TrialResult>;
  /** How many of `finished` came from an earlier run. */
  resumed: number;
  /** Trials stopped by Ctrl-C: in the account, never on disk. */
  interrupted: TrialResult[];
  tally: Tally;
  /** Ctrl-C (the caller's signal). */
  userSignal: AbortSignal;
  /** A failed write stops the eval: results that are not on disk would be re-run silently. */
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

/** Step plan: the options checked (before anything is written) and their defaults from the suite. */
function planTrials(options: RunEvalOptions): TrialPlan {
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

/** Step claim: the output folder made, and holding this suite's results only; the results file's path. */
async function claimOutput(options: RunEvalOptions, n: number): Promise<string> {
  const outDir = path.resolve(options.outDir);
  await mkdir(outDir, { recursive: true });
  await claimOutDir(outDir, options.suite, n, options.resume === true);
  return path.join(outDir, RESULTS_FILE);
}

/** Step resume: the trials an earlier run of this eval finished (`--resume`), by `key`. */
async function resumeFinished(
  options: RunEvalOptions,
  resultsFile: string,
  n: number,
): Promise<Map<string, TrialResult>> {
  const previous = options.resume ? await readResults(resultsFile, options.suite, n) : [];
  const finished = new Map<string, TrialResult>();
  for (const r of previous) finished.set(trialKey(r.taskId, r.trial), r);
  return finished;
}

/** The eval's shared state, its counts started from the resumed results; lost engines reported. */
function openEval(
  options: RunEvalOptions,
  plan: TrialPlan,
  startedAt: Date,
  resultsFile: string,
  finished: Map<string, TrialResult>,
  total: number,
): EvalState {
  const userSignal = options.signal ?? new AbortController().signal;
  const internal = new AbortController();
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
    startedAt,
    resultsFile,
    total,
    finished,
    resumed: finished.size,
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
  const log = await openResultsLog(state.resultsFile);
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
        engine: first.slot.engine,
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
      await log.append(result);
    } catch (error) {
      state.internal.abort(error);
      throw error;
    }
    state.finished.set(trialKey(result.taskId, result.trial), result);
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
    total,
    n: state.plan.n,
    interrupted: finished.size < total && !lost,
    ...(lost ? { enginesLost: lost.message } : {}),
    startedAt: state.startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    resultsFile: state.resultsFile,
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
