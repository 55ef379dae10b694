/**
 * What the warm pools of running harness processes hold, for `doctor`: each pool (an eval's
 * per engine, a `fix --pool` run's) keeps one small file under the user's cache folder
 * (`pools/<pid>-<n>.json`) with its counts, rewritten as they change (at most a few times a
 * second) and removed when the pool is drained. A file whose process on this host is gone is
 * a pool that crashed: `doctor` says so (the orphan reaper and `gc` remove its sandboxes),
 * and `gc` or the next pool that starts removes the file.
 *
 * The files are the harness's own, but what is read back is checked as any input: opened
 * without following a link or waiting on a pipe, at most 4 KiB, every field of the right
 * type; anything else is skipped, never an error.
 */
import { mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { cacheDir } from '../../image-context/cache-dir.js';
import { readOwnFile } from '../../read-own-file.js';
import type { DoctorCheck } from '../types.js';
import type { PoolStats, PoolStatusSink } from './warm-pool.js';

/** Where the status files live: `$XDG_CACHE_HOME/sandbox-harness/pools` by default. */
export function poolStatusDir(): string {
  return join(cacheDir(), 'pools');
}

export interface PoolStatus {
  version: 1;
  pid: number;
  host: string;
  /** What the pool serves: `eval` or `fix`. */
  owner: string;
  engine: string;
  startedAt: string;
  updatedAt: string;
  stats: PoolStats;
}

/** A status file read back, with whether its process still runs (unknown on another host). */
export interface FoundPool extends PoolStatus {
  file: string;
  alive: boolean | 'unknown';
}

const MAX_STATUS_BYTES = 4096;
/** Most rewrites per second: the counts change on every sandbox made and taken. */
const WRITE_EVERY_MS = 250;
const STAT_FIELDS = ['ready', 'starting', 'handedOut', 'cold', 'discarded'] as const;
let sequence = 0;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // It exists but is another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** One pool's status file: `update` as its counts change, `close` when it is drained. */
export class PoolStatusFile implements PoolStatusSink {
  private readonly file: string;
  private readonly startedAt = new Date().toISOString();
  private latest: PoolStats | undefined;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly owner: string,
    private readonly engine: string,
    private readonly dir: string = poolStatusDir(),
  ) {
    this.file = join(dir, `${process.pid}-${++sequence}.json`);
    // Files of pools whose process on this host is gone: nothing will remove them but this.
    void removeStalePools(dir).catch(() => undefined);
  }

  /** Records the counts; written within a quarter of a second. Never throws. */
  update(stats: PoolStats): void {
    if (this.closed) return;
    this.latest = stats;
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.writing = this.writing.then(() => this.write()).catch(() => undefined);
    }, WRITE_EVERY_MS);
    this.timer.unref();
  }

  /** Removes the file (the pool is drained); what was still to be written is dropped. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
    await rm(this.file, { force: true }).catch(() => undefined);
  }

  private async write(): Promise<void> {
    if (this.closed || !this.latest) return;
    const status: PoolStatus = {
      version: 1,
      pid: process.pid,
      host: hostname(),
      owner: this.owner,
      engine: this.engine,
      startedAt: this.startedAt,
      updatedAt: new Date().toISOString(),
      stats: this.latest,
    };
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    // Temp file created exclusively, renamed over: a reader never sees half of one, and a
    // link someone put at the name is replaced, not followed. No fsync: a crash loses a count.
    const temp = join(this.dir, `.${process.pid}-${randomBytes(4).toString('hex')}.tmp`);
    try {
      const handle = await open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify(status)}\n`);
      } finally {
        await handle.close();
      }
      // A close that came while this was written wins: no file outlives its pool.
      if (this.closed) return;
      await rename(temp, this.file);
    } finally {
      await rm(temp, { force: true }).catch(() => undefined);
    }
  }
}

function isStatus(value: unknown): value is PoolStatus {
  if (!value || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  const stats = v['stats'] as Record<string, unknown> | undefined;
  return (
    v['version'] === 1 &&
    Number.isSafeInteger(v['pid']) &&
    (v['pid'] as number) > 0 &&
    ['host', 'owner', 'engine', 'startedAt', 'updatedAt'].every(
      (k) => typeof v[k] === 'string' && (v[k] as string).length <= 200,
    ) &&
    !!stats &&
    typeof stats === 'object' &&
    STAT_FIELDS.every((k) => Number.isSafeInteger(stats[k]) && (stats[k] as number) >= 0)
  );
}

/** One status file, or undefined for anything that is not one (a link, a pipe, too big, bad JSON). */
async function readStatus(file: string): Promise<PoolStatus | undefined> {
  const bytes = await readOwnFile(file, MAX_STATUS_BYTES);
  if (!bytes) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isStatus(parsed)) return undefined;
  const { version, pid, host, owner, engine, startedAt, updatedAt, stats } = parsed;
  const counts = Object.fromEntries(STAT_FIELDS.map((k) => [k, stats[k]])) as unknown as PoolStats;
  return { version, pid, host, owner, engine, startedAt, updatedAt, stats: counts };
}

/** The pools that left a status file, oldest first; none when the folder is not there. */
export async function findPools(dir: string = poolStatusDir()): Promise<FoundPool[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const here = hostname();
  const found: FoundPool[] = [];
  for (const name of names.filter((n) => /^\d+-\d+\.json$/.test(n)).slice(0, 256)) {
    const file = join(dir, name);
    const status = await readStatus(file);
    if (!status) continue;
    found.push({ ...status, file, alive: status.host === here ? processAlive(status.pid) : 'unknown' });
  }
  return found.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
}

/**
 * Removes the status files of pools whose process on this host is gone (`gc`, and every pool
 * that starts); returns them. With `dryRun` only says which.
 */
export async function removeStalePools(
  dir: string = poolStatusDir(),
  options: { dryRun?: boolean } = {},
): Promise<FoundPool[]> {
  const stale = (await findPools(dir)).filter((pool) => pool.alive === false);
  if (!options.dryRun) for (const pool of stale) await rm(pool.file, { force: true });
  return stale;
}

function describePool(pool: FoundPool): string {
  const s = pool.stats;
  const where = pool.host === hostname() ? `pid ${pool.pid}` : `pid ${pool.pid} on ${pool.host}`;
  return `${pool.owner} ${where}, engine ${pool.engine}: ${s.ready} warm, ${s.starting} starting (${s.handedOut} taken, ${s.cold} cold, ${s.discarded} discarded)`;
}

/** `doctor`'s note on the warm pools of this user's harness processes. */
export async function poolCheck(dir: string = poolStatusDir()): Promise<DoctorCheck> {
  const pools = await findPools(dir);
  const running = pools.filter((p) => p.alive !== false);
  const gone = pools.filter((p) => p.alive === false);
  const detail =
    running.length === 0
      ? 'none running (`fix --pool`, `eval --pool` keep sandboxes started ahead)'
      : running.map(describePool).join('; ');
  if (gone.length === 0) return { name: 'warm-pools', ok: true, detail };
  return {
    name: 'warm-pools',
    ok: true,
    warning: true,
    detail: `${detail}; left by ${gone.length} process(es) that are gone: ${gone.map(describePool).join('; ')}`,
    fix: 'sandbox-harness gc (removes the sandboxes of harness processes that are gone, and these notes)',
  };
}
