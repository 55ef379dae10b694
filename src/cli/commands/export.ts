/**
 * `export <run> --format atif|inspect`: a run's trajectory in a format other tools read, and
 * (`inspect`) an eval's output folder as one Inspect log. The transcript and the event log
 * are parsed against a schema; an eval folder is read as `eval-log-export.ts` says.
 */
import { resolve } from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { UsageError } from '../../errors.js';
import { print, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { withRunsLocation } from '../shared-options.js';

const EXPORT_FORMATS = ['atif', 'inspect'] as const;

function declaration() {
  return withRunsLocation(
    new Command('export').description(
      "a run's trajectory in a portable format: Harbor's ATIF (steps, tool calls, observations, tokens, cost), or an Inspect AI eval log of a run or of a whole eval",
    ),
  )
    .argument(
      '<run-id>',
      'a run id, a unique prefix, or "last"; with --format inspect also an eval\'s --out folder',
    )
    .addOption(
      new Option(
        '--format <format>',
        "atif: Harbor's trajectory; inspect: Inspect's JSON eval log (a run is one sample; an eval folder is one log, a sample per trial: task = sample id, trial = epoch)",
      )
        .choices(EXPORT_FORMATS)
        .default('atif'),
    )
    .option('-o, --out <file>', 'write here (atomically) instead of stdout')
    .addHelpText(
      'after',
      `
Inspect logs: messages are the implementer's attempts in order; events are a model event per call
(its input: the messages new since the call before), a tool event per call, an info event per
attempt verdict and a score event; score "verified" is C for ready-for-review, else I; unscored
trials are samples with an error. Not mapped: tool definitions, the full input of each call, the
checker's conversation as messages (events only), a target answer, the .eval zip flavour.
See docs/trajectories.md.`,
    );
}

export type ExportOptions = OptionsOf<typeof declaration>;

export async function exportCommand(ctx: CliContext, ref: string, options: ExportOptions): Promise<number> {
  const { writeFileAtomic } = await import('../../atomic-write.js');
  const { runToAtif } = await import('../../runs/atif.js');
  const { runToInspect } = await import('../../runs/inspect.js');
  const { resolveRun } = await import('../../runs/record.js');
  const { readTrajectory } = await import('../../runs/trajectory.js');
  const { exportEval, isEvalFolder } = await import('../eval-log-export.js');
  const { runsDirOf } = await import('../run-lookup.js');
  const format = options.format;
  let value: unknown;
  const evalFolder = resolve(ctx.cwd, ref);
  if (await isEvalFolder(evalFolder)) {
    if (format !== 'inspect') {
      throw new UsageError(`${ref} is an eval's output folder: --format ${format} exports one run`, {
        hint: `Export the whole eval with --format inspect, or one trial's run from ${ref}/runs with --runs-dir.`,
      });
    }
    value = await exportEval(evalFolder);
  } else {
    const run = await resolveRun(await runsDirOf(ctx, options), ref);
    const { transcript, events } = await readTrajectory(run);
    value =
      format === 'inspect'
        ? runToInspect(run.record, transcript, events)
        : runToAtif(run.record, transcript, events);
  }
  const text = `${JSON.stringify(value, null, 2)}\n`;
  if (options.out) {
    const file = resolve(ctx.cwd, options.out);
    await writeFileAtomic(file, text);
    print(ctx, `wrote ${file} (${format})`);
  } else {
    ctx.stdout.write(text);
  }
  return 0;
}

export const exportRun = declareCommand(declaration, exportCommand);
