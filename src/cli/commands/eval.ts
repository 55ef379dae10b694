import { relative, resolve, join } from 'node:path';
import { UsageError } from '../../errors.js';
import { runSuite, type SuiteOptions, type SuiteResult } from '../../evals/run-suite.js';
import { formatEngineTally, createProgressReporter } from '../../evals/eval-progress.js';
import type { EvalSummary } from '../../evals/summary.js';
import { notScoredCell } from '../../evals/report.js';
import { sourceLines } from '../../evals/sources/index.js';
import type { SourceFlags } from '../../evals/sources/task-source.js';
import type { KeepPolicy } from '../../fix/run-fix.js';
import { enginesNamed, resolveEngineFlags, type EngineFlags } from '../engine-flags.js';
import { exitCodeForEval } from '../exit-codes.js';
import { print, printJson, note, type CliContext } from '../context.js';
import { alignColumns, shortPath } from '../format.js';
import { parseCostLimit } from '../cost-flag.js';
import { terminalSafe } from '../terminal.js';
import { exportView } from '../../view/export.js';
import { openViewSource, runHref } from '../../view/source.js';

/** The flags of `eval` as commander hands them over (see `cli/index.ts`). */
export interface EvalCommandOptions extends EngineFlags {
  n?: string;
  concurrency?: string;
  out?: string;
  resume?: boolean;
  compare?: string;
  json?: boolean;
  /** commander checks the choices. */
  keep?: KeepPolicy;
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

/** The flags as `runSuite` options: numbers checked, paths resolved against the working directory. */
export function suiteOptions(ctx: CliContext, suiteFile: string, options: EvalCommandOptions): SuiteOptions {
  const n = positiveInt('-n', options.n, 1000);
  const concurrency = positiveInt('--concurrency', options.concurrency, 1000);
  const costLimitUsd = parseCostLimit(options.costLimit);
  const absolute = resolve(ctx.cwd, suiteFile);
  const at = (file: string) => resolve(ctx.cwd, file);
  return {
    suiteFile: absolute,
    displayPath: relative(ctx.cwd, absolute) || absolute,
    cwd: ctx.cwd,
    env: ctx.env,
    signal: ctx.signal,
    ...(n !== undefined ? { n } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(options.out !== undefined ? { outDir: at(options.out) } : {}),
    resume: options.resume ?? false,
    ...(options.compare ? { compare: { file: at(options.compare), displayPath: options.compare } } : {}),
    ...(options.keep !== undefined ? { keep: options.keep } : {}),
    ...(costLimitUsd !== undefined ? { costLimitUsd } : {}),
    ...(options.runtime ? { runtime: options.runtime } : {}),
    sourceFlags: sourceFlags(options, at),
  };
}

/** The flags of task sources, their paths through `at`. */
function sourceFlags(options: EvalCommandOptions, at: (file: string) => string): SourceFlags {
  return {
    ...(options.repos ? { repos: at(options.repos) } : {}),
    ...(options.visibleTests ? { visibleTests: true } : {}),
    ...(options.oracle ? { oracle: true } : {}),
    ...(options.quarantine ? { quarantine: at(options.quarantine) } : {}),
  };
}

export async function evalCommand(
  ctx: CliContext,
  suiteFile: string,
  options: EvalCommandOptions,
): Promise<number> {
  const say = (line: string) => {
    if (!options.json) note(ctx, line);
  };
  const result = await runSuite(suiteOptions(ctx, suiteFile, options), {
    ...(enginesNamed(options) ? { engines: () => resolveEngineFlags(ctx, options) } : {}),
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
            createProgressReporter(ctx.stderr as NodeJS.WriteStream, { tty: ctx.isTTY, safe: terminalSafe }),
        }),
  });
  const { run, summary, comparison, notRun } = result;
  if (options.json) {
    printJson(ctx, {
      outDir: result.outDir,
      interrupted: run.interrupted,
      ...(run.enginesLost ? { enginesLost: run.enginesLost } : {}),
      files: result.files,
      view: result.view?.index,
      summary,
      comparison,
    });
  } else printSummary(ctx, suiteFile, options, result);
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

/** What a person reads at the end: the headline, a line per task, and where everything went. */
function printSummary(
  ctx: CliContext,
  suiteFile: string,
  options: EvalCommandOptions,
  result: SuiteResult,
): void {
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

function engineFlags(options: EvalCommandOptions): string {
  return [
    ...(options.engines !== undefined ? [` --engines ${options.engines}`] : []),
    ...(options.engine ?? []).map((e) => ` --engine ${e}`),
  ].join('');
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
