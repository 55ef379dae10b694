/**
 * Where a repo's git data is, found without asking git (which would read the repo's
 * configuration) and checked before git is pointed at any of it.
 *
 * A `.git` entry may be a folder, or a file (`gitdir: <path>`) or link that sends git to a
 * git folder anywhere on the host; that folder's `commondir` and `objects/info/alternates`
 * may send it further. Data from such places would reach an image (and the model), so:
 *
 * - `inside` (an instance's clone, a task folder: data from elsewhere): the git folder, its
 *   common folder and every alternate objects folder must be inside the repo's own folder;
 *   anything that points out is refused, named.
 * - `worktrees` (the user's own repo, listed to leave ignored files out of a build context):
 *   the same, except the two layouts git itself writes outside a work tree: a linked
 *   worktree (`git worktree add`: its git folder has a `commondir` and names this very
 *   `.git` back in its `gitdir`), and a submodule (its git folder under `.git/modules/` of a
 *   folder that contains it). Only the index and `info/exclude` are read there, and a
 *   listing only ever leaves files of the folder out, never adds one.
 */
import { constants } from 'node:fs';
import { lstat, open, readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type HarnessError } from '../errors.js';

export type RedirectPolicy = 'inside' | 'worktrees';

export interface HostRepo {
  /** The work tree's top folder (real path). */
  top: string;
  /** This work tree's git folder (real path). */
  gitDir: string;
  /** Where objects and `info/` live: the git folder, or a linked worktree's main one. */
  commonDir: string;
  indexFile: string;
  objectFormat: 'sha1' | 'sha256';
  /** What the `.git` entry is: a folder, or a file or link that points elsewhere. */
  dotGit: 'folder' | 'file' | 'link';
}

export interface RepoCheckOptions {
  policy: RedirectPolicy;
  /** The error to throw for a refused repo (default ConfigError). */
  error?: (message: string, hint: string) => HarnessError;
}

const SMALL_FILE_BYTES = 64 * 1024;
const EXCLUDE_MAX_BYTES = 1024 * 1024;
const MAX_ALTERNATE_DEPTH = 5;

function within(dir: string, target: string): boolean {
  return target === dir || target.startsWith(dir.endsWith(path.sep) ? dir : dir + path.sep);
}

/** A regular file's text (never through a final link), or undefined; over `maxBytes` is refused. */
async function readSmallFile(file: string, maxBytes = SMALL_FILE_BYTES): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return undefined;
    const buffer = Buffer.alloc(Math.min(info.size, maxBytes) + 1);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    if (bytesRead > maxBytes) throw new Error(`${file} is larger than ${maxBytes} bytes`);
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}

async function isDirectory(dir: string): Promise<boolean> {
  return (await stat(dir).catch(() => undefined))?.isDirectory() === true;
}

/** Git's test of a git folder: a HEAD, and objects and refs folders (in its common folder). */
async function isGitDir(dir: string): Promise<boolean> {
  if (!(await lstat(path.join(dir, 'HEAD')).catch(() => undefined))) return false;
  const common = (await readSmallFile(path.join(dir, 'commondir')).catch(() => undefined))?.trim();
  const base = common ? path.resolve(dir, common) : dir;
  return (await isDirectory(path.join(base, 'objects'))) && (await isDirectory(path.join(base, 'refs')));
}

/**
 * The repo whose work tree holds `dir` (git's own search: `dir`, then each folder above it,
 * not across a file system boundary), or undefined when there is none.
 */
export async function findRepo(dir: string, options: RepoCheckOptions): Promise<HostRepo | undefined> {
  let level = await realpath(dir);
  const device = (await stat(level)).dev;
  for (;;) {
    const dotGit = path.join(level, '.git');
    const entry = await lstat(dotGit).catch(() => undefined);
    // As git does: a `.git` folder that is not a git folder is passed over; a file or a link is not.
    if (entry && (!entry.isDirectory() || (await isGitDir(dotGit)))) return openRepo(level, options);
    const parent = path.dirname(level);
    if (parent === level) return undefined;
    const info = await stat(parent).catch(() => undefined);
    if (!info || info.dev !== device) return undefined;
    level = parent;
  }
}

/** The repo whose `.git` is directly in `top`, checked by `options.policy`. */
export async function openRepo(top: string, options: RepoCheckOptions): Promise<HostRepo> {
  const fail = options.error ?? ((message: string, hint: string) => new ConfigError(message, [], { hint }));
  const realTop = await realpath(top);
  const dotGitPath = path.join(realTop, '.git');
  const entry = await lstat(dotGitPath).catch(() => undefined);
  if (!entry) throw fail(`${top} is not a git repository (no .git)`, 'Point at the top folder of a clone.');
  const refuse = (what: string, target: string) =>
    fail(
      `${top}: ${what} ${target}, outside the repo; git is not run on it`,
      'A clone used by the harness must hold its own git data: clone it again without --separate-git-dir, --reference or --shared (or run `git repack -a -d` and remove objects/info/alternates).',
    );

  let gitDir: string;
  let dotGit: HostRepo['dotGit'];
  if (entry.isDirectory()) {
    gitDir = dotGitPath;
    dotGit = 'folder';
  } else if (entry.isFile()) {
    const text = await readSmallFile(dotGitPath);
    const match = text === undefined ? null : /^gitdir: *(.+?)\s*$/m.exec(text);
    if (!match)
      throw fail(`${top}: .git is a file that does not name a git folder`, 'Remove it or clone again.');
    gitDir = path.resolve(realTop, match[1]!);
    dotGit = 'file';
  } else if (entry.isSymbolicLink()) {
    gitDir = dotGitPath;
    dotGit = 'link';
  } else {
    throw fail(`${top}: .git is neither a folder nor a file`, 'Remove it or clone again.');
  }
  const realGitDir = await realpath(gitDir).catch(() => undefined);
  if (!realGitDir || !(await isDirectory(realGitDir)))
    throw fail(`${top}: .git points at ${gitDir}, which is not a folder`, 'Clone the repo again.');

  const commonText = await readSmallFile(path.join(realGitDir, 'commondir'));
  const commonDir = commonText?.trim()
    ? await realpath(path.resolve(realGitDir, commonText.trim())).catch(() => undefined)
    : realGitDir;
  if (!commonDir || !(await isDirectory(commonDir)))
    throw fail(
      `${top}: the git folder ${realGitDir} names a common folder that does not exist`,
      'Clone again.',
    );

  if (!within(realTop, realGitDir) || !within(realTop, commonDir)) {
    const allowed =
      options.policy === 'worktrees' &&
      ((await isLinkedWorktree(realGitDir, commonText, dotGitPath)) ||
        (await isSubmodule(realGitDir, realTop)));
    if (!allowed) throw refuse(dotGit === 'folder' ? 'its git folder is' : '.git points at', realGitDir);
  }

  return {
    top: realTop,
    gitDir: realGitDir,
    commonDir,
    indexFile: path.join(realGitDir, 'index'),
    objectFormat: await objectFormat(commonDir),
    dotGit,
  };
}

/** `git worktree add` layout: `<main>/worktrees/<name>` with a `commondir`, naming `dotGit` back. */
async function isLinkedWorktree(
  gitDir: string,
  commonText: string | undefined,
  dotGit: string,
): Promise<boolean> {
  if (!commonText?.trim()) return false;
  const back = (await readSmallFile(path.join(gitDir, 'gitdir')))?.trim();
  if (!back) return false;
  const named = await realpath(path.resolve(gitDir, back)).catch(() => undefined);
  return named === (await realpath(dotGit).catch(() => dotGit));
}

/** A submodule's git folder: under `.git/modules/` of a folder above the submodule. */
async function isSubmodule(gitDir: string, top: string): Promise<boolean> {
  for (let level = path.dirname(top); ; level = path.dirname(level)) {
    const superGit = path.join(level, '.git');
    if ((await lstat(superGit).catch(() => undefined))?.isDirectory()) {
      const modules = path.join(await realpath(superGit), 'modules');
      if (within(modules, gitDir) && gitDir !== modules) return true;
    }
    if (path.dirname(level) === level) return false;
  }
}

/**
 * The object format from the repo's config file (`[extensions] objectFormat = sha256`), read
 * as text by us rather than by git: nothing of it is followed or run, and it costs no process.
 */
async function objectFormat(commonDir: string): Promise<HostRepo['objectFormat']> {
  const text = await readSmallFile(path.join(commonDir, 'config'), EXCLUDE_MAX_BYTES).catch(() => undefined);
  let section = '';
  for (const raw of (text ?? '').split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    const header = /^\[\s*([A-Za-z0-9.-]+)\s*\]/.exec(line);
    if (header) section = header[1]!.toLowerCase();
    else if (section === 'extensions' && /^objectformat\s*=\s*"?sha256"?$/i.test(line)) return 'sha256';
  }
  return 'sha1';
}

/** The repo's `info/exclude` lines (its own ignore rules outside any `.gitignore`), or ''. */
export async function repoExcludes(repo: HostRepo): Promise<string> {
  return (
    (await readSmallFile(path.join(repo.commonDir, 'info', 'exclude'), EXCLUDE_MAX_BYTES).catch(() => '')) ??
    ''
  );
}

/**
 * The repo's objects folder, once every alternate it names (and theirs) is checked to be
 * inside the repo: objects read from elsewhere could put another repo's files in a working copy.
 */
export async function checkedObjects(
  repo: HostRepo,
  options: Pick<RepoCheckOptions, 'error'> = {},
): Promise<string> {
  const fail = options.error ?? ((message: string, hint: string) => new ConfigError(message, [], { hint }));
  const objects = await realpath(path.join(repo.commonDir, 'objects')).catch(() => undefined);
  if (!objects || !within(repo.top, objects))
    throw fail(
      `${repo.top}: its objects folder ${objects ?? path.join(repo.commonDir, 'objects')} is missing or outside the repo`,
      'Clone the repo again.',
    );
  const seen = new Set<string>();
  const visit = async (dir: string, depth: number): Promise<void> => {
    if (seen.has(dir)) return;
    seen.add(dir);
    const text = await readSmallFile(path.join(dir, 'info', 'alternates'));
    if (text === undefined) return;
    for (const line of text.split('\n').map((l) => l.trim())) {
      if (line === '' || line.startsWith('#')) continue;
      const target = await realpath(path.resolve(dir, line)).catch(() => path.resolve(dir, line));
      if (!within(repo.top, target) || depth >= MAX_ALTERNATE_DEPTH) {
        throw fail(
          `${repo.top}: objects/info/alternates reads objects from ${target}, outside the repo; git is not run on it`,
          'Make the clone self-contained: `git repack -a -d`, then remove .git/objects/info/alternates.',
        );
      }
      await visit(target, depth + 1);
    }
  };
  await visit(objects, 0);
  const linked = await linkInObjects(objects);
  if (linked)
    throw fail(
      `${repo.top}: ${linked} is a symlink; objects are read from inside the clone only`,
      'Clone the repo again.',
    );
  return objects;
}

/**
 * The first symlink among the objects folder's entries, its pack files and its loose objects
 * (git would read an object through it from wherever it points), or undefined. File types
 * come with the listing: no file is opened.
 */
async function linkInObjects(objects: string): Promise<string | undefined> {
  const entries = await readdir(objects, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const full = path.join(objects, entry.name);
    if (entry.isSymbolicLink()) return full;
    if (!entry.isDirectory()) continue;
    for (const inner of await readdir(full, { withFileTypes: true }).catch(() => []))
      if (inner.isSymbolicLink()) return path.join(full, inner.name);
  }
  return undefined;
}
