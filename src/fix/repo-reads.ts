/** What the fix flow reads of the host repo, never through a link, and which files are held out. */
import picomatch from 'picomatch';
import { readRepoFileNoFollow } from '../changes/host-read.js';
import { readRepoFile } from '../repo-files.js';
import type { PristineSource } from '../changes/pristine.js';
import type { WorkspaceTree } from '../sandbox/types.js';

/**
 * The repo's AGENTS.md for the prompt, when it has one. A link out of the repo (to a host
 * credential, say) is a ConfigError naming it, not a silently missing file.
 */
export async function readAgentsMd(repoDir: string): Promise<string | undefined> {
  const file = await readRepoFile(repoDir, 'AGENTS.md', 'AGENTS.md', {
    optional: true,
    maxBytes: 1024 * 1024,
  });
  return file?.toString('utf8');
}

/** The bytes the sandbox started from, taken from the host repo (the caller checks their hash). */
export function pristineFromHost(repoDir: string): PristineSource {
  return { read: (path) => readRepoFileNoFollow(repoDir, path, 16 * 1024 * 1024) };
}

/** Workspace files the catalog's `agent.heldOutTests` globs name. */
export function heldOutPaths(tree: WorkspaceTree, globs: readonly string[]): string[] {
  if (globs.length === 0) return [];
  const matches = picomatch([...globs], { dot: true });
  return [...tree.entries()]
    .filter(([path, entry]) => entry.type === 'file' && matches(path))
    .map(([path]) => path)
    .sort();
}
