/**
 * Baselines known to fail: an (image, catalog, test command) whose baseline once ran the
 * tests and found them failing. The first attempt's agent waits for the baseline's verdict
 * before its first model call, so that no money goes on a run whose test command cannot run
 * or whose tests already pass; for a key known to fail that wait buys nothing (the image is
 * the same bytes, the sandbox has no network, the command is the same), so the agent starts
 * at once and the baseline runs beside it, as it did before the wait existed. The baseline is
 * still measured every time, and its verdict still stops the attempt if it ever differs.
 *
 * Remembered on disk in the user's cache folder (one empty-ish file per key, named by its
 * hash), so a second `fix` or `eval` of the same repo state does not wait either.
 */
import { createHash } from 'node:crypto';
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../atomic-write.js';

export interface FailingBaselines {
  /** Whether the baseline of `key` ran the tests and found them failing before. */
  known(key: string): Promise<boolean>;
  /** Remembers that the baseline of `key` ran the tests and found them failing. */
  remember(key: string): Promise<void>;
}

function fileOf(dir: string, key: string): string {
  return join(dir, `${createHash('sha256').update(key).digest('hex')}.failing`);
}

/** In `dir` (created when first written); a read or write that fails means "not known". */
export function fileFailingBaselines(dir: string): FailingBaselines {
  return {
    async known(key) {
      // A regular file of ours; anything else at that name (a link, a folder) is not a verdict.
      const st = await lstat(fileOf(dir, key)).catch(() => undefined);
      return st?.isFile() === true;
    },
    async remember(key) {
      await writeFileAtomic(fileOf(dir, key), `${key}\n`).catch(() => undefined);
    },
  };
}

/** For tests and runs that must not touch the disk. */
export function memoryFailingBaselines(): FailingBaselines & { keys: Set<string> } {
  const keys = new Set<string>();
  return {
    keys,
    known: async (key) => keys.has(key),
    remember: async (key) => {
      keys.add(key);
    },
  };
}
