/**
 * A shard's results: one file per trial in `<shard folder>/results/`, named after the trial
 * (`trialFileName`), each written whole to a temp file of its own, synced and renamed into
 * place. A reader on any machine sees a trial's whole result or none, never a torn one, and
 * no two shards ever write the same file (a trial belongs to one shard, a shard to one holder
 * at a time: `./holder-lock.ts`). Everything read back is checked as data: regular files only
 * (no links), a size cap, the content's trial must be the one its name says, of this shard,
 * and a folder with more entries than the shard has trials is refused before any is read.
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, readdir, readFile, rename, rm, unlink } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import {
  appendSuperseded,
  checkResult,
  latestPerTrial,
  type ResultCheck,
  type ResultStore,
} from './results-file.js';
import { trialFileName } from './trial-plan.js';
import type { TrialResult } from './types.js';

export const TRIAL_RESULTS_DIR = 'results';
/** A trial result is a few kilobytes; a file much larger is not one. */
const MAX_RESULT_BYTES = 1024 * 1024;
const TEMP = /^\..*\.tmp$/;
/** Temp files a crash may leave: at most the writes in flight when it died. */
const MAX_TEMPS = 1000;

/** A shard's store in `shardDir`; `capacity`: how many trials the shard has (more files than that is damage). */
export function trialFilesStore(shardDir: string, capacity: number): ResultStore {
  const dir = path.join(shardDir, TRIAL_RESULTS_DIR);
  return {
    where: dir,
    read: (check, repair) => readTrialFiles(dir, check, capacity, repair),
    async isEmpty() {
      const names = await readdir(dir).catch(() => [] as string[]);
      return !names.some((name) => !TEMP.test(name));
    },
    async open() {
      await mkdir(dir, { recursive: true });
      return {
        append: (result) => writeTrialFile(dir, result),
        close: async () => undefined,
      };
    },
    async supersede(results) {
      if (results.length === 0) return;
      await appendSuperseded(shardDir, results);
      for (const r of results) await unlink(path.join(dir, trialFileName(r))).catch(() => undefined);
    },
  };
}

async function writeTrialFile(dir: string, result: TrialResult): Promise<void> {
  const name = trialFileName(result);
  const temp = path.join(dir, `.${name}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(temp, 'wx', 0o644);
    try {
      await handle.writeFile(`${JSON.stringify(result)}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path.join(dir, name));
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  // The rename is durable once the folder is synced (where the file system lets a folder be opened).
  const folder = await open(dir, 'r').catch(() => undefined);
  await folder
    ?.sync()
    .catch(() => undefined)
    .finally(() => folder.close());
}

async function readTrialFiles(
  dir: string,
  check: ResultCheck,
  capacity: number,
  repair: boolean,
): Promise<TrialResult[]> {
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[];
    throw error;
  });
  const files = names.filter((name) => !TEMP.test(name));
  // Counted before anything is read: a folder of 100,000 entries is refused at once.
  if (files.length > capacity || names.length > capacity + MAX_TEMPS)
    throw new ConfigError(
      `${dir} has ${names.length} entries, more than the ${capacity} trial(s) of ${check.what}: not written by this harness`,
      [],
      { hint: 'start a new eval with another --out' },
    );
  // A temp file is a write that never finished (its process died): only the holder clears them.
  if (repair)
    for (const name of names.filter((n) => TEMP.test(n)))
      await rm(path.join(dir, name), { force: true }).catch(() => undefined);
  const problems: string[] = [];
  const results: TrialResult[] = [];
  for (const name of files.sort()) {
    const file = path.join(dir, name);
    const st = await lstat(file);
    if (!st.isFile()) {
      problems.push(`${file}: not a regular file`);
      continue;
    }
    if (st.size > MAX_RESULT_BYTES) {
      problems.push(`${file}: over ${MAX_RESULT_BYTES} bytes`);
      continue;
    }
    let json: unknown;
    try {
      json = JSON.parse(await readFile(file, 'utf8'));
    } catch {
      problems.push(`${file}: not JSON`);
      continue;
    }
    const checked = checkResult(json, check);
    if (typeof checked === 'string') problems.push(`${file}: ${checked}`);
    else if (trialFileName(checked) !== name)
      problems.push(
        `${file}: holds trial ${checked.taskId}#${checked.trial}, whose file is ${trialFileName(checked)}`,
      );
    else results.push(checked);
  }
  if (problems.length > 0)
    throw new ConfigError(`${dir} is damaged (${problems.length} bad file(s))`, problems, {
      hint: 'remove the bad files to run those trials again, or start a new eval with another --out',
    });
  return latestPerTrial(results);
}
