/**
 * The one way the harness starts git on the host (pinned by `tests/unit/structure.test.ts`).
 *
 * Git obeys whatever configuration it finds, and a repo's configuration names programs git
 * runs: a smudge or clean filter (run by `archive`, `apply`, `checkout`), `core.fsmonitor`
 * (run by `ls-files`, `status`), hooks, a pager, an editor, an ssh command, a credential
 * helper, `gpg.program`. A clone, a task folder or an instance is data: nothing it says may
 * run on the host. So git here never reads a repo's configuration at all:
 *
 * - every call runs with `GIT_DIR` set to a scratch git folder made for that call (its
 *   `config` written here, no hooks, no templates), never the repo's own; what git needs of
 *   the repo is handed over explicitly and nothing else: its objects folder as an alternate
 *   (`objects`), its index file (`indexFile`), its work tree (`workTree`), the lines of its
 *   `info/exclude` (`exclude`); the places they come from are checked by `repo.ts`;
 * - the scratch folder's `info/attributes` unsets `filter` for every path, which outranks
 *   every `.gitattributes` in a tree, so no filter driver is ever looked up (and none is
 *   defined: there is no configuration that could define one);
 * - the environment is built from nothing: no `GIT_*` of the caller passes through (a
 *   `GIT_DIR`, `GIT_CONFIG_PARAMETERS` or `GIT_EXEC_PATH` of a hook that runs the harness
 *   cannot redirect it), system and global configuration are off, HOME is an empty folder,
 *   no prompt, no pager, no editor;
 * - command-line `-c` settings (which outrank every file) switch off, once more, each
 *   setting that names a program or reaches the network, so a future change that points
 *   git at a real repo folder still runs nothing of the repo's.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Settings that outrank every configuration file: each one names a program, a hook or the network. */
export const GIT_OVERRIDES: readonly string[] = [
  'core.fsmonitor=false',
  'core.hooksPath=/dev/null',
  'core.untrackedCache=false',
  'core.pager=cat',
  'core.editor=:',
  'core.sshCommand=false',
  'core.askPass=',
  'core.gitProxy=',
  'core.alternateRefsCommand=false',
  'core.attributesFile=/dev/null',
  'credential.helper=',
  'diff.external=',
  'gpg.program=false',
  'gpg.ssh.program=false',
  'gpg.x509.program=false',
  'protocol.allow=never',
  'submodule.recurse=false',
  'gc.auto=0',
  'maintenance.auto=false',
  // An implicit bare repository (a folder that merely looks like one) is never used.
  'safe.bareRepository=explicit',
  // Ownership is not a reason to refuse here: no configuration of the repo is read at all.
  'safe.directory=*',
];

/** Unsets `filter` for every path; `info/attributes` outranks every `.gitattributes` in a tree. */
export const SCRATCH_ATTRIBUTES = '* -filter\n';

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
const STDERR_KEEP = 4000;

export interface GitOptions {
  /** Where git runs (paths in its output are relative to it). */
  cwd: string;
  /** A repo's objects folder git may read (checked by `repo.ts`); without it git sees no objects. */
  objects?: string;
  /** `sha256` for a repo of that object format (read from its config file by `repo.ts`). */
  objectFormat?: 'sha1' | 'sha256';
  workTree?: string;
  indexFile?: string;
  /** The text of the scratch folder's `info/exclude` (the repo's own, as read by `repo.ts`). */
  exclude?: string;
  /** An exclude file of the user's own (their global `core.excludesFile`), absolute. */
  excludesFile?: string;
  input?: string | Buffer;
  /** Stream standard output here instead of collecting it. */
  stdout?: NodeJS.WritableStream;
  /** Collected output beyond this fails the call (default 64 MiB). */
  maxOutputBytes?: number;
  /** Default 120 s. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** For tests: another binary than `git` on PATH. */
  gitBinary?: string;
}

export interface GitResult {
  code: number;
  stdout: Buffer;
  /** The last few KiB of standard error, trimmed. */
  stderr: string;
}

/** Why git could not be run at all (not installed, output over the cap, timed out, aborted). */
export class GitRunError extends Error {
  constructor(
    message: string,
    readonly reason: 'not-installed' | 'too-much-output' | 'timeout' | 'aborted' | 'failed-to-start',
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'GitRunError';
  }
}

interface Scratch {
  root: string;
  gitDir: string;
  home: string;
}

/** A git folder of our own for one call: its config, its attributes, the repo's objects as an alternate. */
async function makeScratch(options: GitOptions): Promise<Scratch> {
  const root = await mkdtemp(path.join(tmpdir(), 'sandbox-harness-git-'));
  const gitDir = path.join(root, 'git');
  const home = path.join(root, 'home');
  try {
    for (const dir of [home, gitDir, `${gitDir}/refs`, `${gitDir}/objects/info`, `${gitDir}/info`])
      await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFile(path.join(gitDir, 'HEAD'), 'ref: refs/heads/sandbox-harness\n');
    const sha256 = options.objectFormat === 'sha256';
    await writeFile(
      path.join(gitDir, 'config'),
      `[core]\n\trepositoryformatversion = ${sha256 ? 1 : 0}\n\tbare = true\n${sha256 ? '[extensions]\n\tobjectformat = sha256\n' : ''}`,
    );
    await writeFile(path.join(gitDir, 'info', 'attributes'), SCRATCH_ATTRIBUTES);
    await writeFile(path.join(gitDir, 'info', 'exclude'), options.exclude ?? '');
    if (options.objects) {
      if (/[\n\r]/.test(options.objects) || !path.isAbsolute(options.objects))
        throw new Error(`not a usable objects folder: ${JSON.stringify(options.objects)}`);
      await writeFile(path.join(gitDir, 'objects', 'info', 'alternates'), `${options.objects}\n`);
    }
  } catch (error) {
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  return { root, gitDir, home };
}

/** The whole environment git gets: nothing of the caller's but PATH. */
export function gitEnvironment(
  scratch: Pick<Scratch, 'gitDir' | 'home'>,
  options: GitOptions,
): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH || DEFAULT_PATH,
    LANG: 'C',
    LC_ALL: 'C',
    HOME: scratch.home,
    XDG_CONFIG_HOME: scratch.home,
    GIT_DIR: scratch.gitDir,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_PAGER: 'cat',
    PAGER: 'cat',
    GIT_EDITOR: ':',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_NO_LAZY_FETCH: '1',
    GIT_PROTOCOL_FROM_USER: '0',
    GIT_LITERAL_PATHSPECS: '1',
    ...(options.workTree ? { GIT_WORK_TREE: options.workTree } : {}),
    ...(options.indexFile ? { GIT_INDEX_FILE: options.indexFile } : {}),
  };
}

/** The arguments before the subcommand: every override, and the user's exclude file when given. */
export function gitPrefix(options: Pick<GitOptions, 'excludesFile'>): string[] {
  const settings = [...GIT_OVERRIDES];
  if (options.excludesFile && path.isAbsolute(options.excludesFile))
    settings.push(`core.excludesFile=${options.excludesFile}`);
  return ['--no-pager', '--no-replace-objects', ...settings.flatMap((s) => ['-c', s])];
}

/**
 * Runs `git <args>` as described above; resolves with its exit code and output whatever
 * the code (a non-zero exit is the caller's to judge), rejects with `GitRunError` when git
 * could not run or was stopped.
 */
export async function runGit(args: readonly string[], options: GitOptions): Promise<GitResult> {
  const scratch = await makeScratch(options);
  try {
    return await spawnGit(args, options, scratch);
  } finally {
    await rm(scratch.root, { recursive: true, force: true });
  }
}

function spawnGit(args: readonly string[], options: GitOptions, scratch: Scratch): Promise<GitResult> {
  const maxOutput = options.maxOutputBytes ?? 64 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(new GitRunError('git not started: interrupted', 'aborted'));
      return;
    }
    const child = spawn(options.gitBinary ?? 'git', [...gitPrefix(options), ...args], {
      cwd: options.cwd,
      env: gitEnvironment(scratch, options),
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let stderr = '';
    let failure: GitRunError | undefined;
    const stop = (error: GitRunError) => {
      failure ??= error;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(
      () => stop(new GitRunError(`git ${args[0] ?? ''} timed out`, 'timeout')),
      options.timeoutMs ?? 120_000,
    );
    const onAbort = () => stop(new GitRunError(`git ${args[0] ?? ''} interrupted`, 'aborted'));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const stdout = child.stdout!;
    if (options.stdout) stdout.pipe(options.stdout);
    else
      stdout.on('data', (chunk: Buffer) => {
        outBytes += chunk.length;
        if (outBytes > maxOutput)
          stop(new GitRunError(`git ${args[0] ?? ''} wrote more than ${maxOutput} bytes`, 'too-much-output'));
        else out.push(chunk);
      });
    child.stderr!.on(
      'data',
      (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_KEEP)),
    );
    if (child.stdin) {
      child.stdin.on('error', () => undefined);
      child.stdin.end(options.input);
    }
    const settle = () => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      settle();
      reject(
        error.code === 'ENOENT'
          ? new GitRunError('git is not installed', 'not-installed', { cause: error })
          : new GitRunError(`git could not be started: ${error.message}`, 'failed-to-start', {
              cause: error,
            }),
      );
    });
    child.once('close', (code, signal) => {
      settle();
      if (failure) reject(failure);
      else resolve({ code: code ?? (signal ? 128 : 1), stdout: Buffer.concat(out), stderr: stderr.trim() });
    });
  });
}
