/**
 * Turns the in-sandbox scan (entries whose inode changed since the start marker, plus the
 * children of changed folders) into changes against the host's copy of the pristine tree.
 * The scan is a hint from the sandbox; this side only interprets it, never trusts it for
 * bytes (those are exported and re-hashed on the host).
 */
import { posix } from 'node:path';
import type { ChangeScan, EntryType, PathChange, TreeEntry, WorkspaceTree } from '../types.js';

export interface ScanRecord {
  path: string;
  type: EntryType;
  mode: number;
  links: number;
  size: number;
}

export interface ParsedScan {
  records: ScanRecord[];
  /** Folder ('' for the workspace) -> names of the children it has now. */
  children: Map<string, Set<string>>;
}

const TYPE_LETTERS: Record<string, EntryType> = { f: 'file', d: 'directory', l: 'symlink' };

export function parseScan(output: Buffer): ParsedScan {
  const records: ScanRecord[] = [];
  const children = new Map<string, Set<string>>();
  for (const raw of output.toString('utf8').split('\0')) {
    if (raw.startsWith('C\t')) {
      // The path is the last field and may itself contain tabs.
      const parts = raw.split('\t');
      if (parts.length < 6) continue;
      const [, letter, mode, links, size] = parts;
      records.push({
        path: parts.slice(5).join('\t'),
        type: TYPE_LETTERS[letter ?? ''] ?? 'other',
        mode: Number.parseInt(mode ?? '0', 8) & 0o7777,
        links: Number(links),
        size: Number(size),
      });
    } else if (raw.startsWith('E\t./')) {
      const full = raw.slice(4);
      const parent = posix.dirname(full);
      const key = parent === '.' ? '' : parent;
      let set = children.get(key);
      if (!set) children.set(key, (set = new Set()));
      set.add(posix.basename(full));
    }
  }
  return { records, children };
}

const childIndex = new WeakMap<WorkspaceTree, Map<string, string[]>>();

/** Folder -> the names of its children in the tree, built once per tree. */
function childrenOf(tree: WorkspaceTree): Map<string, string[]> {
  let index = childIndex.get(tree);
  if (index) return index;
  index = new Map();
  for (const path of tree.keys()) {
    const parent = posix.dirname(path);
    const key = parent === '.' ? '' : parent;
    let list = index.get(key);
    if (!list) index.set(key, (list = []));
    list.push(posix.basename(path));
  }
  childIndex.set(tree, index);
  return index;
}

function join(parent: string, name: string): string {
  return parent === '' ? name : `${parent}/${name}`;
}

/**
 * Changes relative to `tree` (the pristine workspace, without the paths hidden from this
 * sandbox). `maxEntries`: more scan records than this make the result incomplete.
 */
export function changesFromScan(
  scan: ParsedScan,
  tree: WorkspaceTree,
  maxEntries: number,
  hidden: ReadonlySet<string> = new Set(),
): ChangeScan {
  const complete = scan.records.length <= maxEntries;
  const records = complete ? scan.records : scan.records.slice(0, maxEntries);
  const pristine = (path: string): TreeEntry | undefined =>
    hidden.has(path) || isUnder(path, hidden) ? undefined : tree.get(path);
  const out = new Map<string, PathChange>();
  const deleteBelow = (folder: string) => {
    for (const name of childrenOf(tree).get(folder) ?? []) {
      const path = join(folder, name);
      if (!pristine(path) || out.has(path)) continue;
      out.set(path, { path, kind: 'deleted' });
      if (tree.get(path)?.type === 'directory') deleteBelow(path);
    }
  };

  for (const record of records) {
    if (record.path === '') continue;
    const before = pristine(record.path);
    const now = { type: record.type, mode: record.mode, size: record.size, links: record.links };
    if (!before) {
      out.set(record.path, { path: record.path, kind: 'added', ...now });
      continue;
    }
    if (before.type !== record.type) {
      out.set(record.path, { path: record.path, kind: 'modified', ...now });
      // A folder that became something else took its whole pristine content with it.
      if (before.type === 'directory') deleteBelow(record.path);
      continue;
    }
    // A folder's inode changes whenever an entry in it does; that alone is no change of its own.
    if (record.type === 'directory' && before.mode === record.mode) continue;
    out.set(record.path, { path: record.path, kind: 'modified', ...now });
  }

  if (complete) {
    // A changed folder with no children left lists none: it still counts, as empty.
    const folders = new Map(scan.children);
    for (const record of records) {
      if (record.type === 'directory' && !folders.has(record.path)) folders.set(record.path, new Set());
    }
    for (const [folder, names] of folders) {
      if (folder !== '' && pristine(folder)?.type !== 'directory') continue;
      for (const name of childrenOf(tree).get(folder) ?? []) {
        const path = join(folder, name);
        if (names.has(name) || out.has(path) || !pristine(path)) continue;
        out.set(path, { path, kind: 'deleted' });
        if (tree.get(path)?.type === 'directory') deleteBelow(path);
      }
    }
  }
  const changes = [...out.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { changes, complete };
}

function isUnder(path: string, folders: ReadonlySet<string>): boolean {
  if (folders.size === 0) return false;
  let parent = posix.dirname(path);
  while (parent !== '.' && parent !== '/') {
    if (folders.has(parent)) return true;
    parent = posix.dirname(parent);
  }
  return false;
}
