/**
 * One try of a trial on one slot: the runner called with a signal that Ctrl-C, a failed
 * write, the trial's time budget and its engine's loss each abort, and whatever it returns
 * or throws turned into a result whose category names the real cause.
 */
import { HarnessError, RunTimeout, errorMessage } from '../errors.js';
import { PASSING_CATEGORY } from '../outcomes.js';
import type { TrialSlot } from './trial-placement.js';
import type { TrialCategory, TrialResult, TrialRunner, TrialSpec } from './types.js';

export async function runOnce(
  runner: TrialRunner,
  spec: TrialSpec,
  userSignal: AbortSignal,
  internalSignal: AbortSignal,
  timeoutSec: number | undefined,
  slot: TrialSlot,
  graceMs: number,
): Promise<TrialResult> {
  const controller = new AbortController();
  const signal = AbortSignal.any([userSignal, internalSignal, controller.signal, slot.lost]);
  let timedOut = false;
  const timer =
    timeoutSec === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          controller.abort(new RunTimeout(`the trial exceeded its ${timeoutSec}s budget`));
        }, timeoutSec * 1000);
  const started = Date.now();
  let result: TrialResult;
  try {
    const work = runner(spec, { signal, engine: slot.engine });
    result = normalise(await giveUpAfterLost(work, slot.lost, graceMs), spec, slot.engine);
  } catch (error) {
    const category: TrialCategory =
      timedOut || error instanceof RunTimeout
        ? 'timeout'
        : error instanceof HarnessError && error.category === 'interrupted'
          ? 'interrupted'
          : error instanceof HarnessError && error.category === 'infrastructure'
            ? 'infrastructure'
            : 'error';
    result = failedResult(spec, category, started, describeError(error), slot.engine);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }

  // Once we pulled the plug, a runner's "infrastructure" is most likely its own reaction to
  // the abort (a killed exec, a cancelled request); name the real cause instead.
  const abortLike =
    result.category === 'infrastructure' || result.category === 'interrupted' || result.category === 'error';
  if (abortLike && (userSignal.aborted || internalSignal.aborted)) {
    return { ...result, outcome: 'failed', category: 'interrupted' };
  }
  if (abortLike && slot.lost.aborted) {
    return {
      ...result,
      outcome: 'failed',
      category: 'infrastructure',
      error: describeError(slot.lost.reason),
    };
  }
  if (abortLike && timedOut) {
    return {
      ...result,
      outcome: 'failed',
      category: 'timeout',
      error: result.error ?? `trial exceeded its ${timeoutSec}s budget`,
    };
  }
  return result;
}

/**
 * The trial's own result, unless its engine was found lost and it has not returned `graceMs`
 * later: then the engine's loss. The trial is left to finish (or not) on its own.
 */
function giveUpAfterLost<T>(work: Promise<T>, lost: AbortSignal, graceMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const onLost = () => {
      timer = setTimeout(() => reject(lost.reason), graceMs);
      timer.unref();
    };
    if (lost.aborted) onLost();
    else lost.addEventListener('abort', onLost, { once: true });
    work.then(resolve, reject).finally(() => {
      if (timer !== undefined) clearTimeout(timer);
      lost.removeEventListener('abort', onLost);
    });
  });
}

/**
 * The scheduler's counts must not depend on a runner filling in ids and outcome consistently,
 * and the engine is where the scheduler placed the trial.
 */
function normalise(result: TrialResult, spec: TrialSpec, engine: string): TrialResult {
  return {
    ...result,
    taskId: spec.taskId,
    trial: spec.trial,
    outcome: result.category === PASSING_CATEGORY ? 'passed' : 'failed',
    // The slot's engine, unless the backend placed the trial itself and said where (a Slurm node).
    engine: result.engine ?? engine,
  };
}

function failedResult(
  spec: TrialSpec,
  category: TrialCategory,
  started: number,
  error: string,
  engine: string,
): TrialResult {
  return { ...resultWithoutRun(spec, category, started, Date.now()), error, engine };
}

/** A trial that ran nothing of the agent's: no turns, no tokens; its time is the try's (0 when never tried). */
export function resultWithoutRun(
  spec: Pick<TrialSpec, 'taskId' | 'trial'>,
  category: TrialCategory,
  started: number,
  finished = started,
): TrialResult {
  return {
    taskId: spec.taskId,
    trial: spec.trial,
    outcome: 'failed',
    category,
    turns: 0,
    inputTokens: 0,
    outputTokens: 0,
    durationMs: finished - started,
    startedAt: new Date(started).toISOString(),
    finishedAt: new Date(finished).toISOString(),
  };
}

function describeError(error: unknown): string {
  return error instanceof HarnessError ? `${error.code}: ${error.message}` : errorMessage(error);
}
