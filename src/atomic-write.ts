/**
 * The one way the harness writes its own files (run records, reports, cassettes, locks):
 * a temp file created exclusively next to the target (never through an existing entry),
 * written, fsynced, then renamed over the target. A reader sees the old file or the whole
 * new one; a crash leaves at most a `.tmp` file; a symlink at the target is replaced, not
 * followed. (Writing into the user's repo is `changes/apply-change-set.ts`, with its own checks.)
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export async function writeFileAtomic(file: string, content: string | Buffer): Promise<void> {
  const dir = dirname(file);
  await mkdir(dir, { recursive: true });
  const temp = join(dir, `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const handle = await open(temp, 'wx', 0o644);
    try {
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}
