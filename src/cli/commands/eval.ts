import { readFile, mkdir } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { relative, resolve, join } from 'node:path';
import { UsageError, ConfigError } from '../../errors.js';
import { loadSuite, type Suite } from '../../evals/suite.js';
import {
  bareInstanceSuite,
  loadInstanceSuite,
  looksLikeInstanceSuite,
  type InstanceSuite,
} from '../../evals/sources/instances.js';
import { materializeInstances } from '../../evals/sources/materialize.js';
import {
  oracleFindings,
  readQuarantine,
  writeQuarantine,
  type Quarantine,
} from '../../evals/sources/quarantine.js';
import { runEval, type TrialPlacement } from '../../evals/runner.js';
import { fleetDeps, fleetPlacement, sharedBaselines, type EvalTask } from '../../evals/engines.js';
import { formatEngineTally } from '../../evals/progress.js';
import { connectFleet } from '../../fleet/fleet.js';
import { DEFAULT_RESOURCES } from '../../sandbox/types.js';
import type { FixDeps } from '../../fix/context.js';
import { summarize, compareSummaries, readHarnessVersion, type EvalSummary } from '../../evals/summary.js';
import { notScoredCell, writeReports } from '../../evals/report.js';
import { createProgressReporter } from '../../evals/progress.js';
import { fixTrialRunner } from '../../evals/fix-trial.js';
import { catalogImageOptions, fixDeps, reuseImages } from '../../fix/deps.js';
import { memoryBaselineCache } from '../../fix/baseline.js';
import { sandboxProvider } from '../../sandbox/registry.js';
import { enginesNamed, resolveEngineFlags, type EngineFlags } from '../engine-flags.js';
import { exitCodeForEval } from '../exit-codes.js';
import { loadCatalog, resourcesFromCatalog } from '../../catalog/load.js';
import { JsonlEventSink } from '../../agent/events.js';
import type { KeepPolicy } from '../../fix/run-fix.js';
import { print, printJson, note, type CliContext } from '../context.js';
import { shortPath } from '../format.js';
import { parseCostLimit } from '../cost-flag.js';
import { terminalSafe } from '../terminal.js';
import { exportView } from '../../view/export.js';
import { openViewSource, runHref } from '../../view/source.js';

export interface EvalCommandOptions extends EngineFlags {
  n?: string;
  concurrency?: string;
  out?: string;
  resume?: boolean;
  compare?: string;
  json?: boolean;
  keep?: string;
  costLimit?: string;
  runtime?: string;
  repos?: string;
  visibleTests?: boolean;
  oracle?: boolean;
  quarantine?: string;
}

function positiveInt(flag: string, value: string | undefined, max: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new UsageError(`${flag}: expected an integer from 1 to ${max}, got "${value}"`);
  return n;
}

function percent(rate: number | null): string {
  return rate === null ? '-' : `${(rate * 100).toFixed(0)}%`;
}

export async function evalCommand(
  ctx: CliContext,
  suiteFile: string,
  options: EvalCommandOptions,
): Promise<number> {
  const n = positiveInt('-n', options.n, 1000);
  const concurrency = positiveInt('--concurrency', options.concurrency, 1000);
  const keep = options.keep as KeepPolicy | undefined;
  if (keep !== undefined && !['on-failure', 'always', 'never'].includes(keep)) {
    throw new UsageError(`--keep: expected on-failure, always or never, got "${options.keep}"`);
  }
  const costLimitUsd = parseCostLimit(options.costLimit);
  const absolute = resolve(ctx.cwd, suiteFile);
  const displayPath = relative(ctx.cwd, absolute) || absolute;
  const instanceSource = await loadInstanceSource(absolute, displayPath);
  if (!instanceSource && (options.oracle || options.repos || options.visibleTests || options.quarantine))
    throw new UsageError(
      '--repos, --visible-tests, --oracle and --quarantine are for instances (JSONL) only',
    );
  const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 15);
  let suite: Suite;
  let instances: InstanceRun | undefined;
  if (instanceSource) {
    const outDir = resolve(
      ctx.cwd,
      options.out ?? join('.sandbox-harness', 'evals', `${instanceSource.name}-${stamp}`),
    );
    options = { ...options, out: outDir };
    const quarantine =
      options.quarantine && !options.oracle
        ? await readQuarantine(resolve(ctx.cwd, options.quarantine))
        : undefined;
    const made = await materializeInstances(instanceSource, {
      outDir,
      ...(options.repos ? { repos: resolve(ctx.cwd, options.repos) } : {}),
      ...(options.visibleTests ? { visibleTests: true } : {}),
      ...(options.oracle ? { oracle: true } : {}),
      ...(quarantine ? { quarantine } : {}),
      onLine: (line) => {
        if (!options.json) note(ctx, line);
      },
    });
    suite = made.suite;
    instances = { oracle: options.oracle === true, goldFails: made.goldFails, quarantine };
  } else suite = await loadSuite(absolute, { displayPath });
  let previous: EvalSummary | undefined;
  if (options.compare) {
    const file = resolve(ctx.cwd, options.compare);
    try {
      previous = JSON.parse(await readFile(file, 'utf8')) as EvalSummary;
    } catch (error) {
      throw new ConfigError(`--compare: cannot read ${options.compare}: ${(error as Error).message}`);
    }
  }
  // Check every catalog before the first trial: a typo must not look like failed trials.
  const tasks: EvalTask[] = [];
  for (const task of suite.tasks) {
    const catalog = await loadCatalog(task.catalog, { cwd: ctx.cwd });
    tasks.push({ id: task.id, catalog, repoDir: task.repo ?? catalog.repoDir });
  }

  const outDir = resolve(ctx.cwd, options.out ?? join('.sandbox-harness', 'evals', `${suite.name}-${stamp}`));
  await mkdir(outDir, { recursive: true });
  // One baseline per (image, catalog, test command) for the whole eval, not one per trial.
  const baselines = sharedBaselines(memoryBaselineCache());
  const say = (line: string) => {
    if (!options.json) note(ctx, line);
  };
  const engines = enginesNamed(options)
    ? await connectEngines(ctx, options, tasks, concurrency, { outDir, baselines, say })
    : undefined;
  let deps: FixDeps | ((engine: string, signal: AbortSignal) => Promise<FixDeps>);
  if (engines) deps = engines.deps;
  else {
    const local = reuseImages(fixDeps(await sandboxProvider(), { baselines }));
    await local.ping();
    // A runtime the engine lacks (flag or any task's catalog) fails the eval before any build.
    const asked = options.runtime ? [options.runtime] : tasks.map((t) => t.catalog.catalog.sandbox.runtime);
    for (const runtime of new Set(asked)) if (runtime) await local.runtime?.(runtime);
    // Build (or find) each task's image once, before trials race to build the same one.
    say(`preparing sandbox images for ${tasks.length} task(s) ...`);
    for (const task of tasks) {
      await local.image({
        repoDir: task.repoDir,
        ...catalogImageOptions(task.catalog),
        rebuild: false,
        logFile: join(outDir, `image-${task.id}.log`),
        onProgress: () => undefined,
      });
    }
    deps = local;
  }

  const reporter = options.json
    ? undefined
    : createProgressReporter(ctx.stderr as NodeJS.WriteStream, { tty: ctx.isTTY, safe: terminalSafe });
  const eventsFile = join(outDir, 'events.jsonl');
  const runner = fixTrialRunner({
    outDir,
    keep: keep ?? suite.defaults.keep,
    deps,
    ...(options.runtime ? { runtime: options.runtime } : {}),
    env: ctx.env,
    ...(costLimitUsd !== undefined ? { costLimitUsd } : {}),
    // One log for the whole eval, every event tagged with its trial, so overlap and
    // per-trial overhead can be read off the times.
    events: (spec) => {
      const sink = new JsonlEventSink(eventsFile);
      const trial = `${spec.taskId}#${spec.trial}`;
      return { emit: (event) => sink.emit({ ...event, trial }) };
    },
  });
  let run;
  try {
    run = await runEval({
      suite,
      ...(n ? { n } : {}),
      concurrency: concurrency ?? suite.defaults.concurrency ?? availableParallelism(),
      ...(engines ? { placement: engines.placement } : {}),
      outDir,
      resume: options.resume ?? false,
      runner,
      signal: ctx.signal,
      ...(reporter ? { onProgress: (p) => reporter.update(p) } : {}),
    });
  } finally {
    engines?.stop();
    reporter?.finish();
  }
  const summary = summarize(run.results, {
    suite,
    n: run.n,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    harnessVersion: await readHarnessVersion(),
    ...(costLimitUsd !== undefined ? { costLimitUsd } : {}),
  });
  const comparison = previous ? compareSummaries(summary, previous) : undefined;
  const findings = instances?.oracle ? oracleFindings(run.results) : undefined;
  if (instances) {
    summary.instances = {
      oracle: instances.oracle,
      goldFails: findings ? findings.goldFails : instances.goldFails,
      ...(findings ? { flakyTests: findings.flakyTests } : {}),
      quarantined: findings?.flakyTests ?? instances.quarantine?.tests ?? {},
    };
  }
  if (findings && options.quarantine) {
    await writeQuarantine(
      resolve(ctx.cwd, options.quarantine),
      findings,
      suite.tasks.map((t) => t.id),
    );
  }
  // report.html links each trial to its page in the static viewer written next to it.
  const trials = run.results.map((r) => ({
    taskId: r.taskId,
    trial: r.trial,
    category: r.category,
    ...(r.runId ? { href: `view/${runHref(r.runId)}` } : {}),
  }));
  const files = await writeReports(outDir, summary, comparison, trials);
  const view = await openViewSource(outDir)
    .then((source) => exportView(source, join(outDir, 'view')))
    .catch((error: unknown) => {
      note(
        ctx,
        `warning: the viewer pages were not written: ${error instanceof Error ? error.message : String(error)}`,
      );
      return undefined;
    });
  const notRun = run.total - run.results.length;
  if (options.json) {
    printJson(ctx, {
      outDir,
      interrupted: run.interrupted,
      ...(run.enginesLost ? { enginesLost: run.enginesLost } : {}),
      files,
      view: view?.index,
      summary,
      comparison,
    });
  } else {
    print(ctx, `\n${headline(suite.name, summary, run)}`);
    if (run.enginesLost) print(ctx, `${run.enginesLost}; ${notRun} trial(s) not run`);
    for (const t of summary.tasks) {
      print(
        ctx,
        `  ${t.taskId.padEnd(24)} ${String(t.passes).padStart(3)}/${t.scored}  ${percent(t.passRate).padStart(4)}  [${percent(t.interval.low)}, ${percent(t.interval.high)}]${t.notScored ? `  not scored ${notScoredCell(t)}` : ''}`,
      );
    }
    const notScored = summary.tasks.flatMap((t) => t.notScoredTrials);
    if (notScored.length > 0) {
      print(ctx, 'not scored (left out of the pass rates; the eval exits non-zero):');
      for (const t of notScored) print(ctx, `  ${t.taskId}#${t.trial} ${t.category}: ${t.reason}`);
    }
    if (engines || summary.engines.length > 1) {
      print(ctx, 'engines:');
      for (const e of summary.engines) print(ctx, `  ${formatEngineTally({ ...e, name: e.engine })}`);
    }
    if (summary.instances)
      for (const line of instanceLines(summary.instances, options.quarantine)) print(ctx, line);
    if (comparison) {
      const regressions = comparison.tasks.filter((t) => t.regression).map((t) => t.taskId);
      print(
        ctx,
        regressions.length
          ? `regressions: ${regressions.join(', ')}`
          : 'no regression against the previous summary',
      );
    }
    print(
      ctx,
      `reports: ${shortPath(ctx.cwd, files.html)}  ${shortPath(ctx.cwd, files.markdown)}  ${shortPath(ctx.cwd, files.summaryJson)}`,
    );
    if (view)
      print(
        ctx,
        `trials:  ${shortPath(ctx.cwd, view.index)}  (or: sandbox-harness view ${shortPath(ctx.cwd, outDir)})`,
      );
    print(
      ctx,
      `results: ${shortPath(ctx.cwd, join(outDir, 'results.jsonl'))}${run.interrupted || run.enginesLost ? `  (resume with: sandbox-harness eval ${suiteFile} --out ${shortPath(ctx.cwd, outDir)} --resume${engineFlags(options)})` : ''}`,
    );
  }
  return exitCodeForEval({
    interrupted: run.interrupted,
    // Trials left unrun because every engine was lost could not be scored either.
    unscored: {
      infrastructure: summary.overall.infrastructure + (run.enginesLost ? notRun : 0),
      error: summary.overall.errors,
    },
    regression: comparison?.tasks.some((t) => t.regression) ?? false,
  });
}

interface InstanceRun {
  oracle: boolean;
  goldFails: string[];
  quarantine: Quarantine | undefined;
}

/** An instances file (JSONL) or an instance suite (YAML with `instances:`); undefined for a task suite. */
async function loadInstanceSource(file: string, displayPath: string): Promise<InstanceSuite | undefined> {
  if (/\.jsonl$/i.test(file)) return bareInstanceSuite(file, displayPath);
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (text !== undefined && looksLikeInstanceSuite(text)) return loadInstanceSuite(file, displayPath);
  return undefined;
}

/** What an oracle run found, or which instances a quarantine file left out. */
function instanceLines(
  info: NonNullable<EvalSummary['instances']>,
  quarantineFile: string | undefined,
): string[] {
  const lines: string[] = [];
  if (info.goldFails.length > 0)
    lines.push(
      info.oracle
        ? `gold patch does not resolve: ${info.goldFails.join(', ')}`
        : `left out, their gold patch fails (quarantine file): ${info.goldFails.join(', ')}`,
    );
  const flaky = Object.entries(info.flakyTests ?? {});
  if (info.oracle) {
    if (flaky.length === 0 && info.goldFails.length === 0)
      lines.push('oracle: every gold patch resolved its instance, no test flaked');
    for (const [id, tests] of flaky) lines.push(`flaky under the gold patch: ${id}: ${tests.join('; ')}`);
    if (quarantineFile) lines.push(`quarantine: ${quarantineFile}`);
  } else {
    const count = Object.values(info.quarantined).reduce((sum, list) => sum + list.length, 0);
    if (count > 0) lines.push(`${count} quarantined test(s) left out of FAIL_TO_PASS/PASS_TO_PASS`);
  }
  return lines;
}

function engineFlags(options: EvalCommandOptions): string {
  return [
    ...(options.engines !== undefined ? [` --engines ${options.engines}`] : []),
    ...(options.engine ?? []).map((e) => ` --engine ${e}`),
  ].join('');
}

interface ConnectedEngines {
  placement: TrialPlacement;
  deps: (engine: string, signal: AbortSignal) => Promise<FixDeps>;
  stop: () => void;
}

/**
 * The engines named by `--engines`/`--engine`, all answering, each with its capacity (the
 * engines file's, else its CPUs over the largest CPU limit of the suite's catalogs), watched
 * while trials run. Without `--concurrency` the total is the sum of the capacities.
 */
async function connectEngines(
  ctx: CliContext,
  options: EvalCommandOptions,
  tasks: readonly EvalTask[],
  concurrency: number | undefined,
  context: { outDir: string; baselines: ReturnType<typeof sharedBaselines>; say: (line: string) => void },
): Promise<ConnectedEngines> {
  const specs = await resolveEngineFlags(ctx, options);
  const trialCpus = Math.max(
    ...tasks.map((t) => resourcesFromCatalog(t.catalog.catalog).cpus ?? DEFAULT_RESOURCES.cpus),
  );
  const fleet = await connectFleet(specs, {
    trialCpus,
    ...(concurrency !== undefined ? { concurrency } : {}),
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
      signal: ctx.signal,
      onLine: context.say,
    }),
    stop: stopMonitor,
  };
}

/**
 * The one line a person reads first. When not every trial could be scored it says so before
 * the rate, so "100%" over half the trials never reads as a clean pass.
 */
export function headline(
  name: string,
  summary: EvalSummary,
  run: { results: unknown[]; total: number; resumed: number; interrupted: boolean },
): string {
  const o = summary.overall;
  const unscored = [
    o.infrastructure ? `${o.infrastructure} infrastructure` : '',
    o.errors ? `${o.errors} error` : '',
    o.interrupted ? `${o.interrupted} interrupted` : '',
    run.total > run.results.length ? `${run.total - run.results.length} not run` : '',
  ].filter(Boolean);
  const scored = unscored.length > 0 ? `${o.scored}/${run.total} scored, ${unscored.join(', ')}; ` : '';
  return `${name}: ${scored}${o.passes}/${o.scored} passed (${percent(o.passRate)})${run.resumed ? `, ${run.resumed} resumed` : ''}${run.interrupted ? ', INTERRUPTED' : ''}`;
}
