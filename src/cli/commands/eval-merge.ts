/** `eval merge <out>`: a sharded eval's summary, reports and results, once its shards are done. */
import { relative, resolve } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { note, print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { EXIT_CODES, exitCodeForEval } from '../exit-codes.js';
import { headline } from '../eval-headline.js';
import { shortPath } from '../short-path.js';

function declaration() {
  return new Command('merge')
    .description(
      "write a sharded eval's summary.json, report.md, report.html, results.jsonl and viewer from every shard's results",
    )
    .argument('<out>', 'the --out folder the shards shared')
    .option('--suite <file>', "the suite file, when it is no longer where the eval's lock says")
    .option(
      '--partial',
      'write the reports from the trials that have results even when some are missing (a shard not run, crashed or still running); the exit code is still 3',
    )
    .option('--compare <summary.json>', 'compare with a previous summary; exit 1 on a regression')
    .option('--json', 'print only a JSON account on stdout')
    .addHelpText(
      'after',
      `
The plan (suite, n, the task sources' flags, the shard count) is the folder's lock's; every
shard's results are checked against it. Trials missing: their names and exit 3, nothing
written (with --partial: the reports of the trials there are, and the same exit 3). Exit codes as
\`eval\`'s otherwise. The reports equal an unsharded run's of the same trials but for times,
durations and run ids.
Example:
  sandbox-harness eval merge evals-out`,
    );
}

export type EvalMergeOptions = OptionsOf<typeof declaration>;

export async function evalMergeCommand(
  ctx: CliContext,
  out: string,
  options: EvalMergeOptions,
): Promise<number> {
  const { mergeEval, listMissing } = await import('../../evals/eval-merge.js');
  const { exportView } = await import('../../view/export.js');
  const { openViewSource, runHref } = await import('../../view/source.js');
  const at = (file: string) => resolve(ctx.cwd, file);
  const outDir = at(out);
  const result = await mergeEval(
    {
      outDir,
      cwd: ctx.cwd,
      partial: options.partial === true,
      ...(options.suite ? { suite: { file: at(options.suite), displayPath: options.suite } } : {}),
      ...(options.compare ? { compare: { file: at(options.compare), displayPath: options.compare } } : {}),
    },
    {
      say: (line) => {
        if (!options.json) note(ctx, line);
      },
      warn: (line) => note(ctx, line),
      viewer: {
        trialHref: runHref,
        write: async (dir, viewDir) => exportView(await openViewSource(dir), viewDir),
      },
    },
  );
  const { written, missing, running, lock } = result;
  const missingLine =
    missing.length > 0
      ? `${missing.length} of ${result.total} trial(s) have no result: ${listMissing(missing)}`
      : undefined;
  if (options.json) {
    printJson(ctx, {
      outDir,
      planSha256: lock.planSha256,
      shards: lock.shards,
      total: result.total,
      missing: missing.map((m) => `${m.taskId}#${m.trial}`),
      running,
      ...(written
        ? {
            files: written.files,
            view: written.view?.index,
            summary: written.summary,
            comparison: written.comparison,
          }
        : {}),
    });
  } else {
    for (const line of running) note(ctx, `still running: ${line}`);
    if (missingLine) note(ctx, missingLine);
    if (!written)
      note(
        ctx,
        `nothing written: run the missing shards (eval ... --out ${shortPath(ctx.cwd, outDir)} --shard K/${lock.shards} --resume), or merge with --partial`,
      );
    else {
      const { summary, files } = written;
      const run = { results: result.results, total: result.total, resumed: 0, interrupted: false };
      print(ctx, headline(result.suite.name, summary, run));
      print(
        ctx,
        `reports: ${shortPath(ctx.cwd, files.html)}  ${shortPath(ctx.cwd, files.markdown)}  ${shortPath(ctx.cwd, files.summaryJson)}`,
      );
      print(ctx, `results: ${relative(ctx.cwd, written.resultsFile) || written.resultsFile}`);
    }
  }
  if (!written) return EXIT_CODES.infrastructure;
  const o = written.summary.overall;
  return exitCodeForEval({
    interrupted: false,
    // A trial with no result could not be scored, like one whose engines were all lost.
    unscored: { infrastructure: o.infrastructure + missing.length, error: o.errors },
    regression: written.comparison?.tasks.some((t) => t.regression) ?? false,
  });
}

export const evalMerge = declareCommand(declaration, evalMergeCommand);
