/**
 * Tasks refused before any trial: a repo the source could not make a working copy of, a
 * catalog that does not load, an image that is missing or cannot be built. One task's refusal
 * is that task's `error`, with the reason, in every table; the suite's other tasks run. What
 * says nothing about a task (an engine that does not answer, Ctrl-C, a harness bug) still
 * stops the eval.
 */
import { ConfigError, HarnessError, ImageError } from '../errors.js';
import type { TrialCategory } from '../outcomes.js';
import { resultWithoutRun } from './trial-try.js';
import type { TrialResult, TrialRunner, TrialSpec } from './types.js';

/** Task id to the reason its trials are errors (and the error, when one was thrown here). */
export type Refusals = Map<string, { reason: string; error?: unknown }>;

/**
 * Task id to the result its trials have without running: another agent's empty patch is
 * `no-changes` as it stands, and SWE-bench never runs one either.
 */
export type Settled = Map<string, { category: TrialCategory; reason: string; model?: string | undefined }>;

/**
 * When every task of the suite is refused there is nothing to run: the first refusal is the
 * eval's own error, as it was before one task's refusal stopped being everyone's.
 */
export function assertSomethingRuns(refused: Refusals, tasks: number): void {
  if (tasks === 0 || refused.size < tasks) return;
  const first = [...refused.values()].find((r) => r.error !== undefined);
  if (first) throw first.error;
  throw new ConfigError(`every task is refused: ${[...refused.values()].map((r) => r.reason).join('; ')}`);
}

/**
 * The reason `error` refuses one task (its message, and its hint), or undefined when it is not
 * the task's own: configuration errors always are, an image's errors only while that task's
 * image is made (`image`), since the engine answered the ping before it.
 */
export function taskRefusal(error: unknown, options: { image?: boolean } = {}): string | undefined {
  if (!(error instanceof HarnessError)) return undefined;
  const own = error.category === 'config' || (options.image === true && error instanceof ImageError);
  if (!own) return undefined;
  return error.hint ? `${error.message} (hint: ${error.hint})` : error.message;
}

/**
 * The runner, except that a refused task's trial is an `error` with its reason, and a settled
 * task's trial its settled result: both run nowhere.
 */
export function refusingRunner(
  refused: Refusals,
  runner: TrialRunner,
  settled: Settled = new Map(),
): TrialRunner {
  return async (spec, context) => {
    const known = settled.get(spec.taskId);
    // The reason is the source's to report (an empty prediction is in its section), not an error.
    if (known) return notRun(spec, known.category, known.model !== undefined ? { model: known.model } : {});
    const reason = refused.get(spec.taskId)?.reason;
    if (reason === undefined) return runner(spec, context);
    return notRun(spec, 'error', { error: reason });
  };
}

/** A trial's result without running it: no turns, no tokens, no time. */
function notRun(
  spec: Pick<TrialSpec, 'taskId' | 'trial'>,
  category: TrialCategory,
  extra: Pick<TrialResult, 'model' | 'error'>,
): TrialResult {
  return { ...resultWithoutRun(spec, category, Date.now()), ...extra };
}
