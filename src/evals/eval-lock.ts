/**
 * The out folder's lock, `suite.lock.json`: what eval the folder holds. It names the suite
 * (its hash), the settings that decide what each trial measures (n, the task sources' flags,
 * the cost limit, the runtime) and how many shards share the folder, and a hash of all that,
 * the plan's. `--resume` takes its settings from it, so the command an interrupted eval prints
 * runs as printed; a flag that disagrees with it is refused by name. Shards started at once
 * all try to create it: exactly one does (an exclusive create, which holds on a shared file
 * system), the others find it and join when their plan is the same one.
 */
import { randomBytes } from 'node:crypto';
import { link, lstat, open, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { sha256 } from '../changes/hash.js';
import { ConfigError, UsageError } from '../errors.js';
import { SOURCE_FLAGS, type SourceFlags } from './sources/task-source.js';
import type { Suite } from './suite.js';
import { shardLabel, type Shard } from './trial-plan.js';

export const LOCK_FILE = 'suite.lock.json';
/** Largest lock read back: it is a few hundred bytes. */
const MAX_LOCK_BYTES = 64 * 1024;

/** What decides what a trial measures, besides the suite file. */
export interface PlanSettings {
  /** Trials per task. */
  n: number;
  /** The task sources' flags (`--oracle`, `--repos`, ...): paths absolute, switches only when on. */
  source: SourceFlags;
  /** `--cost-limit`: each trial stops at this many US dollars. */
  costLimitUsd?: number;
  /** `--runtime`: every trial's OCI runtime. */
  runtime?: string;
}

/** Settings as given on a command line: any may be absent (then `--resume` takes the lock's). */
export type GivenSettings = Partial<Omit<PlanSettings, 'source'>> & { source?: SourceFlags };

export interface EvalLock {
  version: 2;
  suiteName: string;
  suiteFile: string;
  suiteSha256: string;
  n: number;
  settings: PlanSettings;
  /** The task ids of the plan, in the suite's order. */
  tasks: string[];
  /** sha256 of the suite's hash, the settings and the task ids: one plan, one hash. */
  planSha256: string;
  /** How many shards share the folder (1: not sharded). */
  shards: number;
  /** The harness that started the eval (the merged summary names it). */
  harnessVersion: string;
  createdAt: string;
}

/** A lock of an older harness: suite and n only (its other settings were not recorded). */
interface LegacyLock {
  version: 1;
  suiteName?: string;
  suiteFile?: string;
  suiteSha256: string;
  n: number;
}

export type AnyLock = EvalLock | LegacyLock;

/** Each setting as the command line spells it, for messages (source flags from the sources' table). */
function flagOf(key: string): string {
  if (key === 'n') return '-n';
  if (key === 'costLimitUsd') return '--cost-limit';
  if (key === 'runtime') return '--runtime';
  return (SOURCE_FLAGS as Readonly<Record<string, string>>)[key] ?? `--${key}`;
}

/** A setting's value in a message: switches as on/off, absent as "not given". */
function shown(value: unknown): string {
  if (value === undefined) return 'not given';
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** The settings flattened, one key per flag (`n`, `oracle`, `costLimitUsd`, ...), absent ones left out. */
function flatten(settings: GivenSettings): Map<string, unknown> {
  const flat = new Map<string, unknown>();
  const put = (key: string, value: unknown) => {
    // An off switch is the same as a switch not given: `--oracle` is only ever on.
    if (value !== undefined && value !== false) flat.set(key, value);
  };
  put('n', settings.n);
  for (const [key, value] of Object.entries(settings.source ?? {})) put(key, value);
  put('costLimitUsd', settings.costLimitUsd);
  put('runtime', settings.runtime);
  return flat;
}

/** Each setting where `a` and `b` differ: `flag: lock LOCK, given GIVEN`. */
function differences(lock: GivenSettings, given: GivenSettings, onlyGiven: boolean): string[] {
  const a = flatten(lock);
  const b = flatten(given);
  const keys = [...new Set([...a.keys(), ...b.keys()])];
  return keys
    .filter((key) => (onlyGiven ? b.has(key) : true) && a.get(key) !== b.get(key))
    .map((key) => `${flagOf(key)}: the lock says ${shown(a.get(key))}, given ${shown(b.get(key))}`);
}

/** The settings of an older lock: n alone is known. */
function lockSettings(lock: AnyLock): GivenSettings {
  return lock.version === 2 ? lock.settings : { n: lock.n };
}

/**
 * `--resume`: the lock's settings, with the ones given checked against them. A flag given
 * that disagrees is refused, every one named with both values; a flag left out takes the
 * lock's value. (A switch cannot be turned off by leaving it out: `--oracle` stays on.)
 */
export function resumeSettings(lock: AnyLock, given: GivenSettings, outDir: string): GivenSettings {
  // An older lock knows n only: the other settings are taken as given.
  const problems = differences(
    lockSettings(lock),
    lock.version === 2 ? given : given.n !== undefined ? { n: given.n } : {},
    true,
  );
  if (problems.length > 0)
    throw new UsageError(`cannot resume the eval in ${outDir}: ${problems.join('; ')}`, {
      hint: 'leave those flags out (--resume takes them from the lock), or start a new eval with another --out',
    });
  if (lock.version !== 2) return { ...given, n: lock.n };
  const settings = lock.settings;
  return {
    n: settings.n,
    source: { ...settings.source },
    ...(settings.costLimitUsd !== undefined ? { costLimitUsd: settings.costLimitUsd } : {}),
    ...(settings.runtime !== undefined ? { runtime: settings.runtime } : {}),
  };
}

/** Settings with the absent switches left out, so the same settings always hash the same. */
function canonical(settings: PlanSettings): PlanSettings {
  const source = Object.fromEntries(
    Object.entries(settings.source)
      .filter(([, value]) => value !== undefined && value !== false)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  ) as SourceFlags;
  return {
    n: settings.n,
    source,
    ...(settings.costLimitUsd !== undefined ? { costLimitUsd: settings.costLimitUsd } : {}),
    ...(settings.runtime !== undefined ? { runtime: settings.runtime } : {}),
  };
}

/** The lock this eval would write: its plan and hash. */
export function planLock(
  suite: Suite,
  settings: PlanSettings,
  shards: number,
  harnessVersion: string,
  now: Date = new Date(),
): EvalLock {
  const clean = canonical(settings);
  const tasks = suite.tasks.map((t) => t.id);
  return {
    version: 2,
    suiteName: suite.name,
    suiteFile: suite.file,
    suiteSha256: suite.sha256,
    n: clean.n,
    settings: clean,
    tasks,
    planSha256: sha256(JSON.stringify({ suite: suite.sha256, settings: clean, tasks })),
    shards,
    harnessVersion,
    createdAt: now.toISOString(),
  };
}

async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    const st = await lstat(file);
    if (!st.isFile())
      throw new ConfigError(`${file} is not a regular file`, [], {
        hint: 'start a new eval with another --out',
      });
    if (st.size > MAX_LOCK_BYTES)
      throw new ConfigError(`${file} is over ${MAX_LOCK_BYTES} bytes: not a suite lock`);
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1;

/** The folder's lock, undefined when it has none; a file that is not a lock is a configuration error. */
export async function readEvalLock(outDir: string): Promise<AnyLock | undefined> {
  const file = path.join(outDir, LOCK_FILE);
  const bytes = await readOptional(file);
  if (bytes === undefined) return undefined;
  let value: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(bytes.toString('utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      value = parsed as Record<string, unknown>;
  } catch {
    // Reported below.
  }
  const settings = value?.settings as Record<string, unknown> | undefined;
  const v2 =
    value?.version === 2 &&
    isString(value.suiteSha256) &&
    isString(value.planSha256) &&
    isCount(value.n) &&
    isCount(value.shards) &&
    Array.isArray(value.tasks) &&
    value.tasks.every(isString) &&
    settings !== undefined &&
    typeof settings === 'object' &&
    settings.n === value.n &&
    typeof settings.source === 'object' &&
    settings.source !== null;
  if (v2) return value as unknown as EvalLock;
  if (value && value.version !== 2 && isString(value.suiteSha256) && isCount(value.n))
    return { ...(value as unknown as LegacyLock), version: 1 };
  throw new ConfigError(`${file} is not a suite lock written by this harness`, [], {
    hint: 'start a new eval with another --out',
  });
}

/**
 * Writes the lock unless the folder has one: true when this call made it. The lock is
 * written whole to a file of its own and then linked to its name, which fails when the name
 * exists, on a local disk as on NFS: two shards never both think they wrote it, and nobody
 * reads half a lock.
 */
export async function createEvalLock(outDir: string, lock: EvalLock): Promise<boolean> {
  const file = path.join(outDir, LOCK_FILE);
  const temp = path.join(outDir, `.${LOCK_FILE}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', 0o644);
  try {
    await handle.writeFile(`${JSON.stringify(lock, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temp, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await rm(temp, { force: true });
  }
}

/** Replaces the lock (a fresh unsharded eval in a folder that has a lock but no results). */
export async function replaceEvalLock(outDir: string, lock: EvalLock): Promise<void> {
  await rm(path.join(outDir, LOCK_FILE), { force: true });
  if (!(await createEvalLock(outDir, lock)))
    throw new UsageError(`another eval claimed ${outDir} at the same moment`, {
      hint: 'choose another --out',
    });
}

/**
 * Refuses to run `mine` in a folder locked for another plan: another suite or settings (both
 * plan hashes, and each setting that differs), or another number of shards.
 */
export function checkSamePlan(
  existing: AnyLock,
  mine: EvalLock,
  outDir: string,
  shard: Shard | undefined,
): void {
  const problems: string[] = [];
  if (existing.suiteSha256 !== mine.suiteSha256)
    problems.push(
      `the suite changed (the lock's is ${existing.suiteSha256.slice(0, 12)} of ${existing.suiteFile ?? 'its suite'}, this one ${mine.suiteSha256.slice(0, 12)} of ${mine.suiteFile})`,
    );
  // An older lock knows n only.
  problems.push(
    ...differences(lockSettings(existing), existing.version === 2 ? mine.settings : { n: mine.n }, false),
  );
  if (existing.version === 2) {
    if (problems.length === 0 && existing.planSha256 !== mine.planSha256)
      problems.push('the task list differs');
    if (existing.shards !== mine.shards)
      problems.push(
        existing.shards === 1
          ? `the eval there is not sharded, given --shard ${shard ? shardLabel(shard) : ''}`.trimEnd()
          : `the eval there is split into ${existing.shards} shards, ${shard ? `given --shard ${shardLabel(shard)}` : 'this run is not sharded'}`,
      );
  }
  if (problems.length === 0) return;
  const hashes =
    existing.version === 2
      ? ` (its plan ${existing.planSha256.slice(0, 12)}, this plan ${mine.planSha256.slice(0, 12)})`
      : '';
  throw new UsageError(`${outDir} holds another eval${hashes}: ${problems.join('; ')}`, {
    hint:
      existing.version === 2 && existing.shards > 1 && existing.shards !== mine.shards
        ? `give --shard K/${existing.shards}, or choose another --out`
        : 'run with the same suite and flags (--resume takes them from the lock), or choose another --out',
  });
}
