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
import { mkdir, open, readFile, truncate } from 'node:fs/promises';
import { writeFileAtomic } from '../atomic-write.js';
import path from 'node:path';
import {
  ConfigError,
  HarnessError,
  RunTimeout,
  SandboxUnavailable,
  UsageError,
  errorMessage,
} from '../errors.js';
import { Placement, type EngineLoad } from '../fleet/placement.js';
import { PASSING_CATEGORY } from '../outcomes.js';
import { estimateEtaMs, type EngineProgress, type EvalProgress } from './eval-progress.js';
import { summarizeEngines, type EngineSummary } from './summary.js';
import { trialSpecs, type Suite } from './suite.js';
import {
  trialResultSchema,
  type TrialCategory,
  type TrialResult,
  type TrialRunner,
  type TrialSpec,
} from './types.js';

export const RESULTS_FILE = 'results.jsonl';
export const LOCK_FILE = 'suite.lock.json';
/** The engine name of an eval without a fleet. */
export const LOCAL_ENGINE = 'local';
/**
 * How long a trial whose engine was found lost may take to give up by itself before the
 * scheduler stops waiting for it: on an engine that hangs rather than refuses, even its
 * clean-up can wait forever.
 */
const LOST_ENGINE_GRACE_MS = 30_000;

/** A place for one trial on one engine. */
export interface TrialSlot {
  readonly engine: string;
  /** Aborts (its reason says why) once the engine is found lost. */
  readonly lost: AbortSignal;
  /** `handOver`: see `Lease.release` in src/fleet/placement.ts. */
  release(options?: { handOver?: boolean }): void;
}

/**
 * Where trials run. Without one, `runEval` uses the local engine with `concurrency` slots; an
 * eval over a fleet passes the fleet's (`fleetPlacement` in ./engines.ts).
 */
export interface TrialPlacement {
  /**
   * A slot as soon as one is free. `avoid`: engines to stay off while another one is live;
   * `first`: ahead of the trials still waiting; `replacing`: a slot this trial gives up for
   * the new one (released first, and not to the trials waiting). Rejects with
   * `SandboxUnavailable` once every engine is lost, and with the signal's reason when it aborts.
   */
  acquire(options: {
    signal: AbortSignal;
    avoid: ReadonlySet<string>;
    first: boolean;
    replacing?: TrialSlot;
  }): Promise<TrialSlot>;
  /** After an infrastructure failure on `engine`: does it still answer? (`lost` is final.) */
  checkEngine(engine: string): Promise<'alive' | 'lost'>;
  /** Every engine with its capacity, running trials and whether it is lost. */
  loads(): EngineLoad[];
  /** Called once for each engine found lost. */
  onLost?(listener: (engine: string, reason: string) => void): void;
}

/** One engine, `concurrency` trials at once, never lost: the eval of a single machine. */
export function localPlacement(concurrency: number, name: string = LOCAL_ENGINE): TrialPlacement {
  const placement = new Placement([{ name, capacity: concurrency }]);
  const never = new AbortController().signal;
  return {
    async acquire({ replacing, ...options }) {
      replacing?.release({ handOver: true });
      const lease = await placement.acquire(options);
      return { engine: lease.engine, lost: never, release: (o) => lease.release(o) };
    },
    checkEngine: async () => 'alive',
    loads: () => placement.loads(),
  };
}

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

/** Identifies the suite an output folder belongs to; `--resume` refuses anything else. */
export interface SuiteLock {
  version: 1;
  suiteName: string;
  suiteFile: string;
  suiteSha256: string;
  n: number;
  createdAt: string;
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
  const pending = specs.filter((s) => !finished.has(key(s.taskId, s.trial)));
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
  for (const r of previous) finished.set(key(r.taskId, r.trial), r);
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

/** The results file, appended to one line per trial, each line synced before the next. */
interface ResultsLog {
  append(result: TrialResult): Promise<void>;
  /** After the last append has settled. */
  close(): Promise<void>;
}

async function openResultsLog(file: string): Promise<ResultsLog> {
  const handle = await open(file, 'a');
  // Appends are chained so concurrent trials never interleave inside one line.
  let writes: Promise<void> = Promise.resolve();
  return {
    append(result) {
      const line = `${JSON.stringify(result)}\n`;
      writes = writes.then(async () => {
        await handle.appendFile(line, 'utf8');
        await handle.sync();
      });
      return writes;
    },
    async close() {
      await writes.catch(() => undefined);
      await handle.close();
    },
  };
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
    state.finished.set(key(result.taskId, result.trial), result);
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

function key(taskId: string, trial: number): string {
  return `${taskId}\u0000${trial}`;
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

async function runOnce(
  runner: TrialRunner,
  spec: TrialSpec,
  userSignal: AbortSignal,
  internalSignal: AbortSignal,
  timeoutSec: number | undefined,
  slot: TrialSlot,
  graceMs: number,
): Promise<TrialResult> {
  const controller = new AbortController();
  const signal = AbortSignal.any([userSignal, internalSignal, controller.signal, slot.lost]);
  let timedOut = false;
  const timer =
    timeoutSec === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          controller.abort(new RunTimeout(`the trial exceeded its ${timeoutSec}s budget`));
        }, timeoutSec * 1000);
  const started = Date.now();
  let result: TrialResult;
  try {
    const work = runner(spec, { signal, engine: slot.engine });
    result = normalise(await giveUpAfterLost(work, slot.lost, graceMs), spec, slot.engine);
  } catch (error) {
    const category: TrialCategory =
      timedOut || error instanceof RunTimeout
        ? 'timeout'
        : error instanceof HarnessError && error.category === 'interrupted'
          ? 'interrupted'
          : error instanceof HarnessError && error.category === 'infrastructure'
            ? 'infrastructure'
            : 'error';
    result = failedResult(spec, category, started, describeError(error), slot.engine);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }

  // Once we pulled the plug, a runner's "infrastructure" is most likely its own reaction to
  // the abort (a killed exec, a cancelled request); name the real cause instead.
  const abortLike =
    result.category === 'infrastructure' || result.category === 'interrupted' || result.category === 'error';
  if (abortLike && (userSignal.aborted || internalSignal.aborted)) {
    return { ...result, outcome: 'failed', category: 'interrupted' };
  }
  if (abortLike && slot.lost.aborted) {
    return {
      ...result,
      outcome: 'failed',
      category: 'infrastructure',
      error: describeError(slot.lost.reason),
    };
  }
  if (abortLike && timedOut) {
    return {
      ...result,
      outcome: 'failed',
      category: 'timeout',
      error: result.error ?? `trial exceeded its ${timeoutSec}s budget`,
    };
  }
  return result;
}

/**
 * The trial's own result, unless its engine was found lost and it has not returned `graceMs`
 * later: then the engine's loss. The trial is left to finish (or not) on its own.
 */
function giveUpAfterLost<T>(work: Promise<T>, lost: AbortSignal, graceMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const onLost = () => {
      timer = setTimeout(() => reject(lost.reason), graceMs);
      timer.unref();
    };
    if (lost.aborted) onLost();
    else lost.addEventListener('abort', onLost, { once: true });
    work.then(resolve, reject).finally(() => {
      if (timer !== undefined) clearTimeout(timer);
      lost.removeEventListener('abort', onLost);
    });
  });
}

/**
 * The scheduler's counts must not depend on a runner filling in ids and outcome consistently,
 * and the engine is where the scheduler placed the trial.
 */
function normalise(result: TrialResult, spec: TrialSpec, engine: string): TrialResult {
  return {
    ...result,
    taskId: spec.taskId,
    trial: spec.trial,
    outcome: result.category === PASSING_CATEGORY ? 'passed' : 'failed',
    engine,
  };
}

function failedResult(
  spec: TrialSpec,
  category: TrialCategory,
  started: number,
  error: string,
  engine: string,
): TrialResult {
  const finished = Date.now();
  return {
    taskId: spec.taskId,
    trial: spec.trial,
    outcome: 'failed',
    category,
    turns: 0,
    inputTokens: 0,
    outputTokens: 0,
    durationMs: finished - started,
    startedAt: new Date(started).toISOString(),
    finishedAt: new Date(finished).toISOString(),
    error,
    engine,
  };
}

function describeError(error: unknown): string {
  return error instanceof HarnessError ? `${error.code}: ${error.message}` : errorMessage(error);
}

/**
 * Makes sure `outDir` holds this suite's results and nobody else's: a fresh eval refuses a
 * folder that already has results, and a resumed one refuses a folder made for another suite
 * or another n (mixing them would make the statistics meaningless).
 */
async function claimOutDir(outDir: string, suite: Suite, n: number, resume: boolean): Promise<void> {
  const lockFile = path.join(outDir, LOCK_FILE);
  const resultsFile = path.join(outDir, RESULTS_FILE);
  const lock = await readLock(lockFile);
  const hasResults = ((await readOptional(resultsFile))?.length ?? 0) > 0;

  if (resume && lock) {
    const problems: string[] = [];
    if (lock.suiteSha256 !== suite.sha256) problems.push(`the suite file changed (was ${lock.suiteFile})`);
    if (lock.n !== n) problems.push(`n was ${lock.n}, now ${n}`);
    if (problems.length > 0) {
      throw new UsageError(`cannot resume the eval in ${outDir}: ${problems.join('; ')}`, {
        hint: 'resume with the same suite file and -n, or start a new eval with another --out',
      });
    }
    return;
  }
  if (resume && hasResults) {
    throw new UsageError(
      `cannot resume the eval in ${outDir}: ${RESULTS_FILE} exists but ${LOCK_FILE} is missing`,
      {
        hint: 'start a new eval with another --out',
      },
    );
  }
  if (!resume && hasResults) {
    throw new UsageError(`${outDir} already holds eval results`, {
      hint: 'pass --resume to finish that eval, or choose another --out',
    });
  }
  const fresh: SuiteLock = {
    version: 1,
    suiteName: suite.name,
    suiteFile: suite.file,
    suiteSha256: suite.sha256,
    n,
    createdAt: new Date().toISOString(),
  };
  await writeFileAtomic(lockFile, `${JSON.stringify(fresh, null, 2)}\n`);
}

async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function readLock(file: string): Promise<SuiteLock | undefined> {
  const bytes = await readOptional(file);
  if (bytes === undefined) return undefined;
  try {
    const value = JSON.parse(bytes.toString('utf8')) as Partial<SuiteLock>;
    if (typeof value.suiteSha256 === 'string' && typeof value.n === 'number') return value as SuiteLock;
  } catch {
    // Falls through to the error below.
  }
  throw new ConfigError(`${file} is not a suite lock written by this harness`, [], {
    hint: 'start a new eval with another --out',
  });
}

/**
 * Reads finished trials. A crash mid-write can only leave a partial last line (each line is
 * one append + fsync), so that line is ignored and cut off, which keeps the next append on
 * a line of its own. Anything else that does not parse is real damage and is reported.
 */
export async function readResults(file: string, suite: Suite, n: number): Promise<TrialResult[]> {
  const bytes = await readOptional(file);
  if (bytes === undefined || bytes.length === 0) return [];
  const lastNewline = bytes.lastIndexOf(0x0a);
  const complete = bytes.subarray(0, lastNewline + 1);
  if (complete.length < bytes.length) await truncate(file, complete.length);

  const taskIds = new Set(suite.tasks.map((t) => t.id));
  const results: TrialResult[] = [];
  const seen = new Set<string>();
  const problems: string[] = [];
  const lines = complete.toString('utf8').split('\n');
  lines.forEach((line, index) => {
    if (line.trim() === '') return;
    const where = `${file}:${index + 1}`;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      problems.push(`${where}: not a JSON line`);
      return;
    }
    const parsed = trialResultSchema.safeParse(json);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      problems.push(
        `${where}: not a trial result (${first ? `${first.path.join('.')}: ${first.message}` : 'invalid'})`,
      );
      return;
    }
    const r = parsed.data;
    if (!taskIds.has(r.taskId) || r.trial >= n) {
      problems.push(`${where}: trial ${r.taskId}#${r.trial} is not part of this suite with n=${n}`);
      return;
    }
    // Interrupted trials measured nothing and are run again.
    if (r.category === 'interrupted') return;
    const k = key(r.taskId, r.trial);
    if (seen.has(k)) return;
    seen.add(k);
    results.push(r);
  });
  if (problems.length > 0) {
    throw new ConfigError(`${file} is damaged (${problems.length} bad line(s))`, problems, {
      hint: 'remove the bad lines to resume, or start a new eval with another --out',
    });
  }
  return results;
}
