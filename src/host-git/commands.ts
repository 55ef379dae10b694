/**
 * What the harness asks of git on the host, each through `runGit` (no configuration of the
 * repo or the user is read; see run.ts) on data checked by `repo.ts`:
 *
 * - `listFiles`: the files git considers part of a work tree (tracked, plus untracked ones
 *   no ignore rule matches), for build contexts;
 * - `commitExists` and `exportCommit`: a commit of a clone written into a fresh folder
 *   (`git archive`, unpacked by tar), for instances;
 * - `applyPatch`: a unified diff applied to a folder's files, for instances' patches.
 */
import { spawn } from 'node:child_process';
import { homedir } from 'node:os';
import path from 'node:path';
import { ConfigError, type HarnessError } from '../errors.js';
import { checkedObjects, findRepo, openRepo, repoExcludes, type HostRepo } from './repo.js';
import { GitRunError, runGit } from './run.js';

export type { HostRepo } from './repo.js';
export { GitRunError } from './run.js';

const LIST_MAX_BYTES = 512 * 1024 * 1024;

/**
 * The user's own global ignore file (`core.excludesFile` of their global configuration, else
 * git's default `~/.config/git/ignore`): patterns only, so a listing still leaves out what
 * the user ignores everywhere, while nothing else of that configuration is read.
 */
export function userExcludesFile(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  // Asked once per process and user: a build context is listed for every run and trial.
  const key = `${env.HOME ?? ''}\0${env.XDG_CONFIG_HOME ?? ''}`;
  let found = excludesFiles.get(key);
  if (!found) {
    found = findUserExcludesFile(env);
    excludesFiles.set(key, found);
  }
  return found;
}

const excludesFiles = new Map<string, Promise<string | undefined>>();

async function findUserExcludesFile(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const home = env.HOME && path.isAbsolute(env.HOME) ? env.HOME : homedir();
  const xdg = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : undefined;
  const configDir = xdg ?? path.join(home, '.config');
  let named: string | undefined;
  // Read in git's order; the later file wins.
  for (const file of [path.join(configDir, 'git', 'config'), path.join(home, '.gitconfig')]) {
    const read = await runGit(['config', '--file', file, '--get', 'core.excludesFile'], { cwd: '/' }).catch(
      () => undefined,
    );
    const value = read?.code === 0 ? read.stdout.toString('utf8').trim() : '';
    if (value !== '') named = value;
  }
  if (named?.startsWith('~/')) named = path.join(home, named.slice(2));
  if (named && path.isAbsolute(named)) return named;
  return path.join(configDir, 'git', 'ignore');
}

export type Listing =
  | { kind: 'git'; repo: HostRepo; entries: string[] }
  | { kind: 'none'; reason: 'not-installed' | 'not-a-repo' };

/**
 * `git ls-files -z --cached --others --exclude-standard` of the work tree holding `dir`,
 * paths relative to `dir` (a folder git lists as one entry ends with `/`).
 */
export async function listFiles(
  dir: string,
  options: { error: (message: string, hint: string) => HarnessError; gitBinary?: string },
): Promise<Listing> {
  // A repo whose git data is refused is a problem of its configuration (ConfigError, exit 2).
  const repo = await findRepo(dir, { policy: 'worktrees' });
  if (!repo) return { kind: 'none', reason: 'not-a-repo' };
  const excludesFile = await userExcludesFile();
  let result;
  try {
    result = await runGit(['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
      cwd: dir,
      workTree: repo.top,
      indexFile: repo.indexFile,
      objectFormat: repo.objectFormat,
      exclude: await repoExcludes(repo),
      ...(excludesFile ? { excludesFile } : {}),
      maxOutputBytes: LIST_MAX_BYTES,
      ...(options.gitBinary ? { gitBinary: options.gitBinary } : {}),
    });
  } catch (error) {
    if (error instanceof GitRunError && error.reason === 'not-installed')
      return { kind: 'none', reason: 'not-installed' };
    throw options.error(
      `cannot list the files of ${dir} with git: ${(error as Error).message}`,
      `The build context is limited to what git lists; run \`git ls-files --others --exclude-standard\` in ${dir} to see why.`,
    );
  }
  if (result.code !== 0) {
    throw options.error(
      `cannot list the files of ${dir} with git: ${result.stderr.split('\n')[0] || `exit code ${result.code}`}`,
      `The build context is limited to what git lists; run \`git ls-files --others --exclude-standard\` in ${dir} to see why.`,
    );
  }
  return {
    kind: 'git',
    repo,
    entries: result.stdout
      .toString('utf8')
      .split('\0')
      .filter((e) => e !== ''),
  };
}

/** The clone at `clone` as a repo whose git data is all inside it (refused, named, otherwise). */
export async function openClone(clone: string): Promise<HostRepo & { objects: string }> {
  const repo = await openRepo(clone, { policy: 'inside' });
  return { ...repo, objects: await checkedObjects(repo) };
}

/** Does the clone hold `commit` (a hex id, abbreviated or whole) as a commit? */
export async function commitExists(clone: HostRepo & { objects: string }, commit: string): Promise<boolean> {
  const result = await runGit(['cat-file', '-e', `${commit}^{commit}`], {
    cwd: clone.top,
    objects: clone.objects,
    objectFormat: clone.objectFormat,
  });
  return result.code === 0;
}

/** The scrubbed environment of the host's other tools (tar): nothing of the caller's but PATH. */
function toolEnvironment(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH || '/usr/local/bin:/usr/bin:/bin', LANG: 'C', LC_ALL: 'C' };
}

/**
 * The tree of `commit` written into `dest` (an empty folder): `git archive` piped into tar.
 * The archive is git's own (plain paths, modes 644/755), unpacked without taking its owner,
 * and tar gets no options from the environment (TAR_OPTIONS) either.
 */
export async function exportCommit(
  clone: HostRepo & { objects: string },
  commit: string,
  dest: string,
): Promise<void> {
  const tar = spawn('tar', ['-x', '--no-same-owner', '-C', dest], {
    env: toolEnvironment(),
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let tarErrors = '';
  tar.stderr.on('data', (d: Buffer) => (tarErrors = (tarErrors + d.toString()).slice(-4000)));
  tar.stdin.on('error', () => undefined);
  const unpacked = new Promise<number>((resolve, reject) => {
    tar.once('error', reject);
    tar.once('close', (code) => resolve(code ?? 1));
  });
  let archived;
  try {
    archived = await runGit(['archive', '--format=tar', commit], {
      cwd: clone.top,
      objects: clone.objects,
      objectFormat: clone.objectFormat,
      stdout: tar.stdin,
      timeoutMs: 600_000,
    });
  } catch (error) {
    tar.kill('SIGKILL');
    await unpacked.catch(() => undefined);
    throw new ConfigError(`git archive of ${commit} from ${clone.top} failed: ${(error as Error).message}`);
  }
  const tarCode = await unpacked;
  if (archived.code !== 0)
    throw new ConfigError(
      `git archive of ${commit} from ${clone.top} failed: ${archived.stderr.slice(0, 500)}`,
    );
  if (tarCode !== 0)
    throw new ConfigError(`unpacking ${commit} from ${clone.top} failed: ${tarErrors.trim().slice(0, 500)}`);
}

/**
 * Applies a unified diff to the files of `dir` (a work tree of no repo of its own: any `.git`
 * in it is not used); the result of the call, for the caller to judge.
 */
export async function applyPatch(dir: string, patch: string): Promise<{ ok: boolean; stderr: string }> {
  const result = await runGit(['apply', '--whitespace=nowarn', '-'], {
    cwd: dir,
    workTree: dir,
    input: patch.endsWith('\n') ? patch : `${patch}\n`,
  });
  return { ok: result.code === 0, stderr: result.stderr };
}
