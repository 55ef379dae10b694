/**
 * Which recipe a repo image is built with and what the image is called: the same for every
 * backend (a node of a cluster builds the same tag from the same context as the local engine),
 * so a content hash names one image wherever it was built.
 */
import { lstat } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { packageRoot } from '../package-root.js';

/**
 * The name a repo image goes by: the service's (`name`, the catalog's), else the repo's folder.
 * Docker repository names allow lowercase letters, digits and separators only.
 */
export function repoSlug(repoDir: string, name?: string): string {
  const slug = (name ?? basename(resolve(repoDir)))
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
    .replace(/-+$/g, '');
  return slug || 'repo';
}

export function repoImageTag(repoDir: string, contentHash: string, name?: string): string {
  return `sandbox-harness/repo-${repoSlug(repoDir, name)}:${contentHash.slice(0, 16)}`;
}

/** The harness's own per-project recipe, used when a repo has no Dockerfile.sandbox. */
export function defaultRecipe(): string {
  return join(packageRoot(), 'Dockerfile.sandbox');
}

export async function resolveDockerfile(
  repoDir: string,
  dockerfile?: string,
  root?: string,
): Promise<string> {
  if (dockerfile) return resolve(root ?? repoDir, dockerfile);
  const own = join(repoDir, 'Dockerfile.sandbox');
  const st = await lstat(own).catch(() => undefined);
  if (st && (st.isFile() || st.isSymbolicLink())) return own;
  return defaultRecipe();
}
