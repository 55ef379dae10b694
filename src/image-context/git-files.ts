/**
 * Which files of a folder git considers part of the project: tracked files plus untracked
 * files that no ignore rule matches (`git ls-files --cached --others --exclude-standard`).
 * The build context of a repo inside a git work tree is limited to these (plus dependency
 * folders), so a `.gitignore`d `secrets/` or `terraform.tfstate` never reaches an image.
 *
 * The repo is not trusted: git runs through `host-git/`, which reads none of the repo's
 * configuration (its `core.fsmonitor` or anything else it names never runs) and none of the
 * caller's `GIT_*` variables; the repo's index, its `info/exclude` and the user's global
 * ignore file are all it uses. A repo owned by someone else is listed all the same: nothing
 * of it runs, and the output is only ever used to leave files out, never to add one.
 */
import { ImageError } from '../errors.js';
import { listFiles } from '../host-git/commands.js';

export type GitListing =
  | {
      kind: 'git';
      /** Repo-relative posix paths of files and links git lists under the folder. */
      files: Set<string>;
      /** Folders git lists as one entry (nested repositories, submodules): included whole. */
      wholeDirs: Set<string>;
    }
  | { kind: 'none'; reason: string };

/** Lists `dir` with git's rules, or says why git's rules do not apply. */
export async function gitListing(dir: string, options: { gitBinary?: string } = {}): Promise<GitListing> {
  const listing = await listFiles(dir, {
    error: (message, hint) => new ImageError(message, { hint }),
    ...options,
  });
  if (listing.kind === 'none') {
    return {
      kind: 'none',
      reason:
        listing.reason === 'not-installed'
          ? 'git is not installed, so .gitignore rules cannot be applied'
          : 'not inside a git work tree',
    };
  }
  const files = new Set<string>();
  const wholeDirs = new Set<string>();
  for (const entry of listing.entries) {
    if (entry.endsWith('/')) wholeDirs.add(entry.slice(0, -1));
    else files.add(entry);
  }
  if (files.size === 0 && wholeDirs.size === 0) {
    // The folder is ignored by an enclosing repo, or that repo knows none of its files.
    return { kind: 'none', reason: 'git lists no file in it (the folder is ignored or empty)' };
  }
  return { kind: 'git', files, wholeDirs };
}
