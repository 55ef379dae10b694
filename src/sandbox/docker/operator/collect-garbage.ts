/**
 * Finding and removing what this tool left in the Docker daemon. Everything it creates is
 * labelled, so nothing is found by name guessing and nothing foreign is ever touched.
 */
import { hostname } from 'node:os';
import type { EngineContainers, EngineImages, EngineNetworks, NetworkSummary } from '../engine/index.js';
import { closeStaleHoles } from '../../egress/firewall.js';
import { KEPT_NAME_PREFIX, LABEL } from '../labels.js';
import type { GcReport, GcScope } from '../../types.js';

export type { GcReport } from '../../types.js';
export type GcOptions = GcScope;

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
export interface GcEngine {
  containers: Pick<EngineContainers, 'list' | 'remove'>;
  images: Pick<EngineImages, 'list' | 'remove'>;
  networks?: Pick<EngineNetworks, 'list' | 'remove'>;
  isLocal?(): boolean;
}

/** Run and role of a sandbox or its egress network: a network lives as long as its sandbox. */
function ownerKey(labels: Record<string, string>): string {
  return `${labels[LABEL.run] ?? ''}\0${labels[LABEL.role] ?? ''}`;
}

/**
 * Egress networks (and their firewall holes) whose sandbox is gone: after the containers,
 * so a network is removed only once no container of its run and role is left, and only
 * when `eligible` says so (its owner died, or gc's options name it).
 */
async function collectNetworks(
  engine: GcEngine,
  filter: Record<string, string | true>,
  eligible: (n: NetworkSummary) => boolean,
  dryRun: boolean,
): Promise<NetworkSummary[]> {
  if (!engine.networks) return [];
  const networks = await engine.networks.list(filter);
  if (networks.length === 0) return [];
  const sandboxes = new Set(
    (await engine.containers.list({ [LABEL.marker]: true })).map((c) => ownerKey(c.labels)),
  );
  const removed: NetworkSummary[] = [];
  for (const n of networks) {
    if (sandboxes.has(ownerKey(n.labels)) || n.containers > 0 || !eligible(n)) continue;
    if (!dryRun) await engine.networks.remove(n.id);
    removed.push(n);
  }
  // A run killed before it closed its hole in the host firewall: close the holes of bridges gone.
  if (!dryRun && engine.isLocal?.() && process.getuid?.() === 0) {
    const live = await engine.networks.list({ [LABEL.marker]: true });
    await closeStaleHoles(new Set(live.map((n) => n.bridgeName))).catch(() => 0);
  }
  return removed;
}

function ownerGone(labels: Record<string, string>): boolean {
  if (labels[LABEL.ownerHost] !== hostname()) return false;
  const pid = Number(labels[LABEL.ownerPid]);
  return Number.isInteger(pid) && pid !== process.pid && !processAlive(pid);
}

/** Removes unkept containers whose owning harness process on this host is gone (crash, kill -9). */
export async function reapOrphans(engine: GcEngine): Promise<string[]> {
  const containers = await engine.containers.list({ [LABEL.marker]: true });
  const host = hostname();
  const removed: string[] = [];
  for (const c of containers) {
    if (c.name.startsWith(KEPT_NAME_PREFIX)) continue;
    if (c.labels[LABEL.ownerHost] !== host) continue;
    const pid = Number(c.labels[LABEL.ownerPid]);
    if (!Number.isInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    await engine.containers.remove(c.id);
    removed.push(c.id);
  }
  const networks = await collectNetworks(engine, { [LABEL.marker]: true }, (n) => ownerGone(n.labels), false);
  removed.push(...networks.map((n) => n.id));
  return removed;
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
  const containers = await engine.containers.list(filter);
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
    if (!options.dryRun) await engine.containers.remove(c.id);
    report.containers.push({ id: c.id, name: c.name, run: c.labels[LABEL.run] ?? '', kept });
  }
  const networks = await collectNetworks(
    engine,
    filter,
    (n) =>
      (options.olderThanMs === undefined || now - n.createdAt.getTime() >= options.olderThanMs) &&
      (named || ownerGone(n.labels)),
    options.dryRun === true,
  );
  if (networks.length > 0) {
    report.networks = networks.map((n) => ({ id: n.id, name: n.name, run: n.labels[LABEL.run] ?? '' }));
  }
  report.images.push(...(await collectForkImages(engine, options, remaining, now)));
  if (options.all && !options.runId) {
    const images = await engine.images.list({ [LABEL.marker]: true, [LABEL.kind]: 'repo' });
    for (const image of images) {
      if (options.olderThanMs !== undefined && now - image.createdAt.getTime() < options.olderThanMs)
        continue;
      if (image.tags.some((t) => remaining.has(t)) || remaining.has(image.id)) continue;
      if (options.dryRun || (await engine.images.remove(image.id)))
        report.images.push({ id: image.id, tags: image.tags });
    }
  }
  return report;
}

/**
 * Fork images (`fork-image.ts`) no remaining container uses: those of a named run, all of
 * them with `all` or `olderThanMs`, and otherwise those whose owning process on this host is
 * gone (a run killed before it removed its forks). A fork holds one run's state only: it is
 * never worth keeping after that run.
 */
async function collectForkImages(
  engine: GcEngine,
  options: GcOptions,
  remaining: ReadonlySet<string>,
  now: number,
): Promise<GcReport['images']> {
  const filter: Record<string, string | true> = { [LABEL.marker]: true, [LABEL.kind]: 'fork' };
  if (options.runId) filter[LABEL.run] = options.runId;
  const removed: GcReport['images'] = [];
  for (const image of await engine.images.list(filter)) {
    if (options.olderThanMs !== undefined && now - image.createdAt.getTime() < options.olderThanMs) continue;
    const named = options.all || options.olderThanMs !== undefined || !!options.runId;
    if (!named && !ownerGone(image.labels)) continue;
    if (image.tags.some((t) => remaining.has(t)) || remaining.has(image.id)) continue;
    if (options.dryRun || (await engine.images.remove(image.id)))
      removed.push({ id: image.id, tags: image.tags });
  }
  return removed;
}
