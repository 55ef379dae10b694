/**
 * Before any test file: make sure `dist/` is current, because the end-to-end tests run the
 * built CLI the way users do. A build that fails stops the run: going on would test the
 * last good build and report its results as this code's. Docker itself is ensured by
 * `scripts/setup.sh` (npm's `pretest`) and checked by the Docker test files, which fail,
 * never skip, without it. After the last file: stop the engines the run's files shared.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/**
 * Compiles `root` with its `tsconfig.build.json` when a file under `src/` is newer than
 * `dist/main.js`; throws with the compiler's messages when that fails. `tscJs` is the
 * compiler to use (this checkout's own, never one fetched by npx).
 */
export function ensureBuilt(
  root: string,
  tscJs = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
): void {
  let built = 0;
  try {
    built = statSync(join(root, 'dist', 'main.js')).mtimeMs;
  } catch {
    built = 0;
  }
  if (built >= newestMtime(join(root, 'src'))) return;
  try {
    // --noEmitOnError: a failed build must not leave a new dist/main.js behind, which the
    // next run would take for a current build.
    execFileSync(process.execPath, [tscJs, '-p', join(root, 'tsconfig.build.json'), '--noEmitOnError'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      encoding: 'utf8',
    });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(
      `global setup: \`tsc -p tsconfig.build.json\` failed in ${root}, so dist/ is stale and the ` +
        `end-to-end tests would run old code. Fix these first (\`npm run typecheck\` shows them too):\n` +
        `${stdout ?? ''}${stderr ?? ''}`,
    );
  }
  // What `npm run build` does after tsc: the CLI is run as ./dist/main.js and through `npm link`.
  chmodSync(join(root, 'dist', 'main.js'), 0o755);
}

export default function setup(): () => Promise<void> {
  ensureBuilt(ROOT);
  // The run's name for engines its files share (tests/helpers/engines.ts `sharedEngine`): this
  // process, which outlives every worker, owns them; workers inherit the variable.
  const run = process.pid;
  process.env.SANDBOX_HARNESS_TEST_RUN = String(run);
  return async () => {
    // Imported only now: a run that never shared an engine loads no Docker code here.
    const { stopSharedEngines } = await import('./helpers/engines.js');
    await stopSharedEngines(run);
  };
}
