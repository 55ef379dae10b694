/**
 * A test repo's node_modules without the network: the packages a runner needs (and what they
 * depend on, as installed here) copied out of this checkout's own node_modules.
 */
import { cp, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..', 'node_modules');

export async function copyPackages(names: readonly string[], dest: string): Promise<string[]> {
  const seen = new Set<string>();
  const queue = [...names];
  while (queue.length > 0) {
    const name = queue.shift()!;
    if (seen.has(name)) continue;
    const dir = join(ROOT, name);
    if (!existsSync(dir)) continue; // an optional dependency for another platform
    seen.add(name);
    const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as Record<
      string,
      Record<string, string> | undefined
    >;
    for (const field of ['dependencies', 'optionalDependencies'])
      queue.push(...Object.keys(pkg[field] ?? {}));
  }
  for (const name of seen)
    await cp(join(ROOT, name), join(dest, 'node_modules', name), { recursive: true, verbatimSymlinks: true });
  if (existsSync(join(ROOT, '.bin', 'vitest')) && seen.has('vitest')) {
    // The runner's bin as npm would link it.
    const { symlink, mkdir } = await import('node:fs/promises');
    await mkdir(join(dest, 'node_modules', '.bin'), { recursive: true });
    await symlink('../vitest/vitest.mjs', join(dest, 'node_modules', '.bin', 'vitest'));
  }
  return [...seen];
}
