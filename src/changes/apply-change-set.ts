/**
 * Copying an accepted change set into the host repo, all or nothing. Every target is
 * checked before anything is written (content still what the sandbox started from, no
 * symlink anywhere under the repo root on the way); each file is written to a temp file in
 * its own folder, fsynced and renamed over the target; on any failure the files already
 * written are put back from in-memory backups and created folders are removed. Before the
 * first rename, a journal of the same backups is made durable outside the repo; it is
 * removed when the apply is complete, so one found later means a crash mid-way, and
 * `recoverInterruptedApply` (called by the next apply, and by `fix` before it reads the
 * repo) undoes it.
 */
import { randomBytes } from 'node:crypto';
import { sha256 } from './hash.js';
import * as fsp from 'node:fs/promises';
import path from 'node:path';
import { ApplyError, errorMessage } from '../errors.js';
import { pathProblem } from './allowlist.js';
import {
  defaultJournalDir,
  journalFile,
  journalTempFile,
  newJournal,
  parseJournal,
  serializeJournal,
  staleJournalTemps,
  tempFileFor,
  writerAlive,
  type Journal,
} from './apply-journal.js';
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
  /** Where the crash journal goes; default `defaultJournalDir()`. */
  journalDir?: string;
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
  backup: Backup | null;
}

export async function applyChangeSet(
  repoDir: string,
  changeSet: Pick<ChangeSet, 'entries'>,
  options: ApplyOptions,
): Promise<ApplyResult> {
  const fs = options.fs ?? nodeApplyFs;
  const journalDir = options.journalDir ?? defaultJournalDir();
  const root = await repoRoot(fs, repoDir);
  const plan = planEntries(root, changeSet.entries);
  // A crash of an earlier apply is undone first: its half-written files would fail every check.
  await recoverAt(fs, root, journalDir);

  // Everything is checked before anything is written, and all problems are named at once.
  // The bytes that were checked are the backup: nothing is read twice.
  const stale: string[] = [];
  const backups = new Map<string, Backup | null>();
  for (const item of plan) {
    const check = await checkTarget(fs, root, item.entry.path, options.expected);
    if ('problem' in check) stale.push(`${item.entry.path} ${check.problem}`);
    else backups.set(item.entry.path, check.backup);
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

  const tempTag = randomBytes(6).toString('hex');
  const journal = await writeJournal(
    fs,
    journalDir,
    newJournal(
      root,
      tempTag,
      plan.map((item) => ({
        path: item.entry.path,
        before: backups.get(item.entry.path) ?? null,
        after: sha256(item.entry.content),
      })),
      await foldersToCreate(fs, root, plan),
    ),
  );

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
      await replaceFile(fs, item.target, item.entry.content, item.mode, tempTag);
      written.push({
        path: item.entry.path,
        target: item.target,
        backup: backups.get(item.entry.path) ?? null,
      });
    }
    current = undefined;
    // Durability of the renames; the files themselves are already fsynced and in place.
    for (const dir of new Set(plan.map((p) => path.dirname(p.target))))
      await fs.syncDir(dir).catch(() => undefined);
    // The commit point: with the journal gone, a crash no longer undoes the apply.
    await fs.unlink(journal);
  } catch (error) {
    const unrestored = await rollback(fs, written, createdDirs, tempTag);
    const restored = written.length - unrestored.length;
    const what = current === undefined ? 'applying the change failed' : `could not write ${current}`;
    let undo: string;
    if (unrestored.length === 0) {
      undo = `restored the ${restored} file(s) already written; the host repo is as it was`;
      await fs.unlink(journal).catch(() => undefined);
    } else {
      undo = `COULD NOT RESTORE ${unrestored.join(', ')}; the next run tries again from its journal, or check these files by hand`;
    }
    throw new ApplyError(`${what}: ${errorMessage(error)}; ${undo}`, {
      cause: error,
      details: { unrestored },
    });
  }
  await fs.syncDir(journalDir).catch(() => undefined);
  return { written: written.map((w) => w.path), createdDirs };
}

export interface Recovery {
  /** The journal that was found (and is now removed). */
  journal: string;
  /** Repo-relative paths put back as they were before the interrupted apply. */
  restored: string[];
  /** Paths that changed again since the crash, left as they are, each with why. */
  leftAlone: string[];
}

/**
 * Undoes an apply to `repoDir` that a crash interrupted, from its journal; undefined when
 * there is none. A path is only put back when it holds what the apply wrote or what was
 * there before; anything else changed since and is left for the user, named. Throws
 * ApplyError when the journal cannot be used or another process is applying right now.
 */
export async function recoverInterruptedApply(
  repoDir: string,
  options: { fs?: ApplyFs; journalDir?: string } = {},
): Promise<Recovery | undefined> {
  const fs = options.fs ?? nodeApplyFs;
  return recoverAt(fs, await repoRoot(fs, repoDir), options.journalDir ?? defaultJournalDir());
}

/**
 * Recoveries under way in this process, by journal: runs that start together on one repo
 * (an eval's trials) share one instead of undoing the same files side by side.
 */
const recovering = new Map<string, Promise<Recovery | undefined>>();

function recoverAt(fs: ApplyFs, root: string, journalDir: string): Promise<Recovery | undefined> {
  const file = journalFile(journalDir, root);
  let pending = recovering.get(file);
  if (!pending) {
    pending = recoverFrom(fs, root, file, journalDir).finally(() => recovering.delete(file));
    recovering.set(file, pending);
  }
  return pending;
}

async function recoverFrom(
  fs: ApplyFs,
  root: string,
  file: string,
  journalDir: string,
): Promise<Recovery | undefined> {
  for (const litter of await staleJournalTemps(file)) await fs.unlink(litter).catch(() => undefined);
  const info = await fs.lstat(file);
  if (!info) return undefined;
  const hint = `check the repo by hand (git status), then remove ${file}`;
  if (info.kind !== 'file')
    throw new ApplyError(`the apply journal ${file} is a ${info.kind}, not a file`, { hint });
  const journal = parseJournal(await fs.readFile(file), root);
  if (typeof journal === 'string') {
    throw new ApplyError(`an interrupted apply to ${root} left ${file}, which cannot be used: ${journal}`, {
      hint,
    });
  }
  if (writerAlive(journal)) {
    throw new ApplyError(`another process (pid ${journal.pid}) is applying a change to ${root} right now`, {
      hint: `wait for it to finish; if pid ${journal.pid} is not sandbox-harness, ${hint}`,
    });
  }
  try {
    return { journal: file, ...(await undoJournal(fs, root, journal, file, journalDir)) };
  } catch (error) {
    throw new ApplyError(
      `undoing the interrupted apply to ${root} failed: ${errorMessage(error)}; its journal is kept and the next run tries again`,
      { cause: error, hint },
    );
  }
}

async function undoJournal(
  fs: ApplyFs,
  root: string,
  journal: Journal,
  file: string,
  journalDir: string,
): Promise<Omit<Recovery, 'journal'>> {
  const restored: string[] = [];
  const leftAlone: string[] = [];
  const touched = new Set<string>();
  for (const entry of [...journal.entries].reverse()) {
    const target = path.join(root, ...entry.path.split('/'));
    const unsafe = pathProblem(entry.path);
    if (unsafe || !target.startsWith(root + path.sep)) {
      leftAlone.push(`${entry.path} (not a plain path in the repo)`);
      continue;
    }
    const parents = await parentsProblem(fs, root, entry.path);
    if (parents === 'missing') {
      if (entry.before !== null) leftAlone.push(`${entry.path} (deleted since)`);
      continue;
    }
    if (parents) {
      leftAlone.push(`${entry.path} (${parents})`);
      continue;
    }
    const temp = tempFileFor(target, journal.tempTag);
    if ((await fs.lstat(temp))?.kind === 'file') await fs.unlink(temp);
    const before = entry.before
      ? { content: Buffer.from(entry.before.content, 'base64'), mode: entry.before.mode }
      : null;
    const now = await fs.lstat(target);
    if (!now) {
      if (before) leftAlone.push(`${entry.path} (deleted since)`);
      continue;
    }
    if (now.kind !== 'file') {
      leftAlone.push(`${entry.path} (a ${now.kind} now)`);
      continue;
    }
    const have = sha256(await fs.readFile(target));
    const beforeHash = before ? sha256(before.content) : null;
    if (have === beforeHash && (now.mode & 0o777) === before?.mode) continue;
    if (have !== entry.after && have !== beforeHash) {
      leftAlone.push(`${entry.path} (changed since the interrupted apply)`);
      continue;
    }
    if (before) await replaceFile(fs, target, before.content, before.mode, journal.tempTag);
    else await fs.unlink(target);
    restored.push(entry.path);
    touched.add(path.dirname(target));
  }
  for (const rel of [...journal.createdDirs].reverse()) {
    const dir = path.join(root, ...rel.split('/'));
    // The same checks as for a file: a plain path inside the repo's real path, and no link
    // in any component, the folder itself included (a planted journal must not make this
    // remove a folder outside the repo through a repo symlink).
    if (pathProblem(rel) || !dir.startsWith(root + path.sep)) {
      leftAlone.push(`${rel}/ (not a plain path in the repo)`);
      continue;
    }
    const through = await parentsProblem(fs, root, `${rel}/.`);
    if (through === 'missing') continue;
    if (through) {
      leftAlone.push(`${rel}/ (${through})`);
      continue;
    }
    // Only empty folders go: one the user filled since is theirs now.
    await fs.rmdir(dir).catch(() => undefined);
  }
  for (const dir of touched) await fs.syncDir(dir).catch(() => undefined);
  await fs.unlink(file);
  await fs.syncDir(journalDir).catch(() => undefined);
  return { restored, leftAlone };
}

type Backup = { content: Buffer; mode: number };

async function repoRoot(fs: ApplyFs, repoDir: string): Promise<string> {
  // The repo folder itself may be reached through a symlink (a user's choice); below it, none.
  const root = await fs.realpath(repoDir).catch((error: unknown) => {
    throw new ApplyError(`the repo folder ${repoDir} cannot be opened: ${errorMessage(error)}`, {
      cause: error,
    });
  });
  if ((await fs.lstat(root))?.kind !== 'directory')
    throw new ApplyError(`the repo path ${repoDir} is not a folder`);
  return root;
}

/** Repo-relative folders the plan will create, parents first. */
async function foldersToCreate(fs: ApplyFs, root: string, plan: Planned[]): Promise<string[]> {
  const folders = new Set<string>();
  for (const item of plan) {
    const segments = item.entry.path.split('/').slice(0, -1);
    for (let i = 1; i <= segments.length; i++) {
      const rel = segments.slice(0, i).join('/');
      if (!folders.has(rel) && !(await fs.lstat(path.join(root, ...segments.slice(0, i))))) folders.add(rel);
    }
  }
  return [...folders];
}

/** Writes the journal durably before anything in the repo changes; returns its path. */
async function writeJournal(fs: ApplyFs, journalDir: string, journal: Journal): Promise<string> {
  await fsp.mkdir(journalDir, { recursive: true, mode: 0o700 });
  const file = journalFile(journalDir, journal.root);
  const temp = journalTempFile(file, journal.tempTag);
  try {
    await fs.writeNewFile(temp, serializeJournal(journal), 0o600);
    await fs.rename(temp, file);
  } catch (error) {
    await fs.unlink(temp).catch(() => undefined);
    throw new ApplyError(
      `nothing was written: the apply journal ${file} could not be written: ${errorMessage(error)}`,
      {
        cause: error,
      },
    );
  }
  try {
    await fs.syncDir(journalDir);
  } catch (error) {
    await fs.unlink(file).catch(() => undefined);
    throw new ApplyError(
      `nothing was written: the apply journal ${file} could not be made durable: ${errorMessage(error)}`,
      {
        cause: error,
      },
    );
  }
  return file;
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
  const check = await checkTarget(fs, root, rel, expected);
  return 'problem' in check ? check.problem : undefined;
}

/**
 * Why `rel` cannot be written now, or what is there now (the pristine file, or nothing),
 * which is what a rollback puts back. Never follows a symlink.
 */
async function checkTarget(
  fs: ApplyFs,
  root: string,
  rel: string,
  expected: ReadonlyMap<string, string | null>,
): Promise<{ problem: string } | { backup: Backup | null }> {
  if (!expected.has(rel)) return { problem: 'has no recorded pristine state to compare against' };
  const want = expected.get(rel) ?? null;
  const nothing = { backup: null };
  const parents = await parentsProblem(fs, root, rel);
  if (parents === 'missing') return want === null ? nothing : { problem: 'no longer exists on the host' };
  if (parents) return { problem: parents };
  const target = path.join(root, ...rel.split('/'));
  const info = await fs.lstat(target);
  if (info?.kind === 'symlink')
    return { problem: 'is a symlink in the host repo; refusing to write through it' };
  if (info && info.kind !== 'file') return { problem: `is a ${info.kind} on the host, not a file` };
  if (!info)
    return want === null ? nothing : { problem: 'was deleted on the host since the sandbox was built' };
  if (want === null)
    return {
      problem: 'was created on the host since the sandbox was built (or differs only in letter case)',
    };
  const content = await fs.readFile(target);
  if (sha256(content) !== want) return { problem: 'changed on the host since the sandbox was built' };
  return { backup: { content, mode: info.mode & 0o777 } };
}

/** Why the folders on the way to `rel` cannot be written through, 'missing' when one is not there. */
async function parentsProblem(fs: ApplyFs, root: string, rel: string): Promise<string | undefined> {
  let dir = root;
  for (const segment of rel.split('/').slice(0, -1)) {
    dir = path.join(dir, segment);
    const info = await fs.lstat(dir);
    if (!info) return 'missing';
    if (info.kind === 'symlink') {
      return `would be written through a symlink (${path.relative(root, dir)} is a symlink in the host repo); refusing`;
    }
    if (info.kind !== 'directory')
      return `cannot be written: ${path.relative(root, dir)} is not a folder on the host`;
  }
  return undefined;
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

async function replaceFile(
  fs: ApplyFs,
  target: string,
  content: Buffer,
  mode: number,
  tempTag: string,
): Promise<void> {
  // Named from the journal's tag, so a crash's leftover temp file is found and removed.
  const temp = tempFileFor(target, tempTag);
  try {
    // Permission bits only, whatever asked: the host never gets a set-id or sticky bit from a change.
    await fs.writeNewFile(temp, content, mode & 0o777);
    await fs.rename(temp, target);
  } catch (error) {
    await fs.unlink(temp).catch(() => undefined);
    throw error;
  }
}

/** Undoes `written` (newest first) and removes `createdDirs`; returns the paths it could not restore. */
async function rollback(
  fs: ApplyFs,
  written: Written[],
  createdDirs: string[],
  tempTag: string,
): Promise<string[]> {
  const unrestored: string[] = [];
  for (const item of [...written].reverse()) {
    try {
      if (item.backup === null) await fs.unlink(item.target);
      else await replaceFile(fs, item.target, item.backup.content, item.backup.mode, tempTag);
    } catch {
      unrestored.push(item.path);
    }
  }
  for (const dir of [...createdDirs].reverse()) await fs.rmdir(dir).catch(() => undefined);
  return unrestored;
}
