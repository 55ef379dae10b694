/**
 * Which files of a folder git considers part of the project: tracked files plus untracked
 * files that no ignore rule matches (`git ls-files --cached --others --exclude-standard`).
 * The build context of a repo inside a git work tree is limited to these (plus dependency
 * folders), so a `.gitignore`d `secrets/` or `terraform.tfstate` never reaches an image.
 *
 * The repo is not trusted. Its `.git/config` can name programs git would run: for
 * `ls-files` that is `core.fsmonitor`, forced off here (command-line `-c` beats any
 * config file). Nothing else in that command runs a program: no hooks, pager, filters or
 * credential helpers. The environment is rebuilt from scratch, so a `GIT_DIR` or
 * `GIT_CONFIG_*` of the caller (say, a git hook that runs the harness) cannot redirect it,
 * while HOME stays so the user's own global excludes apply. A repo owned by someone else
 * ("dubious ownership") is listed anyway through `safe.directory` on the command line, not
 * in the user's config: the output is only ever used to leave files out, never to add one.
 */
import { execFile } from 'node:child_process';
import { ImageError } from '../errors.js';

export type GitListing =
  | {
      kind: 'git';
      /** Repo-relative posix paths of files and links git lists under the folder. */
      files: Set<string>;
      /** Folders git lists as one entry (nested repositories, submodules): included whole. */
      wholeDirs: Set<string>;
    }
  | { kind: 'none'; reason: string };

const MAX_OUTPUT_BYTES = 512 * 1024 * 1024;
const TIMEOUT_MS = 120_000;

/** Only what git needs to find itself and the user's own configuration. */
export function gitEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {
    PATH: env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C',
    LC_ALL: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
  };
  if (env.HOME) clean.HOME = env.HOME;
  if (env.XDG_CONFIG_HOME) clean.XDG_CONFIG_HOME = env.XDG_CONFIG_HOME;
  return clean;
}

export const GIT_LS_FILES_ARGS: readonly string[] = [
  '-c',
  'core.fsmonitor=false',
  '-c',
  'core.untrackedCache=false',
  '-c',
  'safe.directory=*',
  '--no-optional-locks',
  'ls-files',
  '-z',
  '--cached',
  '--others',
  '--exclude-standard',
];

/** Lists `dir` with git's rules, or says why git's rules do not apply. */
export function gitListing(dir: string, options: { gitBinary?: string } = {}): Promise<GitListing> {
  return new Promise((resolve, reject) => {
    execFile(
      options.gitBinary ?? 'git',
      [...GIT_LS_FILES_ARGS],
      {
        cwd: dir,
        env: gitEnvironment(),
        encoding: 'buffer',
        maxBuffer: MAX_OUTPUT_BYTES,
        timeout: TIMEOUT_MS,
        windowsHide: true,
      },
      (error, stdout, stderr) => {
        const message = stderr.toString('utf8').trim();
        if (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') {
            resolve({ kind: 'none', reason: 'git is not installed, so .gitignore rules cannot be applied' });
          } else if (/not a git repository/i.test(message)) {
            resolve({ kind: 'none', reason: 'not inside a git work tree' });
          } else {
            reject(
              new ImageError(
                `cannot list the files of ${dir} with git: ${message.split('\n')[0] || error.message}`,
                {
                  hint: /dubious ownership/i.test(message)
                    ? `This git is too old to accept safe.directory on the command line: upgrade git, or run \`git config --global --add safe.directory ${dir}\`.`
                    : `Run \`git ls-files --others --exclude-standard\` in ${dir} to see the problem; the build context is limited to what git lists.`,
                  cause: error,
                },
              ),
            );
          }
          return;
        }
        const files = new Set<string>();
        const wholeDirs = new Set<string>();
        for (const entry of stdout.toString('utf8').split('\0')) {
          if (entry === '') continue;
          if (entry.endsWith('/')) wholeDirs.add(entry.slice(0, -1));
          else files.add(entry);
        }
        if (files.size === 0 && wholeDirs.size === 0) {
          // The folder is ignored by an enclosing repo, or that repo knows none of its files.
          resolve({ kind: 'none', reason: 'git lists no file in it (the folder is ignored or empty)' });
          return;
        }
        resolve({ kind: 'git', files, wholeDirs });
      },
    );
  });
}
