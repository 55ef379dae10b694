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
  /** Why the entry could not be named or looked up (see `PathChange.unreadable`). */
  unreadable?: string;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A name as bytes, printable ASCII kept and everything else as `\xNN`: for a reason, never for a path to open. */
export function escapeRawName(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) {
    out +=
      byte >= 0x20 && byte < 0x7f && byte !== 0x5c
        ? String.fromCharCode(byte)
        : `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return out;
}

/** The name as UTF-8, or undefined when its bytes are not valid UTF-8. */
export function decodeName(bytes: Uint8Array): string | undefined {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** The record of an entry that cannot be named: refused by the change set, with the raw name escaped. */
export function unreadableRecord(parent: string, raw: Uint8Array, why: string): ScanRecord {
  const escaped = escapeRawName(raw);
  return {
    path: parent === '' ? escaped : `${parent}/${escaped}`,
    type: 'other',
    mode: 0,
    links: 1,
    size: 0,
    unreadable: `${why}: ${JSON.stringify(parent === '' ? escaped : `${parent}/${escaped}`)}`,
  };
}

export interface ParsedScan {
  records: ScanRecord[];
  /** Folder ('' for the workspace) -> names of the children it has now. */
  children: Map<string, Set<string>>;
}

const TYPE_LETTERS: Record<string, EntryType> = { f: 'file', d: 'directory', l: 'symlink' };

function splitNul(output: Buffer): Buffer[] {
  const parts: Buffer[] = [];
  let start = 0;
  for (;;) {
    const end = output.indexOf(0, start);
    if (end < 0) {
      parts.push(output.subarray(start));
      return parts;
    }
    parts.push(output.subarray(start, end));
    start = end + 1;
  }
}

export function parseScan(output: Buffer): ParsedScan {
  const records: ScanRecord[] = [];
  const children = new Map<string, Set<string>>();
  for (const bytes of splitNul(output)) {
    const raw = decodeName(bytes);
    if (raw === undefined) {
      // A record whose bytes are not UTF-8 names a path that cannot be named: refused, never
      // read as some other path or skipped.
      if (bytes[0] === 0x43 /* C */) {
        const fields = bytes.toString('latin1').split('\t');
        const path = Buffer.from(fields.slice(5).join('\t'), 'latin1');
        records.push(unreadableRecord('', path, 'a name that is not valid UTF-8'));
      }
      // A listing line (E) only says what a folder holds now; a new entry has its C line too.
      continue;
    }
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
    const now = {
      type: record.type,
      mode: record.mode,
      size: record.size,
      links: record.links,
      ...(record.unreadable ? { unreadable: record.unreadable } : {}),
    };
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
