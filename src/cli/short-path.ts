import { relative } from 'node:path';

/** Relative when it is below the working directory, else absolute: `../../tmp/x` helps nobody. */
export function shortPath(cwd: string, path: string): string {
  const rel = relative(cwd, path);
  return rel === '' ? '.' : rel.startsWith('..') ? path : rel;
}
