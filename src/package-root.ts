import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cachedRoot: string | undefined;

/** The harness's own folder (holds `images/` and the default `Dockerfile.sandbox`), from src/ or dist/. */
export function packageRoot(): string {
  if (cachedRoot) return cachedRoot;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'sandbox-harness') {
          cachedRoot = dir;
          return dir;
        }
      } catch {
        // not ours; keep climbing
      }
    }
    const parent = dirname(dir);
    if (parent === dir)
      throw new Error('cannot find the sandbox-harness package root from ' + import.meta.url);
    dir = parent;
  }
}
