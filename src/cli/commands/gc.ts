import { errorMessage, UsageError } from '../../errors.js';
import { engineHandle } from '../../fleet/fleet.js';
import { describeEndpoint } from '../../sandbox/docker/endpoint.js';
import { collectGarbage, dockerEngine } from '../../sandbox/docker/index.js';
import type { GcReport } from '../../sandbox/docker/gc.js';
import { enginesNamed, resolveEngineFlags, type EngineFlags } from '../engine-flags.js';
import { EXIT_CODES } from '../exit-codes.js';
import { parseAge } from '../format.js';
import { print, printJson, type CliContext } from '../context.js';

/** With `--engines`/`--engine`: collect on each of those engines instead of the local one. */
export interface GcCommandOptions extends EngineFlags {
  olderThan?: string;
  all?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** One engine's part of `gc --engines`: what it removed, or why it could not. */
export type EngineGcReport = { name: string; endpoint: string } & (GcReport | { error: string });

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
  const gcOptions = {
    ...(olderThanMs !== undefined ? { olderThanMs } : {}),
    all: options.all ?? false,
    dryRun: options.dryRun ?? false,
  };
  const verb = options.dryRun ? 'would remove' : 'removed';
  const keptNote = () => {
    if (!options.all && olderThanMs === undefined) {
      print(ctx, 'kept containers of failed runs stay; use --older-than 24h or --all to remove them');
    }
  };

  if (enginesNamed(options)) {
    const specs = await resolveEngineFlags(ctx, options);
    const reports: EngineGcReport[] = await Promise.all(
      specs.map(async (spec) => {
        const endpoint = describeEndpoint(spec.endpoint);
        try {
          const report = await collectGarbage(engineHandle(spec).connection, gcOptions);
          return { name: spec.name, endpoint, ...report };
        } catch (error) {
          return { name: spec.name, endpoint, error: errorMessage(error).split('\n')[0] ?? '' };
        }
      }),
    );
    const failed = reports.filter((r) => 'error' in r).length;
    if (options.json) printJson(ctx, { engines: reports });
    else {
      for (const r of reports) {
        if ('error' in r) {
          print(ctx, `${r.name} (${r.endpoint}): not reachable: ${r.error}`);
          continue;
        }
        for (const line of reportLines(r, verb)) print(ctx, `${r.name}: ${line}`);
      }
      keptNote();
    }
    return failed > 0 ? EXIT_CODES.infrastructure : EXIT_CODES.ok;
  }

  const report = await collectGarbage(dockerEngine(), gcOptions);
  if (options.json) {
    printJson(ctx, report);
    return 0;
  }
  for (const line of reportLines(report, verb)) print(ctx, line);
  keptNote();
  return 0;
}

function reportLines(report: GcReport, verb: string): string[] {
  return [
    ...report.containers.map(
      (c) => `${verb} container ${c.id.slice(0, 12)} ${c.name}${c.kept ? ' (kept)' : ''}`,
    ),
    ...report.images.map((i) => `${verb} image ${i.tags[0] ?? i.id.slice(7, 19)}`),
    `${verb} ${report.containers.length} container(s) and ${report.images.length} image(s)`,
  ];
}
