/** The lock that keeps two processes from bootstrapping the same base image at once. */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { ImageError } from '../errors.js';
import { cacheDir } from './cache-dir.js';

/**
 * One process at a time bootstraps a base image: two would both spend minutes on the same
 * result. proper-lockfile's lock is a folder made atomically and kept fresh by its owner, so
 * a waiter never reads a half-written owner and a lock whose owner died goes stale and is
 * taken over (our own pid-file lock had both races).
 */
export async function withFileLock<T>(
  name: string,
  say: (line: string) => void,
  fn: () => Promise<T>,
  options: { staleMs?: number; dir?: string; /** Said once while waiting. */ waiting?: string } = {},
): Promise<T> {
  const dir = options.dir ?? join(cacheDir(), 'locks');
  await mkdir(dir, { recursive: true });
  const path = join(dir, name);
  const started = Date.now();
  let announced = false;
  let release: () => Promise<void>;
  for (;;) {
    try {
      const stale = options.staleMs ?? 15_000;
      release = await lockfile.lock(path, {
        realpath: false,
        stale,
        update: Math.floor(stale / 3),
        retries: 0,
      });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error;
      if (Date.now() - started > 30 * 60_000) {
        throw new ImageError(`waited 30 minutes for another process to finish building ${name}`, {
          hint: `If no such build is running, remove ${path}.lock.`,
        });
      }
      if (!announced) {
        say(options.waiting ?? `waiting for another process, which is building the same base image`);
        announced = true;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await fn();
  } finally {
    await release().catch(() => undefined);
  }
}
