import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

/** The package root: one level above `src/` (tests, tsx) or `dist/` (built). */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

let cached: string | undefined;

export function harnessVersion(): string {
  if (cached === undefined) {
    try {
      cached = (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string })
        .version;
    } catch {
      cached = '0.0.0-unknown';
    }
  }
  return cached;
}
