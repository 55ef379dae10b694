/**
 * Copying an accepted change set into the host repo, all or nothing. Every target is
 * checked before anything is written (content still what the sandbox started from, no
 * symlink anywhere under the repo root on the way); each file is written to a temp file in
 * its own folder, fsynced and renamed over the target; on any failure the files already
 * written are put back from in-memory backups and created folders are removed.
 */
import { randomBytes } from 'node:crypto';
import { sha256 } from './hash.js';
import * as fsp from 'node:fs/promises';
import path from 'node:path';
import { ApplyError, errorMessage } from '../errors.js';
import { pathProblem } from './allowlist.js';
import { normalisedMode, type ChangeEntry, type ChangeSet } from './change-set.js';

export interface FileInfo {
  kind: 'file' | 'directory' | 'symlink' | 'other';
  mode: number;
}

/** The filesystem operations apply needs; injectable so tests can make one of them fail. */
export interface ApplyFs {
  realpath(path: string): Promise<string>;
  /** Does not follow a final symlink; undefined when nothing is there. */
  lstat(path: string): Promise<FileInfo | undefined>;
  readFile(path: string): Promise<Buffer>;
  /** Creates `path` exclusively (never through an existing entry), writes, fsyncs, closes, with exactly `mode`. */
  writeNewFile(path: string, content: Buffer, mode: number): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  /** One level, not recursive, so every created folder is known and checked. */
  mkdir(path: string): Promise<void>;
  rmdir(path: string): Promise<void>;
  /** Makes renames in a folder durable. */
  syncDir(path: string): Promise<void>;
}

export const nodeApplyFs: ApplyFs = {
  realpath: (p) => fsp.realpath(p),
  async lstat(p) {
    try {
      const info = await fsp.lstat(p);
      const kind = info.isSymbolicLink()
        ? 'symlink'
        : info.isDirectory()
          ? 'directory'
          : info.isFile()
            ? 'file'
            : 'other';
      return { kind, mode: info.mode & 0o7777 };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  },
  readFile: (p) => fsp.readFile(p),
  async writeNewFile(p, content, mode) {
    const handle = await fsp.open(p, 'wx', mode);
    try {
      await handle.writeFile(content);
      // The umask may have narrowed the mode given to open.
      await handle.chmod(mode);
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
  rename: (from, to) => fsp.rename(from, to),
  unlink: (p) => fsp.unlink(p),
  mkdir: (p) => fsp.mkdir(p),
  rmdir: (p) => fsp.rmdir(p),
  async syncDir(p) {
    const handle = await fsp.open(p, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
};

export interface ApplyOptions {
  /**
   * For every entry, the sha256 (hex) its host file must still have, or null when it must
   * not exist: the pristine state the sandbox was built from. See `pristineHashes`.
   */
  expected: ReadonlyMap<string, string | null>;
  fs?: ApplyFs;
}

export interface ApplyResult {
  /** Repo-relative paths written, in order. */
  written: string[];
  /** Absolute folders created for them. */
  createdDirs: string[];
}

/** The expected host hashes implied by the change set's own pristine contents. */
export function pristineHashes(changeSet: Pick<ChangeSet, 'entries'>): Map<string, string | null> {
  return new Map(
    changeSet.entries.map((e) => [e.path, e.kind === 'added' || !e.oldContent ? null : sha256(e.oldContent)]),
  );
}

interface Planned {
  entry: ChangeEntry & { content: Buffer };
  target: string;
  mode: number;
}

interface Written {
  path: string;
  target: string;
  backup: { content: Buffer; mode: number } | null;
}

export async function applyChangeSet(
  repoDir: string,
  changeSet: Pick<ChangeSet, 'entries'>,
  options: ApplyOptions,
): Promise<ApplyResult> {
  const fs = options.fs ?? nodeApplyFs;
  // The repo folder itself may be reached through a symlink (a user's choice); below it, none.
  const root = await fs.realpath(repoDir).catch((error: unknown) => {
    throw new ApplyError(`the repo folder ${repoDir} cannot be opened: ${errorMessage(error)}`, {
      cause: error,
    });
  });
  if ((await fs.lstat(root))?.kind !== 'directory')
    throw new ApplyError(`the repo path ${repoDir} is not a folder`);

  const plan = planEntries(root, changeSet.entries);

  // Everything is checked before anything is written, and all problems are named at once.
  const stale: string[] = [];
  for (const item of plan) {
    const problem = await targetProblem(fs, root, item.entry.path, options.expected);
    if (problem) stale.push(`${item.entry.path} ${problem}`);
  }
  if (stale.length > 0) {
    throw new ApplyError(
      `nothing was written to ${repoDir}: ${stale.length === 1 ? stale[0] : `\n  ${stale.join('\n  ')}`}`,
      {
        hint: 'the patch was kept; re-run after reviewing or committing the host changes, or apply the patch by hand',
        details: { problems: stale },
      },
    );
  }

  const written: Written[] = [];
  const createdDirs: string[] = [];
  let current: string | undefined;
  try {
    for (const item of plan) {
      current = item.entry.path;
      await ensureParents(fs, root, item.entry.path, createdDirs);
      // Checked again right before the write: the host may have changed since the first pass.
      const problem = await targetProblem(fs, root, item.entry.path, options.expected);
      if (problem) throw new ApplyError(`${item.entry.path} ${problem}`);
      const existing = await fs.lstat(item.target);
      const backup = existing
        ? { content: await fs.readFile(item.target), mode: existing.mode & 0o777 }
        : null;
      await replaceFile(fs, item.target, item.entry.content, item.mode);
      written.push({ path: item.entry.path, target: item.target, backup });
    }
    current = undefined;
  } catch (error) {
    const unrestored = await rollback(fs, written, createdDirs);
    const restored = written.length - unrestored.length;
    const what = current === undefined ? 'applying the change failed' : `could not write ${current}`;
    const undo =
      unrestored.length === 0
        ? `restored the ${restored} file(s) already written; the host repo is as it was`
        : `COULD NOT RESTORE ${unrestored.join(', ')}; check these files by hand`;
    throw new ApplyError(`${what}: ${errorMessage(error)}; ${undo}`, {
      cause: error,
      details: { unrestored },
    });
  }

  // Durability of the renames; the files themselves are already fsynced and in place.
  for (const dir of new Set(plan.map((p) => path.dirname(p.target))))
    await fs.syncDir(dir).catch(() => undefined);
  return { written: written.map((w) => w.path), createdDirs };
}

function planEntries(root: string, entries: readonly ChangeEntry[]): Planned[] {
  const refused: string[] = [];
  const plan: Planned[] = [];
  for (const entry of entries) {
    const problem = pathProblem(entry.path);
    if (problem) refused.push(`${JSON.stringify(entry.path)} ${problem}`);
    else if (!entry.allowed) refused.push(`${entry.path} is not allowed (${entry.reason ?? 'not editable'})`);
    else if (entry.kind === 'deleted') refused.push(`${entry.path}: deletions are never applied`);
    else if (entry.refused !== undefined || entry.content === undefined)
      refused.push(`${entry.path} has no content`);
    else {
      const target = path.join(root, ...entry.path.split('/'));
      // Belt and braces after pathProblem: the joined path must stay under the root.
      if (!target.startsWith(root + path.sep)) refused.push(`${entry.path} resolves outside the repo`);
      else
        plan.push({
          entry: { ...entry, content: entry.content },
          target,
          mode: normalisedMode(entry.mode ?? 0o644),
        });
    }
  }
  if (refused.length > 0) {
    throw new ApplyError(`refusing to apply a change set that did not pass the gate: ${refused.join('; ')}`);
  }
  return plan;
}

/** Why `rel` cannot be written now, or undefined. Never follows a symlink. */
async function targetProblem(
  fs: ApplyFs,
  root: string,
  rel: string,
  expected: ReadonlyMap<string, string | null>,
): Promise<string | undefined> {
  if (!expected.has(rel)) return 'has no recorded pristine state to compare against';
  const want = expected.get(rel) ?? null;
  const segments = rel.split('/');
  let dir = root;
  for (const segment of segments.slice(0, -1)) {
    dir = path.join(dir, segment);
    const info = await fs.lstat(dir);
    if (!info) return want === null ? undefined : 'no longer exists on the host';
    if (info.kind === 'symlink') {
      return `would be written through a symlink (${path.relative(root, dir)} is a symlink in the host repo); refusing`;
    }
    if (info.kind !== 'directory')
      return `cannot be written: ${path.relative(root, dir)} is not a folder on the host`;
  }
  const target = path.join(root, ...segments);
  const info = await fs.lstat(target);
  if (info?.kind === 'symlink') return 'is a symlink in the host repo; refusing to write through it';
  if (info && info.kind !== 'file') return `is a ${info.kind} on the host, not a file`;
  if (!info) return want === null ? undefined : 'was deleted on the host since the sandbox was built';
  if (want === null)
    return 'was created on the host since the sandbox was built (or differs only in letter case)';
  const have = sha256(await fs.readFile(target));
  return have === want ? undefined : 'changed on the host since the sandbox was built';
}

async function ensureParents(fs: ApplyFs, root: string, rel: string, created: string[]): Promise<void> {
  let dir = root;
  for (const segment of rel.split('/').slice(0, -1)) {
    dir = path.join(dir, segment);
    const info = await fs.lstat(dir);
    if (info?.kind === 'directory') continue;
    if (info)
      throw new ApplyError(`cannot create folder ${path.relative(root, dir)}: a ${info.kind} is in the way`);
    await fs.mkdir(dir);
    created.push(dir);
    // Created by us a moment ago, but someone could have swapped it; check what is there now.
    if ((await fs.lstat(dir))?.kind !== 'directory') {
      throw new ApplyError(`folder ${path.relative(root, dir)} changed while it was being created`);
    }
  }
}

async function replaceFile(fs: ApplyFs, target: string, content: Buffer, mode: number): Promise<void> {
  const temp = path.join(
    path.dirname(target),
    `.${path.basename(target)}.${randomBytes(6).toString('hex')}.sandbox-harness.tmp`,
  );
  try {
    await fs.writeNewFile(temp, content, mode);
    await fs.rename(temp, target);
  } catch (error) {
    await fs.unlink(temp).catch(() => undefined);
    throw error;
  }
}

/** Undoes `written` (newest first) and removes `createdDirs`; returns the paths it could not restore. */
async function rollback(fs: ApplyFs, written: Written[], createdDirs: string[]): Promise<string[]> {
  const unrestored: string[] = [];
  for (const item of [...written].reverse()) {
    try {
      if (item.backup === null) await fs.unlink(item.target);
      else await replaceFile(fs, item.target, item.backup.content, item.backup.mode);
    } catch {
      unrestored.push(item.path);
    }
  }
  for (const dir of [...createdDirs].reverse()) await fs.rmdir(dir).catch(() => undefined);
  return unrestored;
}
