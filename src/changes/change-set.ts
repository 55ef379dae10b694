/**
 * What the agent changed, as facts the host can check. The sandbox's scan says which paths
 * changed (a hint); limits are checked on that list before any per-file work; the files
 * that could pass are read back in one stream and re-hashed here; the pristine tree (read by
 * the engine, not by the sandbox) says what they were and what every folder on their way
 * is. The gate then accepts the set as a whole or not at all.
 */
import { posix } from 'node:path';
import picomatch from 'picomatch';
import type {
  ChangeKind,
  EntryType,
  PathChange,
  RefusalKind,
  Sandbox,
  WorkspaceTree,
} from '../sandbox/types.js';
import { pathProblem, type Allowlist, type RefusedPathKind } from './allowlist.js';
import { sha256 } from './hash.js';
import type { ChangeIgnore } from './ignore.js';
import type { PristineSource } from './pristine.js';

export interface ChangeLimits {
  /** Largest single changed file, bytes. */
  maxFileBytes?: number;
  /** All changed files together, bytes. */
  maxTotalBytes?: number;
  /** Most changed paths in one set. */
  maxFiles?: number;
  /** Globs where binary content (a NUL byte) is acceptable; default none. */
  binaryAllowed?: readonly string[];
}

export const DEFAULT_CHANGE_LIMITS: Required<Omit<ChangeLimits, 'binaryAllowed'>> = {
  maxFileBytes: 1024 * 1024,
  maxTotalBytes: 8 * 1024 * 1024,
  maxFiles: 200,
};

/** Most paths the scan lists before it gives up (the limit check needs only the count). */
const SCAN_ENTRIES = 100_000;

export interface ChangeEntry {
  path: string;
  /** Relative to the pristine tree (the image the sandbox was created from). */
  kind: ChangeKind;
  /** What is at the path now; for a deletion, what was there. */
  type: EntryType;
  content?: Buffer;
  /** Permission bits as exported, special bits included. */
  mode?: number | undefined;
  oldContent?: Buffer;
  oldMode?: number;
  /** sha256 of the pristine file, when there was one. */
  oldSha256?: string;
  /** Contains a NUL byte (new or old content). */
  binary: boolean;
  /** The executable bit differs from the pristine file; for an added file, it is executable at all. */
  modeChanged: boolean;
  /** Set when the content was not (or could not be) read back. */
  refused?: { kind: RefusalKind | 'type-changed' | 'through-link'; reason: string };
  allowed: boolean;
  /** Why the allowlist refused the path. */
  reason?: string;
  reasonKind?: RefusedPathKind;
}

export interface ChangeSet {
  /** Sorted by path. */
  entries: ChangeEntry[];
  /**
   * Paths that are not the agent's change (build and test output, git's own files; see
   * `ignore.ts`): dropped before the gate, never copied back or verified.
   */
  ignored: string[];
  /** Paths the scan reported whose content and mode equal the pristine file. */
  unchanged: string[];
  /** The editable globs, so a rejection can say what the agent may change. */
  editable: readonly string[];
  limits: ChangeLimits;
  /** Set when the set was too large to read back at all: the count (or bytes) the scan saw. */
  overLimit?: { why: string };
}

export interface CollectOptions {
  allowlist: Allowlist;
  /**
   * What is not the agent's change (`createChangeIgnore`); a list of globs is exactly
   * those globs (no defaults, no `.gitignore`).
   */
  ignore: ChangeIgnore | readonly string[];
  /** The image's pristine workspace. */
  tree: WorkspaceTree;
  pristine: PristineSource;
  limits?: ChangeLimits;
  signal?: AbortSignal;
}

const byPath = <T extends { path: string }>(a: T, b: T) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

/**
 * The type a folder on the way to `path` has now: the scan's word if it changed, else the
 * pristine tree's. A symlink (now or in the pristine tree) or a non-folder on the way means
 * the path is not where its spelling says: refused.
 */
function linkOnTheWay(
  path: string,
  changed: ReadonlyMap<string, PathChange>,
  tree: WorkspaceTree,
): string | undefined {
  const parts = path.split('/');
  for (let i = 1; i < parts.length; i++) {
    const folder = parts.slice(0, i).join('/');
    const before = tree.get(folder);
    if (before?.type === 'symlink') return `${folder} is a symlink in the pristine repo`;
    if (before && before.type !== 'directory') return `${folder} is not a folder in the pristine repo`;
    const now = changed.get(folder);
    if (now?.kind === 'deleted') return `${folder} was deleted`;
    if (now?.type !== undefined && now.type !== 'directory') {
      return `${folder} is ${now.type === 'symlink' ? 'a symlink' : 'not a folder'} in the sandbox`;
    }
  }
  return undefined;
}

export async function collectChangeSet(sandbox: Sandbox, options: CollectOptions): Promise<ChangeSet> {
  const limits = { ...DEFAULT_CHANGE_LIMITS, ...options.limits };
  const ignore = ignorePolicy(options.ignore);
  const scan = await sandbox.changes({
    maxEntries: SCAN_ENTRIES,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const base = { editable: options.allowlist.editable, limits };
  if (!scan.complete) {
    return {
      ...base,
      entries: [],
      ignored: [],
      unchanged: [],
      overLimit: {
        why: `more than ${SCAN_ENTRIES} paths changed (the limit is ${limits.maxFiles}); nothing was read back`,
      },
    };
  }

  const changed = new Map(scan.changes.map((c) => [c.path, c]));
  const ignored: string[] = [];
  const relevant: PathChange[] = [];
  for (const change of scan.changes) {
    // What cannot be named is refused wherever it is: no ignore rule can vouch for it.
    if (!change.unreadable && ignore.reason(change.path, change.type) !== undefined)
      ignored.push(change.path);
    // A new folder is implied by the files in it (and verification creates it for them).
    else if (!(change.kind === 'added' && change.type === 'directory')) relevant.push(change);
  }

  // Limits first: a change of 30,000 files is refused on its count, before one is read.
  const reportedBytes = relevant.reduce((sum, c) => sum + (c.type === 'file' ? (c.size ?? 0) : 0), 0);
  const overLimit =
    relevant.length > limits.maxFiles
      ? `${relevant.length} paths changed, over the limit of ${limits.maxFiles}; nothing was read back`
      : reportedBytes > limits.maxTotalBytes
        ? `${reportedBytes} bytes changed, over the ${limits.maxTotalBytes}-byte limit; nothing was read back`
        : undefined;

  const entries: ChangeEntry[] = relevant.map((change) => {
    const before = options.tree.get(change.path);
    const entry: ChangeEntry = {
      path: change.path,
      kind: change.kind,
      type: change.type ?? before?.type ?? 'file',
      mode: change.mode,
      ...(before?.sha256 ? { oldSha256: before.sha256 } : {}),
      ...(before && before.type === 'file' ? { oldMode: before.mode } : {}),
      binary: false,
      modeChanged: false,
      allowed: false,
    };
    const through = linkOnTheWay(change.path, changed, options.tree);
    if (change.unreadable) entry.refused = { kind: 'invalid-path', reason: change.unreadable };
    else if (through) entry.refused = { kind: 'through-link', reason: through };
    else if (change.kind === 'deleted') return entry;
    else if (before && before.type !== change.type) {
      entry.refused = {
        kind: 'type-changed',
        reason: `changed from a ${before.type} to a ${change.type ?? 'different kind of entry'}`,
      };
    } else if (change.type === 'symlink') entry.refused = { kind: 'symlink', reason: 'a symbolic link' };
    else if (change.type !== 'file') entry.refused = { kind: 'special-file', reason: `a ${change.type}` };
    else if ((change.links ?? 1) > 1) {
      entry.refused = { kind: 'hard-link', reason: 'a hard link (it shares its data with another file)' };
    } else if ((change.size ?? 0) > limits.maxFileBytes) {
      entry.refused = {
        kind: 'too-large',
        reason: `${change.size} bytes is over the ${limits.maxFileBytes}-byte limit for one file`,
      };
    }
    return entry;
  });

  const classes = options.allowlist.classify(entries.map((e) => e.path));
  for (const entry of entries) {
    const verdict = classes.get(entry.path);
    entry.allowed = verdict?.allowed ?? false;
    if (verdict?.reason !== undefined) entry.reason = verdict.reason;
    if (verdict?.kind !== undefined) entry.reasonKind = verdict.kind;
  }

  if (overLimit) {
    return {
      ...base,
      entries: entries.sort(byPath),
      ignored: ignored.sort(),
      unchanged: [],
      overLimit: { why: overLimit },
    };
  }

  const toExport = entries.filter((e) => e.refused === undefined && e.kind !== 'deleted').map((e) => e.path);
  const exported =
    toExport.length === 0
      ? { files: [], refused: [] }
      : await sandbox.exportFiles(toExport, {
          maxFileBytes: limits.maxFileBytes,
          maxTotalBytes: limits.maxTotalBytes,
          ...(options.signal ? { signal: options.signal } : {}),
        });
  // Only answers for paths that were asked about count.
  const asked = new Set(toExport);
  const files = new Map(exported.files.filter((f) => asked.has(f.path)).map((f) => [f.path, f]));
  const refusals = new Map(exported.refused.filter((r) => asked.has(r.path)).map((r) => [r.path, r]));

  const kept: ChangeEntry[] = [];
  const unchanged: string[] = [];
  for (const entry of entries) {
    if (entry.refused !== undefined || entry.kind === 'deleted') {
      kept.push(await withOldContent(entry, options.pristine));
      continue;
    }
    const file = files.get(entry.path);
    if (!file) {
      const refusal = refusals.get(entry.path);
      entry.refused = refusal
        ? { kind: refusal.kind, reason: refusal.reason }
        : { kind: 'missing', reason: 'the sandbox did not return this file' };
      kept.push(await withOldContent(entry, options.pristine));
      continue;
    }
    const before = options.tree.get(entry.path);
    // Compared as the host would write them: 0664 in one place and 0644 in another is no change.
    if (
      before?.type === 'file' &&
      before.sha256 === sha256(file.content) &&
      hostMode(before.mode) === hostMode(file.mode)
    ) {
      unchanged.push(entry.path);
      continue;
    }
    entry.content = file.content;
    entry.mode = file.mode;
    const withOld = await withOldContent(entry, options.pristine);
    withOld.binary =
      isBinary(file.content) || (withOld.oldContent !== undefined && isBinary(withOld.oldContent));
    withOld.modeChanged =
      before?.type === 'file'
        ? isExecutable(before.mode) !== isExecutable(file.mode)
        : isExecutable(file.mode);
    kept.push(withOld);
  }
  return { ...base, entries: kept.sort(byPath), ignored: ignored.sort(), unchanged: unchanged.sort() };
}

function ignorePolicy(ignore: ChangeIgnore | readonly string[]): ChangeIgnore {
  if (!Array.isArray(ignore)) return ignore as ChangeIgnore;
  const globs = ignore as readonly string[];
  const matches = globs.length === 0 ? () => false : picomatch([...globs], { dot: true });
  return {
    // A malformed path is never silently ignored: it must reach the gate and be refused.
    reason: (path) => (pathProblem(path) === undefined && matches(path) ? 'catalog' : undefined),
  };
}

async function withOldContent(entry: ChangeEntry, pristine: PristineSource): Promise<ChangeEntry> {
  if (entry.oldSha256 === undefined) return entry;
  const old = await pristine.read(entry.path);
  if (old && sha256(old.content) === entry.oldSha256) {
    entry.oldContent = old.content;
    entry.oldMode = old.mode;
    if (entry.kind === 'deleted') entry.binary = isBinary(old.content);
  }
  return entry;
}

export type OffenceKind =
  | RefusedPathKind
  | 'deleted'
  | 'not-regular-file'
  | 'type-changed'
  | 'through-link'
  | 'special-bits'
  | 'mode-changed'
  | 'binary'
  | 'too-large'
  | 'over-total'
  | 'too-many'
  | 'unreadable';

export interface Offence {
  path: string;
  kind: OffenceKind;
  why: string;
}

export type GateResult = { ok: true } | { ok: false; reason: string; offending: Offence[] };

function refusalOffence(refused: NonNullable<ChangeEntry['refused']>): { kind: OffenceKind; why: string } {
  switch (refused.kind) {
    case 'symlink':
    case 'hard-link':
    case 'special-file':
    case 'directory':
      return {
        kind: 'not-regular-file',
        why: `is not a regular file (${refused.reason}); symlinks, hard links, fifos and devices are refused`,
      };
    case 'through-link':
      return {
        kind: 'through-link',
        why: `is not where its path says (${refused.reason}); files under a symlink or a non-folder are refused`,
      };
    case 'type-changed':
      return { kind: 'type-changed', why: `${refused.reason}; only regular files may change` };
    case 'too-large':
      return { kind: 'too-large', why: `is too large (${refused.reason})` };
    case 'over-total':
      return { kind: 'over-total', why: `could not be read back within the total limit (${refused.reason})` };
    case 'missing':
    case 'invalid-path':
      return { kind: 'unreadable', why: `could not be read back from the sandbox (${refused.reason})` };
  }
}

/** Accepts the change set as a whole, or rejects it with a reason written for the model. */
export function gateChangeSet(changeSet: ChangeSet): GateResult {
  const limits = { ...DEFAULT_CHANGE_LIMITS, ...changeSet.limits };
  const binaryAllowed = limits.binaryAllowed?.length
    ? picomatch([...limits.binaryAllowed], { dot: true })
    : () => false;
  const offending: Offence[] = [];
  let total = 0;

  if (changeSet.overLimit)
    offending.push({ path: '(all files)', kind: 'too-many', why: changeSet.overLimit.why });
  // With the set over its limits, the per-path reasons would run to thousands of lines.
  const entries = changeSet.overLimit ? [] : changeSet.entries;
  for (const entry of entries) {
    const add = (kind: OffenceKind, why: string) => offending.push({ path: entry.path, kind, why });
    if (!entry.allowed)
      add(entry.reasonKind ?? 'not-editable', entry.reason ?? 'is not in the editable files');
    if (entry.kind === 'deleted') add('deleted', 'was deleted; deleting (or renaming) files is not allowed');
    if (entry.refused !== undefined) {
      const { kind, why } = refusalOffence(entry.refused);
      add(kind, why);
    }
    if (entry.mode !== undefined && (entry.mode & 0o7000) !== 0) {
      add('special-bits', `has a setuid, setgid or sticky bit (mode ${octal(entry.mode)})`);
    }
    if (entry.modeChanged) {
      add(
        'mode-changed',
        entry.kind === 'added'
          ? 'is a new executable file; new files must not be executable'
          : `changed its executable bit (${octal(entry.oldMode ?? 0)} to ${octal(entry.mode ?? 0)}); keep file modes as they were`,
      );
    }
    if (entry.content && entry.binary && !binaryAllowed(entry.path)) {
      add('binary', 'is a binary file (contains NUL bytes); only text files may be changed here');
    }
    if (entry.content && entry.content.length > limits.maxFileBytes) {
      add(
        'too-large',
        `is ${entry.content.length} bytes, over the ${limits.maxFileBytes}-byte limit for one file`,
      );
    }
    total += entry.content?.length ?? 0;
  }

  if (total > limits.maxTotalBytes) {
    offending.push({
      path: '(all files)',
      kind: 'over-total',
      why: `${total} bytes changed, over the ${limits.maxTotalBytes}-byte limit`,
    });
  }
  if (changeSet.entries.length > limits.maxFiles && !changeSet.overLimit) {
    offending.push({
      path: '(all files)',
      kind: 'too-many',
      why: `${changeSet.entries.length} files changed, over the limit of ${limits.maxFiles}`,
    });
  }

  if (offending.length === 0) return { ok: true };
  return { ok: false, reason: rejectionReason(changeSet, offending), offending };
}

function rejectionReason(changeSet: ChangeSet, offending: Offence[]): string {
  const paths = new Set(offending.map((o) => o.path));
  const noun = paths.size === 1 ? '1 path breaks' : `${paths.size} paths break`;
  const editable = changeSet.editable.length > 0 ? changeSet.editable.join(', ') : '(none)';
  const shown = offending.slice(0, 50);
  return [
    `Your changes were rejected as a whole: ${noun} the rules for changes.`,
    ...shown.map((o) => `- ${o.path} ${o.why}`),
    ...(offending.length > shown.length ? [`- ... and ${offending.length - shown.length} more`] : []),
    `Files you may change (globs): ${editable}.`,
    'Only edit existing or new text files that match these globs; do not delete, rename, link, or change file modes. Then try again.',
  ].join('\n');
}

/** The new folders a set of added files needs (those the pristine tree does not have). */
export function impliedFolders(paths: readonly string[], tree: WorkspaceTree): Set<string> {
  const out = new Set<string>();
  for (const path of paths) {
    let folder = posix.dirname(path);
    while (folder !== '.' && !tree.has(folder)) {
      out.add(folder);
      folder = posix.dirname(folder);
    }
  }
  return out;
}

export function isBinary(content: Buffer): boolean {
  return content.includes(0);
}

export function isExecutable(mode: number): boolean {
  return (mode & 0o111) !== 0;
}

/** The mode the host gets: 0755 when any executable bit is set, else 0644. */
export function normalisedMode(mode: number): number {
  return isExecutable(mode) ? 0o755 : 0o644;
}

export function hostMode(mode: number): number {
  return normalisedMode(mode) | (mode & 0o7000);
}

function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8)}`;
}
