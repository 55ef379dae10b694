import { UsageError } from '../../errors.js';
import { resolveRun } from '../../runs/record.js';
import { collectGarbage, dockerEngine } from '../../sandbox/docker/index.js';
import { parseAge } from '../format.js';
import { print, printJson, type CliContext } from '../context.js';
import { runsDirOf, type RunsLocation } from './runs.js';

export interface GcCommandOptions extends RunsLocation {
  olderThan?: string;
  all?: boolean;
  run?: string;
  dryRun?: boolean;
  json?: boolean;
}

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

/** Removes this tool's containers (kept ones when asked) and, with --all, its unused repo images. */
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
  const report = await collectGarbage(dockerEngine(), {
    ...(olderThanMs !== undefined ? { olderThanMs } : {}),
    ...(runId !== undefined ? { runId } : {}),
    all: options.all ?? false,
    dryRun: options.dryRun ?? false,
  });
  if (options.json) {
    printJson(ctx, { ...(runId !== undefined ? { run: runId } : {}), ...report });
    return 0;
  }
  const verb = options.dryRun ? 'would remove' : 'removed';
  for (const c of report.containers)
    print(ctx, `${verb} container ${c.id.slice(0, 12)} ${c.name}${c.kept ? ' (kept)' : ''}`);
  for (const i of report.images) print(ctx, `${verb} image ${i.tags[0] ?? i.id.slice(7, 19)}`);
  print(
    ctx,
    `${verb} ${report.containers.length} container(s) and ${report.images.length} image(s)${runId !== undefined ? ` of run ${runId}` : ''}`,
  );
  if (!options.all && olderThanMs === undefined && runId === undefined) {
    print(
      ctx,
      'kept containers of failed runs stay; use --run <run-id>, --older-than 24h or --all to remove them',
    );
  }
  return 0;
}
