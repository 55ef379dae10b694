import { UsageError } from '../../errors.js';
import { collectGarbage, dockerEngine } from '../../sandbox/docker/index.js';
import { parseAge } from '../format.js';
import { print, printJson, type CliContext } from '../context.js';

export interface GcCommandOptions {
  olderThan?: string;
  all?: boolean;
  dryRun?: boolean;
  json?: boolean;
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
  const report = await collectGarbage(dockerEngine(), {
    ...(olderThanMs !== undefined ? { olderThanMs } : {}),
    all: options.all ?? false,
    dryRun: options.dryRun ?? false,
  });
  if (options.json) {
    printJson(ctx, report);
    return 0;
  }
  const verb = options.dryRun ? 'would remove' : 'removed';
  for (const c of report.containers)
    print(ctx, `${verb} container ${c.id.slice(0, 12)} ${c.name}${c.kept ? ' (kept)' : ''}`);
  for (const i of report.images) print(ctx, `${verb} image ${i.tags[0] ?? i.id.slice(7, 19)}`);
  print(ctx, `${verb} ${report.containers.length} container(s) and ${report.images.length} image(s)`);
  if (!options.all && olderThanMs === undefined) {
    print(ctx, 'kept containers of failed runs stay; use --older-than 24h or --all to remove them');
  }
  return 0;
}
