/**
 * Before any test file: make sure `dist/` is current, because the end-to-end tests run the
 * built CLI the way users do. Docker itself is ensured by `scripts/setup.sh` (npm's
 * `pretest`) and checked by the Docker test files, which fail, never skip, without it.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : statSync(full).mtimeMs);
  }
  return newest;
}

export default function setup(): void {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  let built = 0;
  try {
    built = statSync(join(root, 'dist', 'main.js')).mtimeMs;
  } catch {
    built = 0;
  }
  if (built < newestMtime(join(root, 'src'))) {
    try {
      execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
    } catch {
      // Unit tests do not need dist/; the end-to-end tests will fail on the stale build,
      // and `npm run typecheck` names the compile errors.
      process.stderr.write('\nglobal setup: `tsc -p tsconfig.build.json` failed; dist/ is stale\n\n');
    }
  }
}
