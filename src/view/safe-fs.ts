/**
 * Reading run folders without trusting them. A run folder sits next to data a hostile agent
 * shaped, so below the folder the user named nothing is followed: every path component is
 * `lstat`ed and a symbolic link, a device or a FIFO is refused (a FIFO named
 * `test-output.txt` would otherwise hang the reader forever), the file is opened with
 * `O_NOFOLLOW | O_NONBLOCK` and must still be the same regular file, and only a bounded
 * number of bytes is read. Paths are given as components, never as strings from a record,
 * so a `..` cannot walk out of the folder.
 */
import { constants } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export type ReadResult =
  | {
      status: 'ok';
      text: string;
      /** Size of the whole file. */
      bytes: number;
      /** Bytes left out of the middle because the file was over the limit (0: whole file). */
      omitted: number;
    }
  | { status: 'missing' }
  | { status: 'refused'; reason: string };

function checkComponent(part: string): void {
  if (part === '' || part === '.' || part === '..' || part.includes('/') || part.includes('\0')) {
    throw new Error(`invalid path component ${JSON.stringify(part)}`);
  }
}

type Walk = { ok: true; path: string } | { ok: false; result: ReadResult };

/** The path of `parts` under `root` when every folder on the way is a real folder. */
async function walkFolders(root: string, parts: readonly string[]): Promise<Walk> {
  let path = root;
  for (const part of parts) {
    checkComponent(part);
    path = join(path, part);
    const stats = await lstat(path).catch(() => undefined);
    if (!stats) return { ok: false, result: { status: 'missing' } };
    if (stats.isSymbolicLink())
      return { ok: false, result: { status: 'refused', reason: `${part} is a symbolic link` } };
    if (!stats.isDirectory())
      return { ok: false, result: { status: 'refused', reason: `${part} is not a folder` } };
  }
  return { ok: true, path };
}

/**
 * The text of `root/parts...` when it is a regular file reached without links; over
 * `maxBytes`, its head and tail with a `[viewer: ...]` line where the middle was.
 */
export async function readConfined(
  root: string,
  parts: readonly string[],
  maxBytes: number,
): Promise<ReadResult> {
  const folder = await walkFolders(root, parts.slice(0, -1));
  if (!folder.ok) return folder.result;
  const last = parts[parts.length - 1];
  if (last === undefined) throw new Error('readConfined: no file name');
  checkComponent(last);
  const path = join(folder.path, last);
  const before = await lstat(path).catch(() => undefined);
  if (!before) return { status: 'missing' };
  if (before.isSymbolicLink()) return { status: 'refused', reason: 'a symbolic link' };
  if (!before.isFile()) return { status: 'refused', reason: 'not a regular file' };
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { status: 'missing' };
    if (code === 'ELOOP') return { status: 'refused', reason: 'a symbolic link' };
    return { status: 'refused', reason: `cannot be read (${code ?? 'error'})` };
  }
  try {
    const stats = await handle.stat();
    // Swapped between the lstat and the open: whatever it is now, it was not checked.
    if (!stats.isFile() || stats.ino !== before.ino || stats.dev !== before.dev) {
      return { status: 'refused', reason: 'changed while being opened' };
    }
    const size = stats.size;
    if (size <= maxBytes) {
      const buffer = Buffer.alloc(size);
      const { bytesRead } = await handle.read(buffer, 0, size, 0);
      return { status: 'ok', text: buffer.subarray(0, bytesRead).toString('utf8'), bytes: size, omitted: 0 };
    }
    const half = Math.floor(maxBytes / 2);
    const head = Buffer.alloc(half);
    const tail = Buffer.alloc(half);
    const headRead = (await handle.read(head, 0, half, 0)).bytesRead;
    const tailRead = (await handle.read(tail, 0, half, size - half)).bytesRead;
    const omitted = size - headRead - tailRead;
    const text =
      `${head.subarray(0, headRead).toString('utf8')}\n` +
      `[viewer: ${omitted} bytes of ${size} left out here; the whole file is ${parts.join('/')}]\n` +
      tail.subarray(0, tailRead).toString('utf8');
    return { status: 'ok', text, bytes: size, omitted };
  } finally {
    await handle.close();
  }
}

export type EntryKind = 'file' | 'folder' | 'link' | 'other' | 'missing';

/** What `root/parts...` is, without following a link anywhere on the way. */
export async function entryKind(root: string, parts: readonly string[]): Promise<EntryKind> {
  const folder = await walkFolders(root, parts.slice(0, -1));
  if (!folder.ok) return folder.result.status === 'missing' ? 'missing' : 'other';
  const last = parts[parts.length - 1];
  if (last === undefined) return 'folder';
  checkComponent(last);
  const stats = await lstat(join(folder.path, last)).catch(() => undefined);
  if (!stats) return 'missing';
  if (stats.isSymbolicLink()) return 'link';
  if (stats.isDirectory()) return 'folder';
  return stats.isFile() ? 'file' : 'other';
}

/** Names of the real folders (not links to folders) directly in `root/parts...`, sorted. */
export async function listFolders(root: string, parts: readonly string[]): Promise<string[]> {
  const folder = await walkFolders(root, parts);
  if (!folder.ok) return [];
  const entries = await readdir(folder.path, { withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}
