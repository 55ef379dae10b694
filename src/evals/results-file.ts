/**
 * Where an eval keeps its trials' results, as the scheduler reads and writes them: a
 * `ResultStore`. An unsharded eval's store is `results.jsonl` in its out folder, one line per
 * finished trial, each appended and synced before the next, read back as data that a crash
 * may have cut short. A shard's store is a file per trial (`./trial-files.ts`). Either way a
 * result that is replaced (`--rerun-unscored`) moves to `superseded.jsonl` beside the store
 * first, so the store holds one result per trial and the history is kept.
 */
import { appendFile, open, readFile, truncate } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../atomic-write.js';
import { ConfigError } from '../errors.js';
import { trialKey, trialLabel, type TrialId } from './trial-plan.js';
import { trialResultSchema, type TrialResult } from './types.js';

export { LOCK_FILE } from './eval-lock.js';
export const RESULTS_FILE = 'results.jsonl';
/** Results replaced by a later run of the same trial, oldest first, beside the store. */
export const SUPERSEDED_FILE = 'superseded.jsonl';

/** What a result read back must belong to. */
export interface ResultCheck {
  taskIds: ReadonlySet<string>;
  n: number;
  /** A shard's store: the trials of that shard only. */
  belongs?: (id: TrialId) => boolean;
  /** How messages name the plan (`this suite with n=3`, `shard 2/4`). */
  what: string;
}

/** Where an eval's results are kept (see the file's comment). */
export interface ResultStore {
  /** The file or folder, for messages. */
  readonly where: string;
  /**
   * Every result there, the latest per trial, interrupted ones left out (they measured
   * nothing and are run again). `repair`: the folder's holder may cut a torn last line.
   */
  read(check: ResultCheck, repair: boolean): Promise<TrialResult[]>;
  /** Holds no result (checked before a fresh eval takes the folder). */
  isEmpty(): Promise<boolean>;
  /** For writing, one result per trial. */
  open(): Promise<ResultsLog>;
  /** Moves these trials' results to the history: they count as never run. */
  supersede(results: readonly TrialResult[]): Promise<void>;
}

/** The results file, appended to one line per trial, each line synced before the next. */
export interface ResultsLog {
  append(result: TrialResult): Promise<void>;
  /** After the last append has settled. */
  close(): Promise<void>;
}

export async function openResultsLog(file: string): Promise<ResultsLog> {
  const handle = await open(file, 'a');
  // Appends are chained so concurrent trials never interleave inside one line.
  let writes: Promise<void> = Promise.resolve();
  return {
    append(result) {
      const line = `${JSON.stringify(result)}\n`;
      writes = writes.then(async () => {
        await handle.appendFile(line, 'utf8');
        await handle.sync();
      });
      return writes;
    },
    async close() {
      await writes.catch(() => undefined);
      await handle.close();
    },
  };
}

async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * One result read back, checked: a trial result, of a task of the plan, a trial number under
 * n, of this shard. Returns the problem, or the result.
 */
export function checkResult(json: unknown, check: ResultCheck): TrialResult | string {
  const parsed = trialResultSchema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    return `not a trial result (${first ? `${first.path.join('.')}: ${first.message}` : 'invalid'})`;
  }
  const r = parsed.data;
  if (!check.taskIds.has(r.taskId) || r.trial >= check.n)
    return `trial ${trialLabel(r)} is not part of ${check.what}`;
  if (check.belongs && !check.belongs(r)) return `trial ${trialLabel(r)} is not one of ${check.what}`;
  return r;
}

/** The latest result of each trial, interrupted ones left out (see `ResultStore.read`). */
export function latestPerTrial(results: readonly TrialResult[]): TrialResult[] {
  const latest = new Map<string, TrialResult>();
  for (const r of results) {
    if (r.category === 'interrupted') continue;
    const key = trialKey(r);
    // Deleted first so the map's order is the order of the latest results.
    latest.delete(key);
    latest.set(key, r);
  }
  return [...latest.values()];
}

/**
 * Reads finished trials. A crash mid-write can only leave a partial last line (each line is
 * one append + fsync), so that line is ignored and, with `repair`, cut off, which keeps the
 * next append on a line of its own. Anything else that does not parse is real damage and is
 * reported. A trial written twice counts once: the later line.
 */
export async function readResults(file: string, check: ResultCheck, repair = true): Promise<TrialResult[]> {
  const bytes = await readOptional(file);
  if (bytes === undefined || bytes.length === 0) return [];
  const lastNewline = bytes.lastIndexOf(0x0a);
  const complete = bytes.subarray(0, lastNewline + 1);
  if (repair && complete.length < bytes.length) await truncate(file, complete.length);

  const results: TrialResult[] = [];
  const problems: string[] = [];
  complete
    .toString('utf8')
    .split('\n')
    .forEach((line, index) => {
      if (line.trim() === '') return;
      const where = `${file}:${index + 1}`;
      let json: unknown;
      try {
        json = JSON.parse(line);
      } catch {
        problems.push(`${where}: not a JSON line`);
        return;
      }
      const checked = checkResult(json, check);
      if (typeof checked === 'string') problems.push(`${where}: ${checked}`);
      else results.push(checked);
    });
  if (problems.length > 0) {
    throw new ConfigError(`${file} is damaged (${problems.length} bad line(s))`, problems, {
      hint: 'remove the bad lines to resume, or start a new eval with another --out',
    });
  }
  return latestPerTrial(results);
}

/** Appends results to the history file beside a store, synced, before they leave the store. */
export async function appendSuperseded(dir: string, results: readonly TrialResult[]): Promise<void> {
  if (results.length === 0) return;
  const file = path.join(dir, SUPERSEDED_FILE);
  await appendFile(file, results.map((r) => `${JSON.stringify(r)}\n`).join(''), 'utf8');
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** An unsharded eval's store: `results.jsonl` in its out folder. */
export function jsonlStore(outDir: string): ResultStore {
  const file = path.join(outDir, RESULTS_FILE);
  return {
    where: file,
    read: (check, repair) => readResults(file, check, repair),
    isEmpty: async () => ((await readOptional(file))?.length ?? 0) === 0,
    open: () => openResultsLog(file),
    async supersede(results) {
      if (results.length === 0) return;
      await appendSuperseded(outDir, results);
      const gone = new Set(results.map(trialKey));
      const kept = ((await readOptional(file))?.toString('utf8') ?? '').split('\n').filter((line) => {
        if (line.trim() === '') return false;
        try {
          return !gone.has(trialKey(JSON.parse(line) as TrialId));
        } catch {
          return true;
        }
      });
      await writeFileAtomic(file, kept.map((line) => `${line}\n`).join(''));
    },
  };
}
