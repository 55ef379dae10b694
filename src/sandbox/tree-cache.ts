/**
 * Pristine workspace trees remembered on disk, by engine and image id. Reading an image's
 * tree means making a container and streaming its whole workspace through the engine (about
 * 0.2 s for a small repo, 0.4 s for one with a compiler in node_modules, over a second on a
 * loaded machine), and a process reads it once per image: every eval, every `fix`, and every
 * instance of a SWE-bench-style suite scored again (another predictions file, another seed)
 * paid it on a trial's path. An image id names the image's content, so its tree never
 * changes; the engine's name is in the key too, so one engine's word is never used for
 * another's image.
 *
 * The files are the harness's own, in the user's cache folder. Still, what is read back is
 * checked entry by entry: a file that is not a regular file, not ours, cut short or of another
 * shape is a miss (the tree is read from the engine again), never an error or a wrong tree.
 */
import { createHash } from 'node:crypto';
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { writeFileAtomic } from '../atomic-write.js';
import { readOwnFile } from '../read-own-file.js';
import type { EntryType, TreeEntry, WorkspaceTree } from './types.js';

export interface TreeCache {
  get(engine: string, imageId: string): Promise<WorkspaceTree | undefined>;
  put(engine: string, imageId: string, tree: WorkspaceTree): Promise<void>;
}

/** The format's version: a file of another is a miss. */
const VERSION = 1;
/** Trees kept; past it the least recently used go when one is written. */
export const TREE_CACHE_FILES = 256;
/** A tree with more entries is not kept (a file of tens of megabytes costs more than it saves). */
export const TREE_CACHE_MAX_ENTRIES = 300_000;
/** The largest file read back (compressed), and the most its JSON may unpack to. */
const MAX_FILE_BYTES = 64 * 1024 * 1024;
const MAX_JSON_BYTES = 256 * 1024 * 1024;

const ENTRY_TYPES: ReadonlySet<string> = new Set<EntryType>(['file', 'directory', 'symlink', 'other']);

function fileName(engine: string, imageId: string): string {
  return `${createHash('sha256').update(`${engine}\n${imageId}`).digest('hex')}.tree.json.gz`;
}

/** The entry as stored, or undefined when it is not one this module wrote. */
function entryOf(value: unknown): TreeEntry | undefined {
  if (!Array.isArray(value) || value.length < 3 || value.length > 5) return undefined;
  const [type, mode, size, sha, link] = value as unknown[];
  if (typeof type !== 'string' || !ENTRY_TYPES.has(type)) return undefined;
  if (!Number.isInteger(mode) || (mode as number) < 0 || (mode as number) > 0o7777) return undefined;
  if (!Number.isInteger(size) || (size as number) < 0) return undefined;
  if (sha !== undefined && sha !== null && !(typeof sha === 'string' && /^[0-9a-f]{64}$/.test(sha)))
    return undefined;
  if (link !== undefined && link !== null && typeof link !== 'string') return undefined;
  return {
    type: type as EntryType,
    mode: mode as number,
    size: size as number,
    ...(typeof sha === 'string' ? { sha256: sha } : {}),
    ...(typeof link === 'string' ? { linkTarget: link } : {}),
  };
}

/** A workspace path as the tree reader makes them: relative, no empty, `.` or `..` segment. */
function pathOk(path: unknown): path is string {
  return (
    typeof path === 'string' &&
    path !== '' &&
    !path.startsWith('/') &&
    !path.includes('\0') &&
    path.split('/').every((part) => part !== '' && part !== '.' && part !== '..')
  );
}

/** The tree a cache file holds, or undefined for anything else. */
export function parseTreeFile(bytes: Buffer, engine: string, imageId: string): WorkspaceTree | undefined {
  let data: unknown;
  try {
    data = JSON.parse(gunzipSync(bytes, { maxOutputLength: MAX_JSON_BYTES }).toString('utf8'));
  } catch {
    return undefined;
  }
  if (!data || typeof data !== 'object') return undefined;
  const { v, engine: e, image, entries } = data as Record<string, unknown>;
  if (v !== VERSION || e !== engine || image !== imageId || !Array.isArray(entries)) return undefined;
  const tree = new Map<string, TreeEntry>();
  for (const item of entries as unknown[]) {
    if (!Array.isArray(item) || item.length !== 2) return undefined;
    const [path, raw] = item as unknown[];
    const entry = entryOf(raw);
    if (!pathOk(path) || !entry || tree.has(path)) return undefined;
    tree.set(path, entry);
  }
  return tree;
}

export function treeFileBytes(engine: string, imageId: string, tree: WorkspaceTree): Buffer {
  const entries = [...tree].map(([path, e]) => [
    path,
    [
      e.type,
      e.mode,
      e.size,
      ...(e.sha256 || e.linkTarget ? [e.sha256 ?? null] : []),
      ...(e.linkTarget ? [e.linkTarget] : []),
    ],
  ]);
  return gzipSync(JSON.stringify({ v: VERSION, engine, image: imageId, entries }));
}

/** In `dir` (created when first written); a read or write that fails is a miss, never an error. */
export function fileTreeCache(dir: string, options: { maxFiles?: number } = {}): TreeCache {
  const maxFiles = options.maxFiles ?? TREE_CACHE_FILES;
  return {
    async get(engine, imageId) {
      const bytes = await readOwnFile(join(dir, fileName(engine, imageId)), MAX_FILE_BYTES);
      return bytes ? parseTreeFile(bytes, engine, imageId) : undefined;
    },
    async put(engine, imageId, tree) {
      if (tree.size > TREE_CACHE_MAX_ENTRIES) return;
      try {
        await writeFileAtomic(join(dir, fileName(engine, imageId)), treeFileBytes(engine, imageId, tree));
        await prune(dir, maxFiles);
      } catch {
        // Not remembered: the next process reads the tree from the engine, as before.
      }
    },
  };
}

/** Keeps the `maxFiles` most recently written trees. */
async function prune(dir: string, maxFiles: number): Promise<void> {
  const names = (await readdir(dir)).filter((n) => n.endsWith('.tree.json.gz'));
  if (names.length <= maxFiles) return;
  const dated = await Promise.all(
    names.map(async (name) => ({
      name,
      at: (await stat(join(dir, name)).catch(() => undefined))?.mtimeMs ?? 0,
    })),
  );
  dated.sort((a, b) => a.at - b.at);
  await Promise.all(
    dated.slice(0, names.length - maxFiles).map((d) => rm(join(dir, d.name), { force: true })),
  );
}
