/**
 * Reading a file of the host repo without ever following a link: every folder on the way
 * and the file itself are checked with lstat, and the file is opened with O_NOFOLLOW. A
 * path that goes through a link is simply not read (undefined): the repo may hold links
 * that point anywhere on the host.
 */
import { constants } from 'node:fs';
import { lstat, open } from 'node:fs/promises';
import { join } from 'node:path';

export async function readRepoFileNoFollow(
  root: string,
  relative: string,
  maxBytes = 64 * 1024 * 1024,
): Promise<{ content: Buffer; mode: number } | undefined> {
  const parts = relative.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..')) return undefined;
  let current = root;
  for (const part of parts.slice(0, -1)) {
    current = join(current, part);
    const stat = await lstat(current).catch(() => undefined);
    if (!stat?.isDirectory()) return undefined;
  }
  const file = join(root, ...parts);
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile() || stat.size > maxBytes) return undefined;
    return { content: await handle.readFile(), mode: stat.mode & 0o777 };
  } finally {
    await handle.close();
  }
}
