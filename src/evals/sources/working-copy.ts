/**
 * The repo of an instance at its base commit, in a fresh folder of the eval's own: read out of
 * the local clone with `git archive` (nothing is written to the clone, no network: lazy
 * fetches of a partial clone are off), or copied from a plain folder. Patches are applied with
 * `git apply` in that folder, never in the clone, with git kept from finding any repo around it.
 */
import { spawn } from 'node:child_process';
import { cp, lstat, mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../../errors.js';

/** Git's environment here: no prompt, no lazy fetch, no enclosing repo, no user config surprises. */
function gitEnv(ceiling: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const key of ['PATH', 'HOME', 'LANG', 'TMPDIR']) if (process.env[key]) env[key] = process.env[key];
  return {
    ...env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_NO_LAZY_FETCH: '1',
    GIT_CEILING_DIRECTORIES: ceiling,
    GIT_CONFIG_NOSYSTEM: '1',
  };
}

interface Ran {
  code: number;
  stdout: Buffer;
  stderr: string;
}

function run(
  command: string,
  args: string[],
  options: { cwd: string; input?: string; env: NodeJS.ProcessEnv },
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out), stderr: err.trim() }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

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
  const env = gitEnv(path.dirname(clone));
  let from: WorkingCopy['from'] = 'folder';
  if (await isGitRepo(clone)) {
    from = 'git';
    const exists = await run('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: clone, env });
    if (exists.code !== 0) {
      throw new ConfigError(`base_commit ${commit} is not in the local clone ${clone}`, [], {
        hint: 'fetch it into that clone first (evals never use the network)',
      });
    }
    await archiveInto(clone, commit, dest, env);
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

function archiveInto(clone: string, commit: string, dest: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const git = spawn('git', ['archive', '--format=tar', commit], {
      cwd: clone,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // --no-same-owner/permissions: the tar is git's, but its modes go no further than the user's umask.
    const tar = spawn('tar', ['-x', '--no-same-owner', '-C', dest], {
      env,
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let errors = '';
    git.stderr.on('data', (d: Buffer) => (errors += d.toString()));
    tar.stderr.on('data', (d: Buffer) => (errors += d.toString()));
    git.stdout.pipe(tar.stdin);
    let pending = 2;
    let failed = false;
    const done = (what: string) => (code: number | null) => {
      if (code !== 0 && !failed) {
        failed = true;
        reject(new ConfigError(`${what} of ${commit} from ${clone} failed: ${errors.trim().slice(0, 500)}`));
      }
      if (--pending === 0 && !failed) resolve();
    };
    git.on('error', reject);
    tar.on('error', reject);
    git.on('close', done('git archive'));
    tar.on('close', done('unpacking'));
  });
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

/** Applies a unified diff in `dir` (not a git repo of its own; git finds none around it). */
export async function applyPatch(dir: string, patch: string, what: string): Promise<void> {
  if (patch.trim() === '') return;
  const result = await run('git', ['apply', '--whitespace=nowarn', '-'], {
    cwd: dir,
    input: patch.endsWith('\n') ? patch : `${patch}\n`,
    env: gitEnv(path.dirname(dir)),
  });
  if (result.code !== 0)
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
