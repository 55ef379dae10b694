/** `gc`: this tool's leftover containers, kept ones and unused repo images when asked. */
import { Command } from '@commander-js/extra-typings';
import { errorMessage, UsageError } from '../../errors.js';
import type { GcReport } from '../../sandbox/backend-registry.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { EXIT_CODES } from '../exit-codes.js';
import { durationOption } from '../option-parsers.js';
import type { RunsLocation } from '../run-lookup.js';
import { backendChoice, collect, withBackend, withRunsLocation } from '../shared-options.js';

function declaration() {
  return withBackend(
    withRunsLocation(
      new Command('gc').description(
        "remove this tool's leftover containers; kept ones with --run, --older-than or --all; unused repo images with --all",
      ),
    ),
  )
    .option(
      '--run <run-id>',
      'only the containers of this run, kept ones included (a run id, a unique prefix, or "last", found like inspect\'s)',
    )
    .addOption(
      durationOption(
        '--older-than <age>',
        'only what is older than this (e.g. 30m, 24h, 7d), kept containers included',
      ),
    )
    .option('--all', 'everything this tool created: kept containers and unused repo images too')
    .option('--engines <file>', 'on every engine of this engines file instead of the local one')
    .option('--engine <context-or-url>', 'on this engine instead of the local one (repeatable)', collect)
    .option('--dry-run', 'say what would be removed')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
Without options, gc removes only orphans: unkept containers whose harness process on this
host is gone, and the status files their warm pools left for doctor. Unkept containers of a
harness process that still runs are never removed; kept ones are (their run is over), when
--run, --older-than or --all names them.`,
    );
}

/** The flags of `gc`, as declared. */
export type GcCommandOptions = OptionsOf<typeof declaration>;

/** One engine's part of `gc --engines`: what it removed, or why it could not. */
export type EngineGcReport = { name: string; endpoint: string } & (GcReport | { error: string });

/**
 * The run id whose containers `--run` means: `last` or a unique prefix of a recorded run is
 * looked up like `inspect` does; any other value is taken as the run id itself (its record
 * may live elsewhere, e.g. an eval trial's under the eval's output folder), also where no
 * runs folder can be told from this one (two catalogs here, and neither `--catalog` nor
 * `--runs-dir`): the containers are found by their run label either way.
 */
async function runIdOf(ctx: CliContext, ref: string, where: RunsLocation): Promise<string> {
  const { resolveRun } = await import('../../runs/record.js');
  const { runsDirOf } = await import('../run-lookup.js');
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(ref)) {
    throw new UsageError(`--run: expected a run id, a unique prefix of one, or "last", got "${ref}"`);
  }
  if (ref === 'last' || ref === 'latest')
    return (await resolveRun(await runsDirOf(ctx, where), ref)).record.id;
  const named = where.catalog !== undefined || where.runsDir !== undefined;
  const dir = await runsDirOf(ctx, where).catch((error: unknown) => {
    if (named) throw error;
    return undefined;
  });
  if (dir === undefined) return ref;
  return resolveRun(dir, ref).then(
    (run) => run.record.id,
    () => ref,
  );
}

/**
 * Removes this tool's containers (kept ones when asked) and, with --all, its unused repo
 * images: on the local engine, or on every engine named by `--engines`/`--engine` (kept
 * containers of an eval over several engines stay where their trials ran). Exit 3 when an
 * engine could not be reached; the others are still collected.
 */
export async function gcCommand(ctx: CliContext, options: GcCommandOptions): Promise<number> {
  const { connectEngine, describeEngine, sandboxProvider } =
    await import('../../sandbox/backend-registry.js');
  const { enginesNamed, resolveEngineFlags } = await import('../engine-flags.js');
  const olderThanMs = options.olderThan;
  const runId = options.run === undefined ? undefined : await runIdOf(ctx, options.run, options);
  const gcOptions = {
    olderThanMs,
    runId,
    all: options.all ?? false,
    dryRun: options.dryRun ?? false,
  };
  const verb = options.dryRun ? 'would remove' : 'removed';
  const ofRun = runId !== undefined ? ` of run ${runId}` : '';
  const keptNote = () => {
    if (!options.all && olderThanMs === undefined && runId === undefined) {
      print(
        ctx,
        'kept containers of failed runs stay; use --run <run-id>, --older-than 24h or --all to remove them',
      );
    }
  };

  if (enginesNamed(options)) {
    const specs = await resolveEngineFlags(ctx, options);
    const reports: EngineGcReport[] = await Promise.all(
      specs.map(async (spec) => {
        const endpoint = await describeEngine(spec);
        try {
          const provider = await sandboxProvider('docker', { engine: await connectEngine(spec) });
          const report = await provider.collectGarbage(gcOptions);
          return { name: spec.name, endpoint, ...report };
        } catch (error) {
          return { name: spec.name, endpoint, error: errorMessage(error).split('\n')[0] ?? '' };
        }
      }),
    );
    const failed = reports.filter((r) => 'error' in r).length;
    if (options.json) printJson(ctx, { run: runId, engines: reports });
    else {
      for (const r of reports) {
        if ('error' in r) {
          print(ctx, `${r.name} (${r.endpoint}): not reachable: ${r.error}`);
          continue;
        }
        for (const line of reportLines(r, verb, ofRun)) print(ctx, `${r.name}: ${line}`);
      }
      keptNote();
    }
    return failed > 0 ? EXIT_CODES.infrastructure : EXIT_CODES.ok;
  }

  const chosen = backendChoice(options);
  const report = await (await sandboxProvider(chosen.name, chosen.options)).collectGarbage(gcOptions);
  const pools = await stalePools(gcOptions);
  if (options.json) {
    printJson(ctx, { run: runId, ...report, pools });
    return 0;
  }
  for (const line of reportLines(report, verb, ofRun)) print(ctx, line);
  for (const pool of pools)
    print(ctx, `${verb} the status file of ${pool.owner} pid ${pool.pid}'s warm pool (its process is gone)`);
  keptNote();
  return 0;
}

/**
 * The status files `doctor` reads of warm pools whose process on this host is gone (their
 * sandboxes are orphans, removed above); not when gc is asked about one run only.
 */
async function stalePools(options: {
  runId: string | undefined;
  dryRun: boolean;
}): Promise<Array<{ pid: number; owner: string; engine: string }>> {
  if (options.runId !== undefined) return [];
  const { removeStalePools } = await import('../../sandbox/pool/pool-status.js');
  const stale = await removeStalePools(undefined, { dryRun: options.dryRun }).catch(() => []);
  return stale.map(({ pid, owner, engine }) => ({ pid, owner, engine }));
}

function reportLines(report: GcReport, verb: string, ofRun: string): string[] {
  return [
    ...report.containers.map(
      (c) => `${verb} container ${c.id.slice(0, 12)} ${c.name}${c.kept ? ' (kept)' : ''}`,
    ),
    ...report.images.map((i) => `${verb} image ${i.tags[0] ?? i.id.slice(7, 19)}`),
    ...(report.networks ?? []).map((n) => `${verb} egress network ${n.name}`),
    `${verb} ${report.containers.length} container(s) and ${report.images.length} image(s)${ofRun}`,
  ];
}

export const gc = declareCommand(declaration, gcCommand);
