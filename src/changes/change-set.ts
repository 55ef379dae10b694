/**
 * What the agent changed, as facts the host can check: the daemon says which paths changed,
 * the archive export gives their bytes (refusing anything that is not plain data), and the
 * pristine source says what they were. The gate then accepts the set as a whole or not at all.
 */
import picomatch from 'picomatch';
import type { ChangeKind, Sandbox } from '../sandbox/types.js';
import { pathProblem, type Allowlist } from './allowlist.js';

export interface PristineFile {
  content: Buffer;
  mode: number;
}

/** The content the sandbox was built from (the host repo as it was, or the image's build context). */
export interface PristineSource {
  read(path: string): Promise<PristineFile | undefined>;
}

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

export interface ChangeEntry {
  path: string;
  /**
   * Relative to the pristine source, not to the daemon: a file the image build created and
   * the agent edited is `added` for the host repo.
   */
  kind: ChangeKind;
  content?: Buffer;
  /** Permission bits as exported, special bits included. */
  mode?: number;
  oldContent?: Buffer;
  oldMode?: number;
  /** Contains a NUL byte (new or old content). */
  binary: boolean;
  /** The executable bit differs from the pristine file; for an added file, it is executable at all. */
  modeChanged: boolean;
  /** Set when the export refused the path (symlink, hard link, fifo, device, over the size cap, gone). */
  refused?: string;
  allowed: boolean;
  /** Why the allowlist refused the path. */
  reason?: string;
}

export interface ChangeSet {
  /** Sorted by path. */
  entries: ChangeEntry[];
  /** Paths dropped by `ignoreChanges`. */
  ignored: string[];
  /** Paths the daemon reported whose content and mode equal the pristine file. */
  unchanged: string[];
  /** The editable globs, so a rejection can say what the agent may change. */
  editable: readonly string[];
  limits: ChangeLimits;
}

export interface CollectOptions {
  allowlist: Allowlist;
  /** Globs whose changes are dropped (build caches); the catalog's `agent.ignoreChanges`. */
  ignore: readonly string[];
  pristine: PristineSource;
  limits?: ChangeLimits;
}

export async function collectChangeSet(sandbox: Sandbox, options: CollectOptions): Promise<ChangeSet> {
  const limits = { ...DEFAULT_CHANGE_LIMITS, ...options.limits };
  const isIgnored = options.ignore.length === 0 ? () => false : picomatch([...options.ignore], { dot: true });

  const reported = new Map<string, ChangeKind>();
  const ignored: string[] = [];
  for (const change of await sandbox.changes()) {
    // A malformed path is never silently ignored: it must reach the gate and be refused.
    if (pathProblem(change.path) === undefined && isIgnored(change.path)) ignored.push(change.path);
    else reported.set(change.path, change.kind);
  }

  const toExport = [...reported].filter(([, kind]) => kind !== 'deleted').map(([path]) => path);
  const exported =
    toExport.length === 0
      ? { files: [], directories: [], refused: [] }
      : await sandbox.exportFiles(toExport, {
          maxFileBytes: limits.maxFileBytes,
          maxTotalBytes: limits.maxTotalBytes,
        });
  // Only answers for paths we asked about count; an archive may carry more than was asked.
  const files = new Map(exported.files.filter((f) => reported.has(f.path)).map((f) => [f.path, f]));
  const refusals = new Map(
    exported.refused.filter((r) => reported.has(r.path)).map((r) => [r.path, r.reason]),
  );
  const directories = new Set(exported.directories);

  const entries: ChangeEntry[] = [];
  const unchanged: string[] = [];
  for (const [path, daemonKind] of reported) {
    // Folders change whenever a file in them does; their files are reported on their own.
    if (daemonKind !== 'deleted' && directories.has(path) && !files.has(path)) continue;

    const old = await options.pristine.read(path);
    if (daemonKind === 'deleted') {
      entries.push({
        path,
        kind: 'deleted',
        ...(old ? { oldContent: old.content, oldMode: old.mode } : {}),
        binary: old ? isBinary(old.content) : false,
        modeChanged: false,
        allowed: false,
      });
      continue;
    }

    const file = files.get(path);
    const kind: ChangeKind = old ? 'modified' : 'added';
    if (!file) {
      entries.push({
        path,
        kind,
        ...(old ? { oldContent: old.content, oldMode: old.mode } : {}),
        binary: false,
        modeChanged: false,
        refused: refusals.get(path) ?? 'the sandbox did not return this file',
        allowed: false,
      });
      continue;
    }
    // Compared as the host would write them: 0664 on the host and 0644 in the image is no change.
    if (old && old.content.equals(file.content) && hostMode(old.mode) === hostMode(file.mode)) {
      unchanged.push(path);
      continue;
    }
    entries.push({
      path,
      kind,
      content: file.content,
      mode: file.mode,
      ...(old ? { oldContent: old.content, oldMode: old.mode } : {}),
      binary: isBinary(file.content) || (old !== undefined && isBinary(old.content)),
      modeChanged: old ? isExecutable(old.mode) !== isExecutable(file.mode) : isExecutable(file.mode),
      allowed: false,
    });
  }

  entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const classes = options.allowlist.classify(entries.map((e) => e.path));
  for (const entry of entries) {
    const verdict = classes.get(entry.path);
    entry.allowed = verdict?.allowed ?? false;
    if (verdict?.reason !== undefined) entry.reason = verdict.reason;
  }
  return {
    entries,
    ignored: ignored.sort(),
    unchanged: unchanged.sort(),
    editable: options.allowlist.editable,
    limits,
  };
}

export interface Offence {
  path: string;
  why: string;
}

export type GateResult = { ok: true } | { ok: false; reason: string; offending: Offence[] };

/** Accepts the change set as a whole, or rejects it with a reason written for the model. */
export function gateChangeSet(changeSet: ChangeSet): GateResult {
  const limits = { ...DEFAULT_CHANGE_LIMITS, ...changeSet.limits };
  const binaryAllowed = limits.binaryAllowed?.length
    ? picomatch([...limits.binaryAllowed], { dot: true })
    : () => false;
  const offending: Offence[] = [];
  let total = 0;

  for (const entry of changeSet.entries) {
    const whys: string[] = [];
    if (!entry.allowed) whys.push(entry.reason ?? 'is not in the editable files');
    if (entry.kind === 'deleted') whys.push('was deleted; deleting (or renaming) files is not allowed');
    if (entry.refused !== undefined) whys.push(refusalWhy(entry.refused));
    if (entry.mode !== undefined && (entry.mode & 0o7000) !== 0) {
      whys.push(`has a setuid, setgid or sticky bit (mode ${octal(entry.mode)})`);
    }
    if (entry.modeChanged) {
      whys.push(
        entry.kind === 'added'
          ? 'is a new executable file; new files must not be executable'
          : `changed its executable bit (${octal(entry.oldMode ?? 0)} to ${octal(entry.mode ?? 0)}); keep file modes as they were`,
      );
    }
    if (entry.content && entry.binary && !binaryAllowed(entry.path)) {
      whys.push('is a binary file (contains NUL bytes); only text files may be changed here');
    }
    if (entry.content && entry.content.length > limits.maxFileBytes) {
      whys.push(`is ${entry.content.length} bytes, over the ${limits.maxFileBytes}-byte limit for one file`);
    }
    total += entry.content?.length ?? 0;
    for (const why of whys) offending.push({ path: entry.path, why });
  }

  if (total > limits.maxTotalBytes) {
    offending.push({
      path: '(all files)',
      why: `${total} bytes changed, over the ${limits.maxTotalBytes}-byte limit`,
    });
  }
  if (changeSet.entries.length > limits.maxFiles) {
    offending.push({
      path: '(all files)',
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
  return [
    `Your changes were rejected as a whole: ${noun} the rules for changes.`,
    ...offending.map((o) => `- ${o.path} ${o.why}`),
    `Files you may change (globs): ${editable}.`,
    'Only edit existing or new text files that match these globs; do not delete, rename, or change file modes. Then try again.',
  ].join('\n');
}

// The export only gives a free-text reason; say what the model can do about each kind.
function refusalWhy(refused: string): string {
  if (/link|fifo|pipe|device|socket|regular file|directory/i.test(refused)) {
    return `is not a regular file (${refused}); symlinks, hard links, fifos and devices are refused`;
  }
  if (/cap|limit|too large|bytes/i.test(refused)) return `is too large (${refused})`;
  return `could not be read back from the sandbox (${refused})`;
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

function hostMode(mode: number): number {
  return normalisedMode(mode) | (mode & 0o7000);
}

function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8)}`;
}
