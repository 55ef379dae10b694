/** `eval <suite>`: every task of a suite N times, each trial in fresh containers, and the reports. */
import { join, relative, resolve } from 'node:path';
import { UsageError } from '../../errors.js';
import { Command } from '@commander-js/extra-typings';
import type { SuiteOptions, SuiteResult } from '../../evals/run-suite.js';
import { chooseShard } from '../../evals/shards.js';
import type { SourceFlags } from '../../evals/sources/task-source.js';
import type { EvalSummary } from '../../evals/summary.js';
import { alignColumns, costKnown, formatCost, formatDuration, formatUsd } from '../../format.js';
import { note, print, printJson, type CliContext } from '../cli-context.js';
import { headline, percent } from '../eval-headline.js';
import { addDeclared, declareCommand, type DeclaredCommand, type OptionsOf } from '../declare-command.js';
import { evalMerge } from './eval-merge.js';
import { exitCodeForEval } from '../exit-codes.js';
import { MAX_SHARDS, SHARD_COUNT_ENV } from '../../evals/shards.js';
import { integerOption, shardOption, usdOption } from '../option-parsers.js';
import {
  AGENT_KINDS,
  backendChoice,
  collect,
  keepOption,
  runtimeOption,
  withBackend,
} from '../shared-options.js';
import { shellJoin } from '../../sandbox/shell.js';
import { writeFileAtomic } from '../../atomic-write.js';
import { shortPath } from '../short-path.js';
import { terminalSafe } from '../terminal.js';

function declaration() {
  return withBackend(new Command('eval'))
    .description(
      'run every task of a suite N times, each trial in fresh containers; write summary.json, report.md, report.html',
    )
    .argument(
      '<suite>',
      'suite file (YAML), SWE-bench-style instances (JSONL), an instance suite (YAML with instances:), a Harbor task folder or a folder of them (task.toml, instruction.md, environment/, tests/), or a Harbor suite (YAML with harbor:)',
    )
    .addOption(integerOption('-n, --n <n>', 'trials per task (default: the suite)', { min: 1, max: 1000 }))
    .option('--repos <dir>', 'instances: the folder of local clones (owner__name, owner/name or name)')
    .option('--visible-tests', 'instances: apply the test patch where the agent sees it (default: held out)')
    .option(
      '--oracle',
      'instances: apply each gold patch instead of calling a model; reports gold patches that fail and tests that flake over -n runs. Harbor tasks: run solution/solve.sh instead',
    )
    .option(
      '--predictions <file>',
      "instances: score another agent's patches instead of calling a model (SWE-bench predictions: JSONL of instance_id, model_patch, model_name_or_path)",
    )
    .option(
      '--quarantine <file>',
      'instances: with --oracle, write the flaky tests and failing gold patches found there; without, leave them out of FAIL_TO_PASS/PASS_TO_PASS',
    )
    .addOption(
      integerOption(
        '--concurrency <c>',
        'trials at once (default: the suite, else the number of cores; with engines: the sum of their capacities)',
        { min: 1, max: 1000 },
      ),
    )
    .option(
      '--engines <file>',
      'run the trials on the engines of an engines file (YAML; see docs/clusters.md)',
    )
    .option(
      '--engine <context-or-url>',
      'run trials on this engine too: a docker context name or tcp://, ssh://, unix:// URL (repeatable)',
      collect,
    )
    .option('--out <dir>', 'output folder (default: .sandbox-harness/evals/<suite>-<time>)')
    .option(
      '--resume',
      'finish the eval in --out: skip trials that have a result (on any engines); -n and the other trial settings come from its lock',
    )
    .option(
      '--rerun-unscored',
      'resume, and run again the trials that ended unscored (error, infrastructure); their old results move to superseded.jsonl',
    )
    .addOption(
      shardOption(
        '--shard <k/n>',
        'run only shard K of N (1-based) of the trial plan, into the --out folder every shard shares; default: from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX; 1/1: not sharded',
      ),
    )
    .addOption(
      integerOption(
        '--shard-count <count>',
        `with JOB_COMPLETION_INDEX (a Kubernetes Indexed Job): the number of shards (or ${SHARD_COUNT_ENV})`,
        { min: 1, max: MAX_SHARDS },
      ),
    )
    .option('--compare <summary.json>', 'compare with a previous summary; exit 1 on a regression')
    .addOption(
      usdOption(
        '--cost-limit <usd>',
        'stop each trial once its model calls cost this many US dollars (the trial ends `budget`)',
      ),
    )
    .addOption(keepOption('keep trial containers'))
    .option(
      '--pool',
      "take the trials' sandboxes from one warm pool: made ahead (a trial's first while the trial before it runs), proven pristine when taken, drained at the end (docs/pool.md)",
    )
    .addOption(runtimeOption())
    .option(
      '--agent <kind>',
      `the agent of every trial: ${AGENT_KINDS.join(', ')} (default: each catalog's agent.kind); repeat it to run the suite once per agent and compare them`,
      collect,
    )
    .option('--json', 'print only a JSON summary on stdout')
    .addHelpText(
      'after',
      `
Engines: without --engines/--engine every trial runs on the local engine. With them, each
trial goes to the engine with the most free capacity (engines file \`capacity:\`, else CPUs
over the catalogs' CPU limit); images are made present on an engine before its first trial
(base image shipped from the local engine, repo images built there). An infrastructure
failure is retried once, on another engine when there is one; an engine that stops
answering is dropped and its running trials are retried elsewhere. Results, summary.json
and the reports say which engine ran what. Kept containers stay on their engine:
\`inspect\`, \`shell\`, \`rerun-tests\` find it from the run record, \`gc --engines\` cleans up.
Exit codes: 0 every trial scored, no regression; 1 a regression (--compare); 2 a trial ended
in error (bad configuration); 3 a trial could not be scored for infrastructure (or every
engine was lost); 130 interrupted.
Stopping: Ctrl-C (SIGINT) or SIGTERM stops the eval, image builds included: trials in flight
end interrupted, finished ones stay in results.jsonl (--resume goes on), the reports are
written; a second signal exits at once. Both work when the eval was started with SIGINT
ignored (a background job of a script). A wrapper such as \`npx\` may not pass a signal on:
send it to the eval's own process.
Resume: --resume (or --rerun-unscored) takes -n, the task sources' flags, --cost-limit and
--runtime from <out>/suite.lock.json; a flag given that disagrees with it is refused (exit 2).
Shards: every shard computes the same plan (trials sorted by trial number and task id, dealt
out in turn), writes its results in <out>/shards/K-of-N/, and prints its own tally; once all
are done, \`sandbox-harness eval merge <out>\` writes the summary and reports (docs/sharded-evals.md).
Instances (SWE-bench style): each instance's repo is read from its local clone at
base_commit into a fresh working copy under <out>/instances/ (nothing is written to the
clone, nothing is fetched), the test patch is applied held out (or visibly), and a trial
passes when every FAIL_TO_PASS and PASS_TO_PASS test passed in the JUnit report.
Example:
  sandbox-harness eval examples/evals/suite.yaml -n 5 --engines engines.yaml
  sandbox-harness eval instances.jsonl --repos ~/clones --oracle -n 3 --quarantine q.json
  sandbox-harness eval instances.jsonl --repos ~/clones --predictions preds.jsonl`,
    );
}

/** The flags of `eval`, as declared. */
export type EvalCommandOptions = OptionsOf<typeof declaration>;

/** The flags as `runSuite` options: paths resolved against the working directory. */
export function suiteOptions(ctx: CliContext, suiteFile: string, options: EvalCommandOptions): SuiteOptions {
  const absolute = resolve(ctx.cwd, suiteFile);
  const at = (file: string) => resolve(ctx.cwd, file);
  return {
    suiteFile: absolute,
    displayPath: relative(ctx.cwd, absolute) || absolute,
    cwd: ctx.cwd,
    env: ctx.env,
    signal: ctx.signal,
    n: options.n,
    concurrency: options.concurrency,
    ...(options.out !== undefined ? { outDir: at(options.out) } : {}),
    resume: options.resume ?? false,
    ...(options.rerunUnscored ? { rerunUnscored: true } : {}),
    ...shardOf(ctx, options),
    ...(options.compare ? { compare: { file: at(options.compare), displayPath: options.compare } } : {}),
    keep: options.keep,
    costLimitUsd: options.costLimit,
    ...(options.runtime ? { runtime: options.runtime } : {}),
    ...(options.pool ? { pool: true } : {}),
    sourceFlags: sourceFlags(options, at),
  };
}

/** The shard to run: `--shard`, else the cluster's environment (`chooseShard`). */
function shardOf(ctx: CliContext, options: EvalCommandOptions): Pick<SuiteOptions, 'shard'> {
  const shard = chooseShard(options.shard, ctx.env, options.shardCount);
  return shard ? { shard } : {};
}

/** The flags of task sources, their paths through `at`. */
function sourceFlags(options: EvalCommandOptions, at: (file: string) => string): SourceFlags {
  return {
    ...(options.repos ? { repos: at(options.repos) } : {}),
    ...(options.visibleTests ? { visibleTests: true } : {}),
    ...(options.oracle ? { oracle: true } : {}),
    ...(options.quarantine ? { quarantine: at(options.quarantine) } : {}),
    ...(options.predictions ? { predictions: at(options.predictions) } : {}),
  };
}

/** One eval of the suite (with one agent kind, when given): its result and exit code, nothing printed. */
async function evalOnce(ctx: CliContext, suiteFile: string, options: EvalCommandOptions, agent?: string) {
  const { runSuite } = await import('../../evals/run-suite.js');
  const { createProgressReporter, queueTally } = await import('../../evals/eval-progress.js');
  const { exportView } = await import('../../view/export.js');
  const { openViewSource, runHref } = await import('../../view/source.js');
  const { enginesNamed, resolveEngineFlags } = await import('../engine-flags.js');
  const say = (line: string) => {
    if (!options.json) note(ctx, line);
  };
  const chosen = backendChoice(options);
  if (chosen.name !== 'docker' && enginesNamed(options)) {
    throw new UsageError(
      `--engines/--engine name Docker engines; --backend ${chosen.name} places trials itself`,
    );
  }
  // A cluster's queue (trials waiting for a node, and why) goes to the progress line.
  let reporter: ReturnType<typeof createProgressReporter> | undefined;
  const onQueued = queueTally((queued) => reporter?.queue?.(queued));
  const result = await runSuite(
    { ...suiteOptions(ctx, suiteFile, options), ...(agent ? { agent } : {}) },
    {
      ...(enginesNamed(options) ? { engines: () => resolveEngineFlags(ctx, options) } : {}),
      ...(chosen.name !== 'docker'
        ? {
            provider: async () =>
              (await import('../../sandbox/backend-registry.js')).sandboxProvider(chosen.name, {
                ...chosen.options,
                onQueued,
                // A node excluded, fenced or back: said as it happens, beside the progress line.
                onNote: (line) => note(ctx, line),
              }),
          }
        : {}),
      say,
      warn: (line) => note(ctx, line),
      viewer: {
        trialHref: runHref,
        write: async (outDir, viewDir) => exportView(await openViewSource(outDir), viewDir),
      },
      ...(options.json
        ? {}
        : {
            progress: () =>
              (reporter = createProgressReporter(ctx.stderr as NodeJS.WriteStream, {
                tty: ctx.isTTY,
                safe: terminalSafe,
              })),
          }),
    },
  );
  const { run, summary, comparison, notRun } = result;
  const exitCode = exitCodeForEval({
    interrupted: run.interrupted,
    // Trials left unrun because every engine was lost could not be scored either.
    unscored: {
      infrastructure: summary.overall.infrastructure + (run.enginesLost ? notRun : 0),
      error: summary.overall.errors,
    },
    regression: comparison?.tasks.some((t) => t.regression) ?? false,
  });
  return { result, exitCode };
}

function resultJson(result: SuiteResult, resume?: string) {
  const { run } = result;
  return {
    outDir: result.outDir,
    interrupted: run.interrupted,
    ...(run.shard ? { shard: run.shard, planSha256: run.planSha256 } : {}),
    ...(run.rerun ? { rerun: run.rerun } : {}),
    ...(resume ? { resumeCommand: resume } : {}),
    ...(run.enginesLost ? { enginesLost: run.enginesLost } : {}),
    files: result.files,
    view: result.view?.index,
    summary: result.summary,
    comparison: result.comparison,
  };
}

/** The agents of `--agent` (repeatable), each a known kind, in order, once each. */
export function agentsOf(options: EvalCommandOptions): string[] {
  const agents = [...new Set(options.agent ?? [])];
  for (const agent of agents) {
    if (!(AGENT_KINDS as readonly string[]).includes(agent)) {
      throw new UsageError(`unknown agent "${agent}" for --agent`, {
        hint: `use one of: ${AGENT_KINDS.join(', ')}`,
      });
    }
  }
  return agents;
}

export async function evalCommand(
  ctx: CliContext,
  suiteFile: string,
  options: EvalCommandOptions,
): Promise<number> {
  const agents = agentsOf(options);
  if (agents.length <= 1) {
    const { result, exitCode } = await evalOnce(ctx, suiteFile, options, agents[0]);
    const resume =
      result.run.interrupted || result.run.enginesLost
        ? resumeCommand(ctx, suiteFile, options, result)
        : undefined;
    if (options.json) printJson(ctx, resultJson(result, resume));
    else await printSummary(ctx, suiteFile, options, result, resume);
    return exitCode;
  }
  // Several agents: the same suite once per agent, each with its own results and report in
  // <out>/<agent>/, then the agents side by side.
  if (options.resume && !options.out) throw new UsageError('--resume with several agents needs --out');
  const base = resolve(
    ctx.cwd,
    options.out ??
      join(
        '.sandbox-harness',
        'evals',
        `agents-${new Date().toISOString().replace(/[-:.]/g, '').slice(0, 15)}`,
      ),
  );
  const done: { agent: string; result: SuiteResult }[] = [];
  let exitCode = 0;
  for (const agent of agents) {
    if (ctx.signal.aborted) break;
    if (!options.json) print(ctx, `\n== agent ${agent}`);
    const once = await evalOnce(ctx, suiteFile, { ...options, out: join(base, agent) }, agent);
    done.push({ agent, result: once.result });
    exitCode = Math.max(exitCode, once.exitCode);
    if (!options.json) await printSummary(ctx, suiteFile, options, once.result, undefined);
  }
  const rows = agentRows(done);
  if (done.length > 0) {
    const page = agentsMarkdown(
      done[0]!.result.suite.name,
      rows,
      done.map((d) => d.agent),
    );
    await writeFileAtomic(join(base, 'agents.md'), page);
  }
  if (options.json) {
    printJson(ctx, {
      outDir: base,
      ...(done.length > 0 ? { sideBySide: join(base, 'agents.md') } : {}),
      agents: Object.fromEntries(done.map((d) => [d.agent, resultJson(d.result)])),
    });
  }
  if (!options.json) {
    print(ctx, '\nagents side by side:');
    for (const line of alignColumns(rows, [1, 2])) print(ctx, `  ${line}`);
    if (done.length > 0) print(ctx, `side by side in ${shortPath(ctx.cwd, join(base, 'agents.md'))}`);
  }
  return exitCode;
}

/** pass@1 and pass@n (n trials per task): how much more often an agent solves a task given n tries. */
function passAtKCell(values: readonly { k: number; value: number | null }[]): string {
  const ends = values.length > 1 ? [values[0]!, values[values.length - 1]!] : values;
  return ends.length === 0 ? '-' : ends.map((v) => `@${v.k} ${percent(v.value)}`).join(', ');
}

/** The agents side by side as a Markdown page: the rows, and where each agent's own report is. */
export function agentsMarkdown(
  suiteName: string,
  rows: readonly string[][],
  agents: readonly string[],
): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  const [header = [], ...body] = rows;
  return [
    `# Agents side by side: ${suiteName}`,
    '',
    line(header),
    `|${header.map(() => ' --- ').join('|')}|`,
    ...body.map(line),
    '',
    'Pass rates with 95% Wilson intervals; pass@k unbiased (k = 1 and n); per solved: what the trials cost divided by the tasks solved.',
    '',
    ...agents.map((agent) => `- ${agent}: [report](${agent}/report.md), [summary](${agent}/summary.json)`),
    '',
  ].join('\n');
}

/** One row per agent: passes, pass rate with its interval, pass@k, cost per solved task, mean trial time. */
export function agentRows(
  done: readonly { agent: string; result: Pick<SuiteResult, 'summary'> }[],
): string[][] {
  const header = ['agent', 'passed', 'pass rate', '95% interval', 'pass@k', 'per solved', 'mean time'];
  return [
    header,
    ...done.map(({ agent, result: { summary } }) => {
      const o = summary.overall;
      const perSolved = o.cost?.perSolvedUsd;
      return [
        agent,
        `${o.passes}/${o.scored}`,
        percent(o.passRate),
        `[${percent(o.interval.low)}, ${percent(o.interval.high)}]`,
        passAtKCell(o.passAtK ?? []),
        perSolved === undefined || perSolved === null ? '-' : `$${perSolved.toFixed(2)}`,
        o.durationMs.mean === null ? '-' : formatDuration(o.durationMs.mean),
      ];
    }),
  ];
}

/** What a person reads at the end: the headline, a line per task, and where everything went. */
async function printSummary(
  ctx: CliContext,
  suiteFile: string,
  options: EvalCommandOptions,
  result: SuiteResult,
  resume: string | undefined,
): Promise<void> {
  // Loaded already by the eval that ran; imported here so that the declaration stays light.
  const { notScoredCell } = await import('../../evals/report.js');
  const { comparisonFindings } = await import('../../evals/report-tables.js');
  const { formatEngineTally } = await import('../../evals/eval-progress.js');
  const { sourceLines } = await import('../../evals/sources/index.js');
  const { run, summary, comparison, files, view, outDir, notRun } = result;
  print(ctx, `\n${headline(result.suite.name, summary, run)}`);
  if (run.enginesLost) print(ctx, `${run.enginesLost}; ${notRun} trial(s) not run`);
  const taskRows = summary.tasks.map((t) => [
    t.taskId,
    `${t.passes}/${t.scored}`,
    percent(t.passRate),
    `[${percent(t.interval.low)}, ${percent(t.interval.high)}]`,
    t.notScored ? `not scored ${notScoredCell(t)}` : '',
  ]);
  for (const line of alignColumns(taskRows, [1, 2])) print(ctx, `  ${line}`);
  const cost = costLine(summary);
  if (cost) print(ctx, cost);
  const notScored = summary.tasks.flatMap((t) => t.notScoredTrials);
  if (notScored.length > 0) {
    print(ctx, 'not scored (left out of the pass rates; the eval exits non-zero):');
    for (const t of notScored) print(ctx, `  ${t.taskId}#${t.trial} ${t.category}: ${t.reason}`);
  }
  if (result.onEngines || summary.engines.length > 1) {
    print(ctx, 'engines:');
    for (const e of summary.engines) print(ctx, `  ${formatEngineTally({ ...e, name: e.engine })}`);
  }
  for (const line of sourceLines(
    summary,
    sourceFlags(options, (file) => file),
  ))
    print(ctx, line);
  if (comparison) for (const line of comparisonFindings(comparison)) print(ctx, line);
  if (files)
    print(
      ctx,
      `reports: ${shortPath(ctx.cwd, files.html)}  ${shortPath(ctx.cwd, files.markdown)}  ${shortPath(ctx.cwd, files.summaryJson)}`,
    );
  if (view)
    print(
      ctx,
      `trials:  ${shortPath(ctx.cwd, view.index)}  (or: sandbox-harness view ${shortPath(ctx.cwd, outDir)})`,
    );
  if (run.shard)
    print(
      ctx,
      `results: ${shortPath(ctx.cwd, run.resultsFile)}  (once every shard is done: ${shellJoin(['sandbox-harness', 'eval', 'merge', shortPath(ctx.cwd, outDir)])})`,
    );
  else print(ctx, `results: ${shortPath(ctx.cwd, join(outDir, 'results.jsonl'))}`);
  if (resume) print(ctx, `resume with: ${resume}`);
  else if (summary.overall.notScored > 0)
    print(
      ctx,
      `run the unscored trials again with: ${resumeCommand(ctx, suiteFile, options, result, '--rerun-unscored')}`,
    );
}

/** What the trials cost and used, in one line; "no price" said once when no model had one. */
export function costLine(summary: EvalSummary): string | undefined {
  const o = summary.overall;
  const cost = o.cost;
  // The scored trials' tokens (the report's tables count the same).
  const tokens = `${o.inputTokens.total}+${o.outputTokens.total} tokens`;
  if (!cost) return `tokens: ${tokens}`;
  const unpriced = cost.unpriced ?? [];
  const spent = costKnown({ usd: cost.totalUsd, unpriced })
    ? `${formatCost({ usd: cost.totalUsd, unpriced })} in all, ${formatUsd(cost.perTrial.mean)} per trial, ${formatUsd(cost.perSolvedUsd)} per solved task`
    : formatCost({ usd: cost.totalUsd, unpriced });
  return `cost: ${spent}; ${tokens}`;
}

/**
 * The command that finishes this eval, runnable as printed (every word quoted for the shell):
 * the suite, the folder and the shard; the lock has the rest (-n, the sources' flags, ...).
 * The engines are the ones given, which the user may change.
 */
export function resumeCommand(
  ctx: Pick<CliContext, 'cwd'>,
  suiteFile: string,
  options: EvalCommandOptions,
  result: Pick<SuiteResult, 'outDir'> & { run: Pick<SuiteResult['run'], 'shard'> },
  how: '--resume' | '--rerun-unscored' = '--resume',
): string {
  const shard = result.run.shard;
  return shellJoin([
    'sandbox-harness',
    'eval',
    suiteFile,
    '--out',
    shortPath(ctx.cwd, result.outDir),
    how,
    ...(shard ? ['--shard', `${shard.index}/${shard.count}`] : []),
    ...engineFlags(options),
  ]);
}

function engineFlags(options: EvalCommandOptions): string[] {
  return [
    ...(options.engines !== undefined ? ['--engines', options.engines] : []),
    ...(options.engine ?? []).flatMap((e) => ['--engine', e]),
  ];
}

export { headline } from '../eval-headline.js';

const evalOnly = declareCommand(declaration, evalCommand);

/** `eval <suite>`, with `eval merge <out>` beneath it. */
export const evalSuite: DeclaredCommand = {
  build(run) {
    const command = evalOnly.build(run);
    addDeclared(command, evalMerge, run);
    return command;
  },
};
