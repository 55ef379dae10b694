/**
 * The change list of a sandbox on a local overlay2 engine, and the changed files' bytes,
 * read from the host without an exec: the container's writable layer (its overlay "upper" folder) holds exactly the paths
 * that were written, so walking it costs what the change costs, not what the image holds.
 * Every path found there is looked up in the container's merged view for what it is now,
 * and every folder found there is listed in the merged view for what it holds now (which
 * shows deletions, whiteouts and replaced folders alike). The result has the shape of the
 * in-sandbox scan and is interpreted by the same code (`changesFromScan`).
 *
 * Like the in-sandbox scan it is only a hint: every byte that leaves the sandbox is exported
 * and re-hashed, and the verification sandbox is checked to hold exactly the allowed change.
 * But it is a walk of folders a sandbox process may be changing while the host reads them,
 * so no path below the layer roots is ever resolved by name: each folder is opened with
 * O_NOFOLLOW relative to its parent's descriptor (through /proc/self/fd, Node's openat), and a
 * folder swapped for a link to the host's files is refused by the kernel, not followed.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, open, readdir, type FileHandle } from 'node:fs/promises';
import { posix } from 'node:path';
import pLimit from 'p-limit';
import type { EntryType, ExportedFile, ExportRefusal, ExportResult } from '../types.js';
import { decodeName, unreadableRecord, type ParsedScan } from '../posix/scan.js';

export interface OverlayLayers {
  /** The container's writable layer on this host. */
  upperDir: string;
  /** The container's root as its processes see it (mounted while it runs). */
  mergedDir: string;
}

const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** Where an open folder can be named without resolving any path by name again. */
const fdPath = (handle: FileHandle, name?: string) =>
  name === undefined ? `/proc/self/fd/${handle.fd}` : `/proc/self/fd/${handle.fd}/${name}`;

/** A child folder of an open folder, opened without following a link; undefined if not a folder now. */
async function openChild(parent: FileHandle, name: string): Promise<FileHandle | undefined> {
  try {
    return await open(fdPath(parent, name), DIRECTORY_FLAGS);
  } catch {
    return undefined;
  }
}

function typeOf(stats: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): EntryType {
  if (stats.isFile()) return 'file';
  if (stats.isDirectory()) return 'directory';
  if (stats.isSymbolicLink()) return 'symlink';
  return 'other';
}

/**
 * Reads what `marker` holds in the writable layer, if `layers` really are this host's
 * folders of the container that was given that marker: the proof that the engine's paths
 * name this container here (an engine elsewhere names paths of its own machine).
 */
export async function layerMarker(layers: OverlayLayers, markerPath: string): Promise<string | undefined> {
  let root: FileHandle | undefined;
  const handles: FileHandle[] = [];
  try {
    root = await open(layers.upperDir, DIRECTORY_FLAGS);
    let folder = root;
    const parts = markerPath.split('/').filter(Boolean);
    for (const part of parts.slice(0, -1)) {
      const next = await openChild(folder, part);
      if (!next) return undefined;
      handles.push(next);
      folder = next;
    }
    const file = await open(fdPath(folder, parts.at(-1)!), constants.O_RDONLY | constants.O_NOFOLLOW);
    handles.push(file);
    const buffer = Buffer.alloc(128);
    const { bytesRead } = await file.read(buffer, 0, buffer.length, 0);
    return buffer.subarray(0, bytesRead).toString('utf8');
  } catch {
    return undefined;
  } finally {
    await Promise.all([root, ...handles].map((h) => h?.close().catch(() => undefined)));
  }
}

/**
 * The changed entries under `folder` (e.g. `workspace`) as scan records, and the children of
 * every folder that holds a change. At most `maxRecords` records; the caller treats that many
 * as an incomplete scan. Undefined when the layers cannot be read (not mounted, no access).
 */
export async function scanOverlay(
  layers: OverlayLayers,
  folder: string,
  maxRecords: number,
): Promise<ParsedScan | undefined> {
  let upperRoot: FileHandle | undefined;
  let mergedRoot: FileHandle | undefined;
  try {
    upperRoot = await open(layers.upperDir, DIRECTORY_FLAGS);
    mergedRoot = await open(layers.mergedDir, DIRECTORY_FLAGS);
  } catch {
    await upperRoot?.close().catch(() => undefined);
    return undefined;
  }
  const scan: ParsedScan = { records: [], children: new Map() };
  try {
    // Not mounted: the container is not running, and the caller's own way says so.
    const merged = await openChild(mergedRoot, folder);
    if (!merged) return undefined;
    const upper = await openChild(upperRoot, folder);
    if (!upper) {
      // Nothing was ever written there: no change at all.
      await merged.close();
      return scan;
    }
    await walk(upper, merged, '', scan, maxRecords);
    return scan;
  } finally {
    await upperRoot.close().catch(() => undefined);
    await mergedRoot.close().catch(() => undefined);
  }
}

/** Takes ownership of both handles and closes them. */
async function walk(
  upper: FileHandle,
  merged: FileHandle,
  rel: string,
  scan: ParsedScan,
  maxRecords: number,
): Promise<void> {
  try {
    // Names as bytes: one that is not UTF-8 cannot be looked up by a string, and must not
    // read as a deletion (it would leave the change set, and its bytes every limit).
    const [written, present] = await Promise.all([
      readdir(fdPath(upper), { encoding: 'buffer' }),
      readdir(fdPath(merged), { encoding: 'buffer' }),
    ]);
    scan.children.set(rel, new Set(present.map((raw) => raw.toString('utf8'))));
    for (const raw of written) {
      if (scan.records.length > maxRecords) return;
      const name = decodeName(raw);
      if (name === undefined) {
        scan.records.push(unreadableRecord(rel, raw, 'a name that is not valid UTF-8'));
        continue;
      }
      let stats;
      try {
        stats = await lstat(fdPath(merged, name));
      } catch (error) {
        // A whiteout (a deletion) has no merged counterpart; the folder's listing shows it.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        // Anything else the walk cannot look at is refused, never skipped.
        const code = (error as NodeJS.ErrnoException).code ?? 'error';
        scan.records.push(unreadableRecord(rel, raw, `an entry that could not be looked up (${code})`));
        continue;
      }
      const path = rel === '' ? name : `${rel}/${name}`;
      scan.records.push({
        path,
        type: typeOf(stats),
        mode: stats.mode & 0o7777,
        links: stats.nlink,
        size: stats.size,
      });
      if (!stats.isDirectory()) continue;
      const upperChild = await openChild(upper, name);
      if (!upperChild) continue;
      const mergedChild = await openChild(merged, name);
      if (!mergedChild) {
        await upperChild.close();
        continue;
      }
      await walk(upperChild, mergedChild, path, scan, maxRecords);
    }
  } finally {
    await upper.close().catch(() => undefined);
    await merged.close().catch(() => undefined);
  }
}

/**
 * Reads `paths` (relative to `folder`) from the container's merged view, with the refusals of
 * the in-sandbox export: only regular files with one link, within the caps. Each folder on
 * the way is opened without following a link and the file itself with O_NOFOLLOW, so a path
 * through a link is refused (the in-sandbox export would follow a linked folder; the change
 * set already refuses such paths). Undefined when the view cannot be read (not running, no
 * access): the caller then exports from inside the sandbox.
 */
export async function exportOverlay(
  layers: OverlayLayers,
  folder: string,
  paths: readonly string[],
  caps: { maxFileBytes: number; maxTotalBytes: number },
): Promise<ExportResult | undefined> {
  // Every folder stays open for the export; past this many the process's descriptors could
  // run out, and a file that could not be opened must never read as one that is missing.
  if (new Set(paths.map((p) => posix.dirname(p))).size > MAX_EXPORT_FOLDERS) return undefined;
  let mergedRoot: FileHandle | undefined;
  let base: FileHandle | undefined;
  try {
    mergedRoot = await open(layers.mergedDir, DIRECTORY_FLAGS);
    base = await openChild(mergedRoot, folder);
  } catch {
    // Reported below as not readable.
  } finally {
    await mergedRoot?.close().catch(() => undefined);
  }
  if (!base) return undefined;
  const folders = new Folders(base);
  const limit = pLimit(16);
  try {
    // Looked at and read a few at a time; the total cap is applied in the order asked, as
    // the archive of the in-sandbox export would.
    const looked = await Promise.all(paths.map((path) => limit(() => look(folders, path, caps))));
    let planned = 0;
    const wanted = looked.map((found) => {
      if ('kind' in found) return found;
      if (planned + found.stats.size > caps.maxTotalBytes) return overTotal(caps);
      planned += found.stats.size;
      return found;
    });
    const read = await Promise.all(
      wanted.map((found) => ('kind' in found ? found : limit(() => readFound(found, caps)))),
    );
    const result: ExportResult = { files: [], refused: [] };
    let total = 0;
    read.forEach((outcome, i) => {
      const path = paths[i]!;
      if ('kind' in outcome) result.refused.push({ path, ...outcome });
      // A file that grew between the look and the read may still pass the total.
      else if (total + outcome.content.length > caps.maxTotalBytes)
        result.refused.push({ path, ...overTotal(caps) });
      else {
        total += outcome.content.length;
        result.files.push({ path, ...outcome });
      }
    });
    return result;
  } finally {
    await folders.close();
  }
}

const MAX_EXPORT_FOLDERS = 256;

type Refusal = Omit<ExportRefusal, 'path'>;

const overTotal = (caps: { maxTotalBytes: number }): Refusal => ({
  kind: 'over-total',
  reason: `reading it would pass the ${caps.maxTotalBytes}-byte total cap`,
});

/** Folders below the export's root, each opened once per export, by path. */
class Folders {
  private readonly open = new Map<string, Promise<FileHandle | Refusal>>();

  constructor(private readonly base: FileHandle) {}

  get(rel: string): Promise<FileHandle | Refusal> {
    if (rel === '') return Promise.resolve(this.base);
    let pending = this.open.get(rel);
    if (!pending) {
      pending = this.openFolder(rel);
      this.open.set(rel, pending);
    }
    return pending;
  }

  private async openFolder(rel: string): Promise<FileHandle | Refusal> {
    const cut = rel.lastIndexOf('/');
    const parent = await this.get(cut < 0 ? '' : rel.slice(0, cut));
    if ('kind' in parent) return parent;
    const name = rel.slice(cut + 1);
    const next = await openChild(parent, name);
    if (next) return next;
    const what = await lstat(fdPath(parent, name)).catch(() => undefined);
    if (!what) return { kind: 'missing', reason: 'no longer exists' };
    if (what.isSymbolicLink()) return { kind: 'symlink', reason: `reached through a symbolic link (${rel})` };
    return { kind: 'missing', reason: `no longer exists (${rel} is not a folder)` };
  }

  async close(): Promise<void> {
    const handles = await Promise.all(this.open.values());
    await Promise.all(
      [this.base, ...handles].map((h) => ('kind' in h ? undefined : h.close().catch(() => undefined))),
    );
  }
}

interface Found {
  folder: FileHandle;
  name: string;
  stats: Stats;
}

async function look(
  folders: Folders,
  path: string,
  caps: { maxFileBytes: number; maxTotalBytes: number },
): Promise<Found | Refusal> {
  const cut = path.lastIndexOf('/');
  const folder = await folders.get(cut < 0 ? '' : path.slice(0, cut));
  if ('kind' in folder) return folder;
  const name = path.slice(cut + 1);
  const stats = await lstat(fdPath(folder, name)).catch(() => undefined);
  if (!stats) return { kind: 'missing', reason: 'no longer exists' };
  return refusalOf(stats, caps) ?? { folder, name, stats };
}

async function readFound(
  found: Found,
  caps: { maxFileBytes: number },
): Promise<Omit<ExportedFile, 'path'> | Refusal> {
  let file: FileHandle | undefined;
  try {
    // Opened without following a link and without blocking on a fifo swapped in meanwhile;
    // what was opened is checked again, since the sandbox may be changing it.
    file = await open(
      fdPath(found.folder, found.name),
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    );
    const now = await file.stat();
    if (now.ino !== found.stats.ino || now.dev !== found.stats.dev)
      return { kind: 'missing', reason: 'replaced while it was read' };
    const again = refusalOf(now, caps);
    if (again) return again;
    const buffer = Buffer.alloc(Math.min(now.size, caps.maxFileBytes) + 1);
    let got = 0;
    while (got < buffer.length) {
      const { bytesRead } = await file.read(buffer, got, buffer.length - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    if (got > caps.maxFileBytes)
      return { kind: 'too-large', reason: `more than the ${caps.maxFileBytes}-byte per-file cap` };
    return { content: buffer.subarray(0, got), mode: now.mode & 0o7777 };
  } catch (error) {
    return {
      kind: 'missing',
      reason: `could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    };
  } finally {
    await file?.close().catch(() => undefined);
  }
}

function refusalOf(stats: Stats, caps: { maxFileBytes: number }): Refusal | undefined {
  if (stats.isSymbolicLink()) return { kind: 'symlink', reason: 'a symbolic link is not a regular file' };
  if (stats.isDirectory()) return { kind: 'directory', reason: 'a folder, not a file' };
  if (!stats.isFile())
    return { kind: 'special-file', reason: 'not a regular file (a fifo, socket or device)' };
  if (stats.nlink > 1)
    return { kind: 'hard-link', reason: 'a hard link (it shares its data with another file)' };
  if (stats.size > caps.maxFileBytes)
    return {
      kind: 'too-large',
      reason: `${stats.size} bytes is over the ${caps.maxFileBytes}-byte per-file cap`,
    };
  return undefined;
}

/**
 * Bytes in a container's writable layer on this host, counted as the engine counts `SizeRw`:
 * the size of everything but folders, a file with several names once. For the disk watchdog,
 * which asks every second: the engine's own answer costs a round trip, and on Podman a walk of
 * the container's whole root file system, image included (with a dozen sandboxes alive every
 * other call to the service waited seconds). Folders are opened as the scan opens them, never
 * through a link. Undefined when the layer cannot be read here.
 */
export async function upperDirBytes(upperDir: string): Promise<number | undefined> {
  let root: FileHandle;
  try {
    root = await open(upperDir, DIRECTORY_FLAGS);
  } catch {
    return undefined;
  }
  const counted = new Set<number>();
  let total = 0;
  /** Takes ownership of the handle and closes it. */
  const visit = async (folder: FileHandle): Promise<void> => {
    try {
      // Names as bytes: one that is not UTF-8 still names its file.
      const entries = await readdir(fdPath(folder), { withFileTypes: true, encoding: 'buffer' });
      for (const entry of entries) {
        const path = Buffer.concat([Buffer.from(`${fdPath(folder)}/`), entry.name]);
        if (entry.isDirectory()) {
          const child = await open(path, DIRECTORY_FLAGS).catch(() => undefined);
          if (child) await visit(child);
          continue;
        }
        // Gone since the listing (the sandbox runs on): not there to count.
        const stats = await lstat(path).catch(() => undefined);
        if (!stats || stats.size === 0 || counted.has(stats.ino)) continue;
        counted.add(stats.ino);
        total += stats.size;
      }
    } finally {
      await folder.close().catch(() => undefined);
    }
  };
  try {
    await visit(root);
  } catch {
    return undefined;
  }
  return total;
}
