/**
 * The one place that decides exit codes: of an error that reached the CLI, of a run's
 * outcome, and of an eval. `src/main.ts` is the only caller of `process.exit`; commands
 * return what these functions say.
 */
import { HarnessError } from '../errors.js';
import type { RunOutcome } from '../outcomes.js';

export const EXIT_CODES = {
  ok: 0,
  /** The task did not succeed: failed, rejected, not approved, timed out, a regression. */
  taskFailed: 1,
  /** Bad usage, or an invalid catalog, suite, ticket or cassette. */
  usage: 2,
  /** The Docker engine or the model API was unavailable. */
  infrastructure: 3,
  /**
   * A verified fix that was not written to the host repo (`not-applied`: a file it touches
   * changed meanwhile). Not 0 (the working tree does not hold the fix, so CI must not go on
   * as if it did) and not 1 (the agent's work passed; `sandbox-harness apply <run>` writes it
   * once the repo is back as the run saw it).
   */
  notApplied: 4,
  /** A bug in sandbox-harness. */
  internal: 70,
  interrupted: 130,
} as const;

export function exitCodeForError(error: unknown): number {
  if (!(error instanceof HarnessError)) return EXIT_CODES.internal;
  switch (error.category) {
    case 'usage':
    case 'config':
      return EXIT_CODES.usage;
    case 'infrastructure':
      return EXIT_CODES.infrastructure;
    case 'interrupted':
      return EXIT_CODES.interrupted;
    case 'limit':
      return EXIT_CODES.taskFailed;
    case 'internal':
      return EXIT_CODES.internal;
  }
}

export interface RunEnding {
  outcome: RunOutcome;
  /** For `error` outcomes: the category of the error that ended the run. */
  errorCategory?: HarnessError['category'];
}

export function exitCodeForRun(run: RunEnding): number {
  switch (run.outcome) {
    case 'ready-for-review':
    case 'nothing-to-fix':
      return EXIT_CODES.ok;
    case 'not-applied':
      return EXIT_CODES.notApplied;
    case 'failed':
    case 'rejected':
    case 'not-approved':
    case 'timeout':
    case 'budget':
      return EXIT_CODES.taskFailed;
    case 'infrastructure':
      return EXIT_CODES.infrastructure;
    case 'interrupted':
      return EXIT_CODES.interrupted;
    case 'error':
      return run.errorCategory === 'internal' ? EXIT_CODES.internal : EXIT_CODES.usage;
  }
}

export interface EvalEnding {
  interrupted: boolean;
  /** Trials that could not be scored, by category. */
  unscored: { infrastructure: number; error: number };
  regression: boolean;
}

/**
 * An eval that could not score every trial exits non-zero even when every scored trial
 * passed: a headline of "100%" over half the trials must not read as success.
 */
export function exitCodeForEval(ending: EvalEnding): number {
  if (ending.interrupted) return EXIT_CODES.interrupted;
  if (ending.unscored.infrastructure > 0) return EXIT_CODES.infrastructure;
  if (ending.unscored.error > 0) return EXIT_CODES.usage;
  return ending.regression ? EXIT_CODES.taskFailed : EXIT_CODES.ok;
}

/**
 * A backlog: 0 when every item is passing; 1 when one is blocked, or items are left (a
 * `work` stopped at its first blocked item).
 */
export function exitCodeForWork(statuses: readonly string[]): number {
  return statuses.every((s) => s === 'passing') ? EXIT_CODES.ok : EXIT_CODES.taskFailed;
}

/**
 * `work --status`: 1 only when an item is blocked (it failed); items pending or left running
 * by a killed `work` are work still to do, not a failure, so a script may poll the status.
 */
export function exitCodeForWorkStatus(statuses: readonly string[]): number {
  return statuses.some((s) => s === 'blocked') ? EXIT_CODES.taskFailed : EXIT_CODES.ok;
}

export interface CheckEnding {
  verdict: 'broken' | 'failing' | 'passing';
  /** The tests did what was asked of them (`--expect`): fail for a ticket, by default. */
  asExpected: boolean;
}

/**
 * `check`: 0 when the test command runs and the tests do what was expected of them; 1 when
 * they run but do not (a ticket's tests that already pass: nothing to fix); 2 when the test
 * command itself did not run the tests, exactly where `fix` would stop with exit 2.
 */
export function exitCodeForCheck(ending: CheckEnding): number {
  if (ending.verdict === 'broken') return EXIT_CODES.usage;
  return ending.asExpected ? EXIT_CODES.ok : EXIT_CODES.taskFailed;
}
