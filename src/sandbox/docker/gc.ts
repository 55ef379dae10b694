/**
 * Finding and removing what this tool left in the Docker daemon. Everything it creates is
 * labelled, so nothing is found by name guessing and nothing foreign is ever touched.
 */
import { hostname } from 'node:os';
import type { DockerEngine } from './engine.js';
import { KEPT_NAME_PREFIX, LABEL } from './labels.js';

/** Whether a process with this pid exists on this host (EPERM: it exists, owned by someone else). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** What gc needs of the engine (tests pass a fake). */
export type GcEngine = Pick<
  DockerEngine,
  'listContainers' | 'removeContainer' | 'listImages' | 'removeImage'
>;

/** Removes unkept containers whose owning harness process on this host is gone (crash, kill -9). */
export async function reapOrphans(engine: GcEngine): Promise<string[]> {
  const containers = await engine.listContainers({ [LABEL.marker]: true });
  const host = hostname();
  const removed: string[] = [];
  for (const c of containers) {
    if (c.name.startsWith(KEPT_NAME_PREFIX)) continue;
    if (c.labels[LABEL.ownerHost] !== host) continue;
    const pid = Number(c.labels[LABEL.ownerPid]);
    if (!Number.isInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    await engine.removeContainer(c.id);
    removed.push(c.id);
  }
  return removed;
}

export interface GcOptions {
  /** Only what was created longer ago than this. */
  olderThanMs?: number;
  /** Also kept containers (of failed runs) and repo images. */
  all?: boolean;
  /** Only containers of this run (kept ones included). */
  runId?: string;
  dryRun?: boolean;
}

export interface GcReport {
  containers: { id: string; name: string; run: string; kept: boolean }[];
  images: { id: string; tags: string[] }[];
}

/**
 * Removes this tool's containers, never an unkept one whose owner is known to be running (a
 * kept container is stopped and done with: its run finished, even if its process goes on,
 * as an eval does):
 * - no option: orphans only, i.e. unkept containers whose owning process on this host is
 *   gone. A container made from another host (a shared engine) cannot be checked, so it
 *   stays unless an option below names it.
 * - `olderThanMs`: only what is older, kept containers included.
 * - `runId`: only that run's containers, kept ones included.
 * - `all`: kept containers too, and repo images no remaining container uses.
 */
export async function collectGarbage(engine: GcEngine, options: GcOptions = {}): Promise<GcReport> {
  const now = Date.now();
  const report: GcReport = { containers: [], images: [] };
  const filter: Record<string, string | true> = { [LABEL.marker]: true };
  if (options.runId) filter[LABEL.run] = options.runId;
  const containers = await engine.listContainers(filter);
  const remaining = new Set<string>();
  const host = hostname();
  const named = options.all || options.olderThanMs !== undefined || !!options.runId;
  for (const c of containers) {
    const kept = c.name.startsWith(KEPT_NAME_PREFIX);
    const old = options.olderThanMs === undefined || now - c.createdAt.getTime() >= options.olderThanMs;
    const sameHost = c.labels[LABEL.ownerHost] === host;
    const pid = Number(c.labels[LABEL.ownerPid]);
    const ownerAlive = sameHost && pid !== process.pid && processAlive(pid);
    const eligible = old && !(ownerAlive && !kept) && (sameHost || named) && (kept ? named : true);
    if (!eligible) {
      remaining.add(c.image);
      continue;
    }
    if (!options.dryRun) await engine.removeContainer(c.id);
    report.containers.push({ id: c.id, name: c.name, run: c.labels[LABEL.run] ?? '', kept });
  }
  if (options.all && !options.runId) {
    const images = await engine.listImages({ [LABEL.marker]: true, [LABEL.kind]: 'repo' });
    for (const image of images) {
      if (options.olderThanMs !== undefined && now - image.createdAt.getTime() < options.olderThanMs)
        continue;
      if (image.tags.some((t) => remaining.has(t)) || remaining.has(image.id)) continue;
      if (options.dryRun || (await engine.removeImage(image.id)))
        report.images.push({ id: image.id, tags: image.tags });
    }
  }
  return report;
}
