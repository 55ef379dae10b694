/**
 * An eval's output folder as the scheduler keeps it: `suite.lock.json` says which suite and n
 * it belongs to (`--resume` refuses any other), and `results.jsonl` holds one line per
 * finished trial, each appended and synced before the next, read back as data that a crash
 * may have cut short.
 */
import { open, readFile, truncate } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../atomic-write.js';
import { ConfigError, UsageError } from '../errors.js';
import type { Suite } from './suite.js';
import { trialResultSchema, type TrialResult } from './types.js';

export const RESULTS_FILE = 'results.jsonl';
export const LOCK_FILE = 'suite.lock.json';

/** Identifies the suite an output folder belongs to; `--resume` refuses anything else. */
export interface SuiteLock {
  version: 1;
  suiteName: string;
  suiteFile: string;
  suiteSha256: string;
  n: number;
  createdAt: string;
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

/** A trial's key in the maps of finished trials. */
export function trialKey(taskId: string, trial: number): string {
  return `${taskId}\u0000${trial}`;
}

/**
 * Makes sure `outDir` holds this suite's results and nobody else's: a fresh eval refuses a
 * folder that already has results, and a resumed one refuses a folder made for another suite
 * or another n (mixing them would make the statistics meaningless).
 */
export async function claimOutDir(outDir: string, suite: Suite, n: number, resume: boolean): Promise<void> {
  const lockFile = path.join(outDir, LOCK_FILE);
  const resultsFile = path.join(outDir, RESULTS_FILE);
  const lock = await readLock(lockFile);
  const hasResults = ((await readOptional(resultsFile))?.length ?? 0) > 0;

  if (resume && lock) {
    const problems: string[] = [];
    if (lock.suiteSha256 !== suite.sha256) problems.push(`the suite file changed (was ${lock.suiteFile})`);
    if (lock.n !== n) problems.push(`n was ${lock.n}, now ${n}`);
    if (problems.length > 0) {
      throw new UsageError(`cannot resume the eval in ${outDir}: ${problems.join('; ')}`, {
        hint: 'resume with the same suite file and -n, or start a new eval with another --out',
      });
    }
    return;
  }
  if (resume && hasResults) {
    throw new UsageError(
      `cannot resume the eval in ${outDir}: ${RESULTS_FILE} exists but ${LOCK_FILE} is missing`,
      {
        hint: 'start a new eval with another --out',
      },
    );
  }
  if (!resume && hasResults) {
    throw new UsageError(`${outDir} already holds eval results`, {
      hint: 'pass --resume to finish that eval, or choose another --out',
    });
  }
  const fresh: SuiteLock = {
    version: 1,
    suiteName: suite.name,
    suiteFile: suite.file,
    suiteSha256: suite.sha256,
    n,
    createdAt: new Date().toISOString(),
  };
  await writeFileAtomic(lockFile, `${JSON.stringify(fresh, null, 2)}\n`);
}

async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function readLock(file: string): Promise<SuiteLock | undefined> {
  const bytes = await readOptional(file);
  if (bytes === undefined) return undefined;
  try {
    const value = JSON.parse(bytes.toString('utf8')) as Partial<SuiteLock>;
    if (typeof value.suiteSha256 === 'string' && typeof value.n === 'number') return value as SuiteLock;
  } catch {
    // Falls through to the error below.
  }
  throw new ConfigError(`${file} is not a suite lock written by this harness`, [], {
    hint: 'start a new eval with another --out',
  });
}

/**
 * Reads finished trials. A crash mid-write can only leave a partial last line (each line is
 * one append + fsync), so that line is ignored and cut off, which keeps the next append on
 * a line of its own. Anything else that does not parse is real damage and is reported.
 */
export async function readResults(file: string, suite: Suite, n: number): Promise<TrialResult[]> {
  const bytes = await readOptional(file);
  if (bytes === undefined || bytes.length === 0) return [];
  const lastNewline = bytes.lastIndexOf(0x0a);
  const complete = bytes.subarray(0, lastNewline + 1);
  if (complete.length < bytes.length) await truncate(file, complete.length);

  const taskIds = new Set(suite.tasks.map((t) => t.id));
  const results: TrialResult[] = [];
  const seen = new Set<string>();
  const problems: string[] = [];
  const lines = complete.toString('utf8').split('\n');
  lines.forEach((line, index) => {
    if (line.trim() === '') return;
    const where = `${file}:${index + 1}`;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      problems.push(`${where}: not a JSON line`);
      return;
    }
    const parsed = trialResultSchema.safeParse(json);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      problems.push(
        `${where}: not a trial result (${first ? `${first.path.join('.')}: ${first.message}` : 'invalid'})`,
      );
      return;
    }
    const r = parsed.data;
    if (!taskIds.has(r.taskId) || r.trial >= n) {
      problems.push(`${where}: trial ${r.taskId}#${r.trial} is not part of this suite with n=${n}`);
      return;
    }
    // Interrupted trials measured nothing and are run again.
    if (r.category === 'interrupted') return;
    const k = trialKey(r.taskId, r.trial);
    if (seen.has(k)) return;
    seen.add(k);
    results.push(r);
  });
  if (problems.length > 0) {
    throw new ConfigError(`${file} is damaged (${problems.length} bad line(s))`, problems, {
      hint: 'remove the bad lines to resume, or start a new eval with another --out',
    });
  }
  return results;
}
