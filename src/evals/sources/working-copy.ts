/**
 * The repo of an instance at its base commit, in a fresh folder of the eval's own: read out of
 * the local clone with `git archive` (nothing is written to the clone, no network: lazy
 * fetches of a partial clone are off), or copied from a plain folder. Patches are applied with
 * `git apply` in that folder, never in the clone. Git runs through `host-git/`: nothing the
 * clone's configuration names (filters, hooks) runs on the host.
 */
import { cp, lstat, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../../errors.js';
import { applyPatch as gitApply, commitExists, exportCommit, openClone } from '../../host-git/commands.js';

/** The local clone (or folder) of `repo` under `reposDir`: `owner__name`, `owner/name` or `name`. */
export async function findLocalRepo(reposDir: string, repo: string): Promise<string> {
  const name = repo.split('/').pop()!;
  const candidates = [repo.replace('/', '__'), repo, name].map((c) => path.join(reposDir, c));
  for (const candidate of candidates) {
    const stat = await lstat(candidate).catch(() => undefined);
    if (stat?.isDirectory()) return candidate;
  }
  throw new ConfigError(`no local clone of ${repo} in ${reposDir}`, [], {
    hint: `clone it there first as ${candidates.map((c) => path.relative(reposDir, c)).join(' or ')} (evals never use the network)`,
  });
}

async function isGitRepo(dir: string): Promise<boolean> {
  return (await lstat(path.join(dir, '.git')).catch(() => undefined)) !== undefined;
}

export interface WorkingCopy {
  dir: string;
  /** How the base commit was reached: `git` (checked) or `folder` (copied as it is). */
  from: 'git' | 'folder';
}

/**
 * A fresh `dest` holding the clone at `commit` plus the `carry` paths of the clone's folder as
 * they are (dependencies installed there, which a build without network could not fetch).
 */
export async function makeWorkingCopy(
  clone: string,
  commit: string,
  dest: string,
  carry: readonly string[],
): Promise<WorkingCopy> {
  await rm(dest, { recursive: true, force: true });
  await mkdir(dest, { recursive: true });
  let from: WorkingCopy['from'] = 'folder';
  if (await isGitRepo(clone)) {
    from = 'git';
    const repo = await openClone(clone);
    if (!(await commitExists(repo, commit))) {
      throw new ConfigError(`base_commit ${commit} is not in the local clone ${clone}`, [], {
        hint: 'fetch it into that clone first (evals never use the network)',
      });
    }
    await exportCommit(repo, commit, dest);
  } else {
    await cp(clone, dest, {
      recursive: true,
      // Links stay as written: never rewritten to absolute host paths.
      verbatimSymlinks: true,
      filter: (source) => !source.split(path.sep).includes('.sandbox-harness'),
    });
  }
  for (const item of carry) {
    if (path.isAbsolute(item) || item.split('/').includes('..'))
      throw new ConfigError(`carry path ${JSON.stringify(item)} must be relative to the repo, without ".."`);
    const source = path.join(clone, item);
    if (!(await lstat(source).catch(() => undefined))) continue;
    await cp(source, path.join(dest, item), { recursive: true, verbatimSymlinks: true });
  }
  return { dir: dest, from };
}

/** Repo-relative paths a unified diff touches (old and new names). */
export function patchPaths(patch: string): string[] {
  const paths = new Set<string>();
  for (const line of patch.split('\n')) {
    const m = /^(?:---|\+\+\+) (.+?)(?:\t.*)?$/.exec(line);
    if (!m) continue;
    const name = m[1]!;
    if (name === '/dev/null') continue;
    if (name.startsWith('"'))
      throw new ConfigError(`the patch names a quoted path (${name}); such names are not supported`);
    const stripped = name.replace(/^[ab]\//, '');
    if (stripped.startsWith('/') || stripped.split('/').includes('..'))
      throw new ConfigError(`the patch names a path outside the repo: ${name}`);
    paths.add(stripped);
  }
  return [...paths].sort();
}

/** Applies a unified diff in `dir` (git reads no repo's configuration; see host-git/). */
export async function applyPatch(dir: string, patch: string, what: string): Promise<void> {
  if (patch.trim() === '') return;
  const result = await gitApply(dir, patch);
  if (!result.ok)
    throw new ConfigError(`the ${what} does not apply at the base commit: ${result.stderr.slice(0, 500)}`);
}

/** Text of `dir/rel`, or undefined when it is absent; a binary or linked file is refused. */
export async function readPatchedFile(dir: string, rel: string): Promise<string | undefined> {
  const file = path.join(dir, rel);
  const stat = await lstat(file).catch(() => undefined);
  if (!stat) return undefined;
  if (!stat.isFile()) throw new ConfigError(`${rel} is not a regular file after the patch`);
  const bytes = await readFile(file);
  const text = bytes.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(bytes))
    throw new ConfigError(`${rel} is binary after the patch; not supported`);
  return text;
}

/** A file as a patch leaves it. */
export interface PatchedFile {
  path: string;
  /** Undefined: the patch deletes it. */
  content?: string;
}

/**
 * The files of `repoDir` as `patch` leaves them, applied in a scratch folder holding copies of
 * only the files the patch names, so nothing in `repoDir` changes. The patch is data (a
 * prediction is anyone's): a path outside the repo, into `.git`, or through a symbolic link of
 * the working copy is refused before anything is copied, and a patch that makes any file its
 * `---`/`+++` lines do not name (a rename or binary header, a link) is refused after.
 */
export async function patchedFiles(repoDir: string, patch: string, what: string): Promise<PatchedFile[]> {
  const paths = patchPaths(patch);
  for (const p of paths) {
    if (p.split('/').includes('.git')) throw new ConfigError(`the ${what} touches ${p}, inside .git`);
    await refuseLinks(repoDir, p, what);
  }
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'sandbox-harness-patch-'));
  try {
    for (const p of paths) {
      const stat = await lstat(path.join(repoDir, p)).catch(() => undefined);
      if (stat?.isFile()) {
        await mkdir(path.dirname(path.join(scratch, p)), { recursive: true });
        await cp(path.join(repoDir, p), path.join(scratch, p));
      }
    }
    await applyPatch(scratch, patch, what);
    const named = new Set(paths);
    for (const made of await filesUnder(scratch))
      if (!named.has(made))
        throw new ConfigError(
          `the ${what} makes ${made}, which its ---/+++ lines do not name; not supported`,
        );
    const files: PatchedFile[] = [];
    for (const p of paths) {
      const content = await readPatchedFile(scratch, p);
      files.push(content === undefined ? { path: p } : { path: p, content });
    }
    return files;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Refuses `rel` when any of its components in `root` is a symbolic link, or it is there and not a file. */
async function refuseLinks(root: string, rel: string, what: string): Promise<void> {
  const parts = rel.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const at = parts.slice(0, i).join('/');
    const stat = await lstat(path.join(root, at)).catch(() => undefined);
    if (!stat) return;
    if (stat.isSymbolicLink())
      throw new ConfigError(`the ${what} touches ${rel} through the symbolic link ${at}; not applied`);
    if (i < parts.length ? !stat.isDirectory() : !stat.isFile())
      throw new ConfigError(
        `the ${what} touches ${rel}, and ${at} is not a ${i < parts.length ? 'folder' : 'file'}`,
      );
  }
}

/** Every entry under `dir` that is not a folder, repo-relative with "/"; links and the like included. */
async function filesUnder(dir: string, rel = ''): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(path.join(dir, rel), { withFileTypes: true })) {
    const name = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) found.push(...(await filesUnder(dir, name)));
    else found.push(name);
  }
  return found;
}
