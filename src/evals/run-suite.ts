/**
 * An eval as a library call, like `runFix`: load the suite (through whichever task source
 * reads the file or folder: `sources/`) and every catalog, make each task's image present
 * (locally, or on each engine of a fleet), run the trials with one baseline per image and
 * catalog, and write the summary, the reports and the static viewer. The CLI (`cli/commands/eval.ts`) only turns flags into `SuiteOptions` and a
 * `SuiteResult` into lines and an exit code.
 */
import { mkdir } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { loadCatalog, resourcesFromCatalog } from '../catalog/load.js';
import { JsonlEventSink } from '../agent/events.js';
import { memoryBaselineCache } from '../fix/baseline-cache.js';
import type { FixDeps } from '../fix/types.js';
import { catalogImageOptions, fixDeps, reuseImages } from '../fix/deps.js';
import type { KeepPolicy } from '../fix/run-fix.js';
import type { EngineSpec } from '../sandbox/backend-registry.js';
import { connectFleet } from '../fleet/fleet.js';
import { DEFAULT_RESOURCES } from '../sandbox/types.js';
import { sandboxProvider, type SandboxProvider } from '../sandbox/backend-registry.js';
import { fleetDeps, fleetPlacement, sharedBaselines, type EvalTask } from './engines.js';
import { fixTrialRunner } from './fix-trial.js';
import { poolTally, type ProgressReporter } from './eval-progress.js';
import { TrialPools } from './trial-pools.js';
import { poolCapacity } from '../sandbox/pool/warm-pool.js';
import { PoolStatusFile } from '../sandbox/pool/pool-status.js';
import { BackgroundRemovals } from '../sandbox/removals.js';
import { SetupStates } from '../fix/setup-states.js';
import { writeReports } from './report.js';
import { readEvalLock, resumeSettings, type GivenSettings } from './eval-lock.js';
import { runEval, SHARDS_DIR, type EvalRun } from './runner.js';
import type { ChosenShard } from './shards.js';
import { planTrials, shardFolderName, shardLabel, type Shard } from './trial-plan.js';
import type { TrialResult } from './types.js';
import { UsageError } from '../errors.js';
import {
  assertSomethingRuns,
  refusingRunner,
  taskRefusal,
  type Refusals,
  type Settled,
} from './task-refusals.js';
import type { TrialPlacement } from './trial-placement.js';
import { checkSourceFlags, recogniseSource, sourceInput } from './sources/index.js';
import type { MadeSuite, SourceFlags } from './sources/task-source.js';
import type { Suite } from './suite.js';
import { readPreviousSummary } from './summary-file.js';
import {
  compareSummaries,
  readHarnessVersion,
  summarize,
  type EvalSummary,
  type SummaryComparison,
} from './summary.js';

export interface SuiteOptions {
  /** The suite file (YAML), instances (JSONL) or instance suite, as an absolute path. */
  suiteFile: string;
  /** How the suite file is named in messages (relative to the working directory). */
  displayPath: string;
  /** Where relative catalog paths of the suite are read from. */
  cwd: string;
  /** The host environment of the model providers (never a sandbox's). */
  env: NodeJS.ProcessEnv;
  /** Ctrl-C: no new trial starts, in-flight ones stop. */
  signal: AbortSignal;
  /** Trials per task; default: the suite's. */
  n?: number | undefined;
  /** Trials at once; default: the suite's, else the cores (with engines: their capacities). */
  concurrency?: number | undefined;
  /** The output folder, absolute; default: `<cwd>/.sandbox-harness/evals/<suite>-<time>`. */
  outDir?: string;
  /** Finish the eval in `outDir`: its settings (n, the sources' flags, ...) are the lock's; a flag given that disagrees is refused. */
  resume: boolean;
  /** `--rerun-unscored`: resume, and run again the trials whose result is unscored (their results go to the history). */
  rerunUnscored?: boolean;
  /** Run one shard of the plan in the shared `outDir` (`--shard K/N`, or the cluster's environment). */
  shard?: ChosenShard;
  /** A previous `summary.json` to compare with (absolute, and as named in messages). */
  compare?: { file: string; displayPath: string };
  keep?: KeepPolicy | undefined;
  costLimitUsd?: number | undefined;
  runtime?: string;
  /** The agent kind of every trial (`--agent`); default each catalog's `agent.kind`. */
  agent?: string;
  /** Trials take their sandboxes from a warm pool (`--pool`). */
  pool?: boolean | undefined;
  /** The flags of task sources (`--repos`, `--oracle`, ...), paths absolute; one a source does not take is refused. */
  sourceFlags?: SourceFlags;
}

export interface SuiteDeps {
  /** The local engine's provider, used when no engines are named; default: the registry's. */
  provider?: () => Promise<SandboxProvider>;
  /**
   * The engines to run on (`--engines`/`--engine`); absent: the local engine alone. Called
   * once the suite and every catalog have been read, so a typo there is reported first.
   */
  engines?: () => Promise<EngineSpec[]>;
  /** Progress notes (what is being prepared, the engines). */
  say?: (line: string) => void;
  /** Something went wrong that does not change the eval's result. */
  warn?: (line: string) => void;
  /** The live progress of the trials, made once the images are ready. */
  progress?: () => ProgressReporter;
  /**
   * The static viewer written next to the reports, its trial pages linked from report.html.
   * A dependency because the viewer sits above evals (it reads their output); absent: no pages.
   */
  viewer?: SuiteViewer;
}

export interface SuiteViewer {
  /** Where a trial's run page will be, relative to the viewer's folder. */
  trialHref(runId: string): string;
  /** Writes the pages of `outDir` into `viewDir`; returns the index page. */
  write(outDir: string, viewDir: string): Promise<{ index: string }>;
}

export interface SuiteResult {
  suite: Suite;
  outDir: string;
  run: EvalRun;
  /** Of every trial; of a shard run, of the shard's trials (without the sources' sections). */
  summary: EvalSummary;
  comparison: SummaryComparison | undefined;
  /** The reports; a shard writes none (`eval merge` does, once every shard is done). */
  files: Awaited<ReturnType<typeof writeReports>> | undefined;
  /** The static viewer's pages, unless there is no viewer or writing them failed (see `SuiteDeps.warn`). */
  view: { index: string } | undefined;
  /** The trials ran on named engines (a fleet), not the local engine alone. */
  onEngines: boolean;
  /** Trials planned but not run (interrupted, or every engine lost). */
  notRun: number;
}

export async function runSuite(options: SuiteOptions, deps: SuiteDeps = {}): Promise<SuiteResult> {
  const say = deps.say ?? (() => undefined);
  const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 15);
  const defaultOut = (name: string) => join(options.cwd, '.sandbox-harness', 'evals', `${name}-${stamp}`);
  const settings = await settingsOf(options);
  const shard = options.shard;
  const { made, outDir } = await loadSource(options, settings.source ?? {}, defaultOut, say, shard?.shard);
  const { suite } = made;
  // A shard's own things (the sources' working copies, its event log, image logs) in its own folder.
  const workDir = shard ? join(outDir, SHARDS_DIR, shardFolderName(shard.shard)) : outDir;
  const previous = options.compare
    ? await readPreviousSummary(options.compare.file, options.compare.displayPath)
    : undefined;
  // A task whose repo, catalog or image is refused is that task's error; every other task runs.
  const refused: Refusals = new Map();
  const settled: Settled = new Map();
  const tasks = await loadTasks(suite, options.cwd, refused, settled);
  assertSomethingRuns(refused, suite.tasks.length);

  await mkdir(workDir, { recursive: true });
  // One baseline per (image, catalog, test command) for the whole eval, not one per trial.
  const baselines = sharedBaselines(memoryBaselineCache());
  const engines = deps.engines
    ? await connectEngines(await deps.engines(), options, tasks, { outDir: workDir, baselines, say })
    : undefined;
  const trialDeps = engines
    ? engines.deps
    : await prepareLocal(settings.runtime, tasks, {
        outDir: workDir,
        baselines,
        say,
        provider: deps.provider,
        signal: options.signal,
        refused,
      });
  assertSomethingRuns(refused, suite.tasks.length);
  for (const [id, { reason }] of refused) say(`task ${id} is refused, its trials are errors: ${reason}`);
  for (const [id, { category, reason }] of settled)
    say(`task ${id} is ${category} as it stands, not run: ${reason}`);

  const n = settings.n ?? suite.defaults.n;
  if (shard)
    say(`shard ${shardLabel(shard.shard)} (${shard.from}): its share of ${suite.tasks.length * n} trial(s)`);
  const reporter = deps.progress?.();
  const concurrency = options.concurrency ?? suite.defaults.concurrency ?? availableParallelism();
  // One pool per engine for all the trials; the progress line shows them summed.
  const onPool = options.pool && reporter?.pool ? poolTally((pool) => reporter.pool?.(pool)) : undefined;
  // A setup the catalog shares is made by a task's first trial; the others start from it.
  const setups = new SetupStates();
  const pools = options.pool
    ? new TrialPools({
        // A trial's own setup goes with it: nothing is warmed from it for the next trial.
        lasts: (image) => !setups.isTrialOwn(image),
        // Each trial running: its attempt's and its verification's, and the next trial's first.
        capacity: poolCapacity(concurrency, 2),
        // Warmed just ahead: the trials that start when the running ones end.
        order: planTrials(suite, n, shard?.shard).mine,
        ahead: concurrency,
        ...(onPool ? { onChange: onPool } : {}),
        status: (engine) => new PoolStatusFile('eval', engine),
      })
    : undefined;
  // A trial ends once its record is written; its sandboxes go while the next one runs.
  const removals = new BackgroundRemovals();
  const runner = refusingRunner(
    refused,
    fixTrialRunner({
      outDir,
      keep: options.keep ?? suite.defaults.keep,
      deps: trialDeps,
      ...(settings.runtime ? { runtime: settings.runtime } : {}),
      ...(options.agent ? { agent: options.agent } : {}),
      env: options.env,
      costLimitUsd: settings.costLimitUsd,
      ...(pools ? { pools } : {}),
      removals,
      setups,
      events: trialEvents(join(workDir, 'events.jsonl')),
    }),
    settled,
  );
  let run: EvalRun;
  try {
    run = await runEval({
      suite,
      n,
      concurrency,
      ...(engines ? { placement: engines.placement } : {}),
      outDir,
      resume: options.resume,
      ...(options.rerunUnscored ? { rerunUnscored: true } : {}),
      ...(shard ? { shard: shard.shard } : {}),
      settings: {
        source: settings.source ?? {},
        ...(settings.costLimitUsd !== undefined ? { costLimitUsd: settings.costLimitUsd } : {}),
        ...(settings.runtime !== undefined ? { runtime: settings.runtime } : {}),
      },
      harnessVersion: await readHarnessVersion(),
      runner,
      signal: options.signal,
      say,
      ...(reporter ? { onProgress: (p) => reporter.update(p) } : {}),
    });
  } finally {
    await closeTrials({ removals, pools, setups, engines, say });
    reporter?.finish();
  }

  const meta = {
    suite,
    n: run.n,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    costLimitUsd: settings.costLimitUsd,
  };
  // A shard's summary is of its own trials, for its lines and exit code; its sources' sections
  // (an oracle's quarantine file among them) and the reports are the merge's to write.
  const summary = await summarizeResults(run.results, meta, shard ? undefined : made);
  const comparison = previous ? compareSummaries(summary, previous) : undefined;
  const { files, view } = shard
    ? { files: undefined, view: undefined }
    : await writeOutputs(outDir, run.results, summary, comparison, deps);
  return {
    suite,
    outDir,
    run,
    summary,
    comparison,
    files,
    view,
    onEngines: engines !== undefined,
    notRun: run.total - run.results.length,
  };
}

/**
 * Step 0: the settings that decide what a trial measures. A fresh eval's are the flags; a
 * resumed one's are the lock's (`resumeSettings`: a flag that disagrees is refused by name).
 */
async function settingsOf(options: SuiteOptions): Promise<GivenSettings> {
  const given: GivenSettings = {
    ...(options.n !== undefined ? { n: options.n } : {}),
    source: options.sourceFlags ?? {},
    ...(options.costLimitUsd !== undefined ? { costLimitUsd: options.costLimitUsd } : {}),
    ...(options.runtime !== undefined ? { runtime: options.runtime } : {}),
  };
  const resume = options.resume || options.rerunUnscored === true;
  const needsOut = resume
    ? options.rerunUnscored
      ? '--rerun-unscored'
      : '--resume'
    : options.shard
      ? 'a shard'
      : undefined;
  if (needsOut && options.outDir === undefined)
    throw new UsageError(
      `${needsOut} needs --out: the folder of the eval${options.shard && !resume ? ' its shards share' : ''}`,
    );
  if (!resume || options.outDir === undefined) return given;
  const lock = await readEvalLock(options.outDir);
  return lock ? resumeSettings(lock, given, options.outDir) : given;
}

/**
 * Step 1: the suite, from the task source that recognises the file or folder (instances and
 * Harbor task folders made into one under the out folder, a shard's under its own folder:
 * each working copy, each task's repo).
 */
export async function loadSource(
  options: Pick<SuiteOptions, 'suiteFile' | 'displayPath' | 'cwd' | 'outDir'>,
  flags: SourceFlags,
  defaultOut: (name: string) => string,
  say: (line: string) => void,
  shard?: Shard,
  makeIn?: string,
): Promise<{ made: MadeSuite; outDir: string }> {
  const input = sourceInput(options.suiteFile, options.displayPath, options.cwd);
  const source = await recogniseSource(input);
  checkSourceFlags(source, flags);
  const opened = await source.open(input, flags);
  const outDir = options.outDir ?? defaultOut(opened.name);
  const workDir = makeIn ?? (shard ? join(outDir, SHARDS_DIR, shardFolderName(shard)) : outDir);
  return { made: await opened.make({ outDir: workDir, say }), outDir };
}

/**
 * Step 2: every catalog, checked before the first trial: a typo must not look like failed
 * trials, so a task whose catalog (or, from its source, repo) is refused is that task's `error`
 * with the reason, and the others run.
 */
async function loadTasks(
  suite: Suite,
  cwd: string,
  refused: Refusals,
  settled: Settled,
): Promise<EvalTask[]> {
  const tasks: EvalTask[] = [];
  for (const task of suite.tasks) {
    if (task.refused !== undefined) {
      refused.set(task.id, { reason: task.refused });
      continue;
    }
    if (task.settled !== undefined) {
      settled.set(task.id, task.settled);
      continue;
    }
    let catalog;
    try {
      catalog = await loadCatalog(task.catalog, { cwd });
    } catch (error) {
      const reason = taskRefusal(error);
      if (reason === undefined) throw error;
      refused.set(task.id, { reason, error });
      continue;
    }
    tasks.push({
      id: task.id,
      catalog,
      repoDir: task.repo ?? catalog.repoDir,
      ...(task.buildLimitFrom ? { buildLimitFrom: task.buildLimitFrom } : {}),
    });
  }
  return tasks;
}

interface PrepareContext {
  outDir: string;
  baselines: ReturnType<typeof sharedBaselines>;
  say: (line: string) => void;
}

/** Step 3 (local engine): it answers, has every runtime asked for, and has each task's image. */
async function prepareLocal(
  runtime: string | undefined,
  tasks: readonly EvalTask[],
  context: PrepareContext & { provider: SuiteDeps['provider']; signal: AbortSignal; refused: Refusals },
): Promise<FixDeps> {
  const provider = await (context.provider ?? (() => sandboxProvider()))();
  const local = reuseImages(fixDeps(provider, { baselines: context.baselines }));
  await local.ping();
  // A runtime the engine lacks (flag or any task's catalog) fails the eval before any build.
  const asked = runtime ? [runtime] : tasks.map((t) => t.catalog.catalog.sandbox.runtime);
  for (const runtime of new Set(asked)) if (runtime) await local.runtime?.(runtime);
  // Build (or find) each task's image once, before trials race to build the same one.
  context.say(`preparing sandbox images for ${tasks.length} task(s) ...`);
  for (const task of tasks) {
    try {
      await local.image({
        repoDir: task.repoDir,
        ...catalogImageOptions(task.catalog, task.buildLimitFrom),
        rebuild: false,
        logFile: join(context.outDir, `image-${task.id}.log`),
        onProgress: () => undefined,
        // Ctrl-C or SIGTERM stops a build here too (a first eval builds for minutes).
        signal: context.signal,
      });
    } catch (error) {
      // A build stopped by Ctrl-C is the eval's stop, never the task's refusal.
      if (context.signal.aborted) throw error;
      const reason = taskRefusal(error, { image: true });
      if (reason === undefined) throw error;
      context.refused.set(task.id, { reason, error });
    }
  }
  return local;
}

interface ConnectedEngines {
  placement: TrialPlacement;
  deps: (engine: string, signal: AbortSignal) => Promise<FixDeps>;
  stop: () => void;
}

/**
 * Step 3 (a fleet): the named engines, all answering, each with its capacity (the engines
 * file's, else its CPUs over the largest CPU limit of the suite's catalogs), watched while
 * trials run. Without a concurrency the total is the sum of the capacities.
 */
async function connectEngines(
  specs: EngineSpec[],
  options: SuiteOptions,
  tasks: readonly EvalTask[],
  context: PrepareContext,
): Promise<ConnectedEngines> {
  const { concurrency } = options;
  const trialCpus = Math.max(
    ...tasks.map((t) => resourcesFromCatalog(t.catalog.catalog).cpus ?? DEFAULT_RESOURCES.cpus),
  );
  const fleet = await connectFleet(specs, {
    trialCpus,
    concurrency,
  });
  const total = fleet.engines.reduce((sum, e) => sum + e.capacity, 0);
  context.say(
    `${fleet.engines.length} engine(s), ${concurrency !== undefined && concurrency < total ? `${concurrency} of ${total}` : total} trial(s) at once:`,
  );
  for (const e of fleet.engines) {
    context.say(
      `  ${e.name}: ${e.endpoint}, capacity ${e.capacity} (${e.capacityFrom === 'cpus' ? `${e.cpus} CPUs / ${trialCpus} per trial` : 'engines file'})`,
    );
  }
  const stopMonitor = fleet.monitor();
  return {
    placement: fleetPlacement(fleet),
    deps: fleetDeps({
      fleet,
      tasks,
      baselines: context.baselines,
      logDir: context.outDir,
      signal: options.signal,
      onLine: context.say,
    }),
    stop: stopMonitor,
  };
}

/**
 * One log for the whole eval, every event tagged with its trial, so overlap and per-trial
 * overhead can be read off the times.
 */
function trialEvents(eventsFile: string): Parameters<typeof fixTrialRunner>[0]['events'] {
  return (spec) => {
    const sink = new JsonlEventSink(eventsFile);
    const trial = `${spec.taskId}#${spec.trial}`;
    return { emit: (event) => sink.emit({ ...event, trial }) };
  };
}

/** What a summary says of the eval besides its results. */
export interface SummaryFacts {
  suite: Suite;
  n: number;
  startedAt: string;
  finishedAt: string;
  costLimitUsd?: number | undefined;
  /** Default: this harness's. */
  harnessVersion?: string;
}

/** Step 5: the summary, and the source's own section of it (written last, under its key). */
export async function summarizeResults(
  results: readonly TrialResult[],
  facts: SummaryFacts,
  made: MadeSuite | undefined,
): Promise<EvalSummary> {
  const summary = summarize(results, {
    suite: facts.suite,
    n: facts.n,
    startedAt: facts.startedAt,
    finishedAt: facts.finishedAt,
    harnessVersion: facts.harnessVersion ?? (await readHarnessVersion()),
    costLimitUsd: facts.costLimitUsd,
  });
  if (made?.summarize) Object.assign(summary, await made.summarize(results));
  return summary;
}

/** Step 6: report.md, report.html and summary.json, and the static viewer next to them. */
export async function writeOutputs(
  outDir: string,
  results: readonly TrialResult[],
  summary: EvalSummary,
  comparison: SummaryComparison | undefined,
  { viewer, warn }: SuiteDeps,
) {
  // report.html links each trial to its page in the static viewer written next to it.
  const trials = results.map((r) => ({
    taskId: r.taskId,
    trial: r.trial,
    category: r.category,
    ...(r.runId && viewer ? { href: `view/${viewer.trialHref(r.runId)}` } : {}),
  }));
  const files = await writeReports(outDir, summary, comparison, trials);
  const view = await viewer?.write(outDir, join(outDir, 'view')).catch((error: unknown) => {
    warn?.(
      `warning: the viewer pages were not written: ${error instanceof Error ? error.message : String(error)}`,
    );
    return undefined;
  });
  return { files, view };
}

/**
 * The end of an eval's trials, whatever ended them (Ctrl-C included), in this order: the
 * sandboxes still being removed (any that failed named: it keeps its labels, so `gc` removes
 * it), then what waits in the pools for trials that never came, then the shared setups'
 * images (no sandbox of theirs is left by then), and only then the engines' connections,
 * which those before still use.
 */
export async function closeTrials(parts: {
  removals: BackgroundRemovals;
  pools?: { drain(): Promise<void> } | undefined;
  setups?: Pick<SetupStates, 'drain'> | undefined;
  engines?: { stop(): void } | undefined;
  say: (line: string) => void;
}): Promise<void> {
  for (const failure of await parts.removals.settle())
    parts.say(`could not remove ${failure.what}: ${failure.message} (\`sandbox-harness gc\` removes it)`);
  await parts.pools?.drain();
  for (const failure of (await parts.setups?.drain()) ?? [])
    parts.say(
      `could not remove setup image ${failure.image}: ${failure.message} (\`sandbox-harness gc\` removes it)`,
    );
  parts.engines?.stop();
}
