/**
 * Root's look after the freeze: whether any process of the sandbox user still runs. It runs
 * as root, so no process of that user can trace, signal or fool it, and its word (not the
 * freeze script's, which runs as the sandbox user) decides whether a sandbox is frozen. It can
 * be started ahead and kept waiting for its word (`watchSurvivors`), so a freeze does not
 * wait for its exec.
 */
import { standbyScript, type ScriptResult, type StandbyScript } from './exec.js';
import { SURVIVORS_SCRIPT } from './scripts.js';
import type { Transport } from './transport.js';

/** How long (10 ms tries) the look beside the freeze waits for the sandbox user's processes to go. */
export const SURVIVOR_WATCH_TRIES = 1000;
/** Root's look runs as root: no process of the sandbox user can trace or signal it. */
export const SURVIVORS_OPTIONS = { maxStdoutBytes: 4096, cwd: '/', timeoutMs: 30_000, user: 'root' } as const;

/** The look, started now and waiting for its word; undefined when it could not be started. */
export function watchSurvivors(transport: Transport): Promise<StandbyScript | undefined> {
  return standbyScript(transport, SURVIVORS_SCRIPT, [String(SURVIVOR_WATCH_TRIES)], SURVIVORS_OPTIONS).catch(
    () => undefined,
  );
}

/** Undefined when the look found no process of the sandbox user; else what runs, or why it cannot tell. */
export function survivorsVerdict(check: ScriptResult): string | undefined {
  if (check.exitCode === 0 && /^clear \d+$/m.test(check.stdout.toString('utf8'))) return undefined;
  const listed = check.stdout.toString('utf8').trim().split('\n').slice(0, 5).join('; ');
  return `exit ${check.exitCode}: ${check.stderr.trim()}${listed ? ` (${listed})` : ''}`.slice(0, 500);
}
