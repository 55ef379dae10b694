import { errorMessage, UsageError } from '../../errors.js';
import { resolveRun } from '../../runs/record.js';
import { connectEngine, describeEngine, sandboxProvider, type GcReport } from '../../sandbox/registry.js';
import { enginesNamed, resolveEngineFlags, type EngineFlags } from '../engine-flags.js';
import { EXIT_CODES } from '../exit-codes.js';
import { parseAge } from '../format.js';
import { print, printJson, type CliContext } from '../context.js';
import { runsDirOf, type RunsLocation } from './runs.js';

/** With `--engines`/`--engine`: collect on each of those engines instead of the local one. */
export interface GcCommandOptions extends EngineFlags, RunsLocation {
  olderThan?: string;
  all?: boolean;
  run?: string;
  dryRun?: boolean;
  json?: boolean;
}

/** One engine's part of `gc --engines`: what it removed, or why it could not. */
export type EngineGcReport = { name: string; endpoint: string } & (GcReport | { error: string });

/**
 * The run id whose containers `--run` means: `last` or a unique prefix of a recorded run is
 * looked up like `inspect` does; any other value is taken as the run id itself (its record
 * may live elsewhere, e.g. an eval trial's under the eval's output folder).
 */
async function runIdOf(ctx: CliContext, ref: string, where: RunsLocation): Promise<string> {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(ref)) {
    throw new UsageError(`--run: expected a run id, a unique prefix of one, or "last", got "${ref}"`);
  }
  const dir = await runsDirOf(ctx, where);
  if (ref === 'last' || ref === 'latest') return (await resolveRun(dir, ref)).record.id;
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
  let olderThanMs: number | undefined;
  if (options.olderThan !== undefined) {
    olderThanMs = parseAge(options.olderThan);
    if (olderThanMs === undefined) {
      throw new UsageError(
        `--older-than: expected a duration such as 30m, 24h or 7d, got "${options.olderThan}"`,
      );
    }
  }
  const runId = options.run === undefined ? undefined : await runIdOf(ctx, options.run, options);
  const gcOptions = {
    ...(olderThanMs !== undefined ? { olderThanMs } : {}),
    ...(runId !== undefined ? { runId } : {}),
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
    if (options.json) printJson(ctx, { ...(runId !== undefined ? { run: runId } : {}), engines: reports });
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

  const report = await (await sandboxProvider()).collectGarbage(gcOptions);
  if (options.json) {
    printJson(ctx, { ...(runId !== undefined ? { run: runId } : {}), ...report });
    return 0;
  }
  for (const line of reportLines(report, verb, ofRun)) print(ctx, line);
  keptNote();
  return 0;
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
