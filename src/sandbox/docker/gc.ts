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

/** Removes unkept containers whose owning harness process on this host is gone (crash, kill -9). */
export async function reapOrphans(engine: DockerEngine): Promise<string[]> {
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
  /** Only containers of this run. */
  runId?: string;
  dryRun?: boolean;
}

export interface GcReport {
  containers: { id: string; name: string; run: string; kept: boolean }[];
  images: { id: string; tags: string[] }[];
}

export async function collectGarbage(engine: DockerEngine, options: GcOptions = {}): Promise<GcReport> {
  const now = Date.now();
  const report: GcReport = { containers: [], images: [] };
  const filter: Record<string, string | true> = { [LABEL.marker]: true };
  if (options.runId) filter[LABEL.run] = options.runId;
  const containers = await engine.listContainers(filter);
  const remaining = new Set<string>();
  for (const c of containers) {
    const kept = c.name.startsWith(KEPT_NAME_PREFIX);
    const old = options.olderThanMs === undefined || now - c.createdAt.getTime() >= options.olderThanMs;
    const ownerAlive =
      c.labels[LABEL.ownerHost] === hostname() &&
      Number(c.labels[LABEL.ownerPid]) !== process.pid &&
      processAlive(Number(c.labels[LABEL.ownerPid]));
    const eligible =
      old &&
      !ownerAlive &&
      (kept ? options.all || options.olderThanMs !== undefined || !!options.runId : true);
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
