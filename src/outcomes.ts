/**
 * The one vocabulary of how things end. The agent loop, the attempt, the run record, the
 * CLI and the eval reports all use these exact words, so a state is spelled the same way
 * from the moment it happens to the line a person reads (no translation tables).
 */

/**
 * Budgets that end an agent loop early; the same words then name the attempt and the trial.
 * `budget`: the run's cost limit in money was reached (no further model call may start);
 * `timeout` is the attempt's own time limit; `disk-budget`: the sandbox wrote more than its
 * budget and was stopped; `sandbox-stopped`: every process of the sandbox died under the
 * agent (it killed them all, or memory ran out).
 */
const LIMITS = ['max-turns', 'token-budget', 'budget', 'timeout', 'disk-budget', 'sandbox-stopped'] as const;

/** Why an agent loop stopped. */
export const LOOP_STOPS = ['completed', ...LIMITS, 'interrupted'] as const;
export type LoopStop = (typeof LOOP_STOPS)[number];

/**
 * How one attempt ended: `passed` (verified: the tests pass in a fresh sandbox, and the
 * checker approved when review is on), `tests-failed` (verified, the tests fail),
 * `rejected` (the change set broke a rule; nothing was verified), `changes-requested` (the
 * checker asked for changes), `no-changes` (nothing to verify), a limit, `interrupted`,
 * `error` (the harness or the configuration failed, not the agent; never retried), or
 * `infrastructure` (the engine or the model API was unavailable).
 */
export const ATTEMPT_VERDICTS = [
  'passed',
  'tests-failed',
  'rejected',
  'changes-requested',
  'no-changes',
  ...LIMITS,
  'interrupted',
  'error',
  'infrastructure',
] as const;
export type AttemptVerdict = (typeof ATTEMPT_VERDICTS)[number];

/** Run outcomes that say what the harness (not the agent) could not do; never scored. */
const UNSCORED = ['error', 'infrastructure', 'interrupted'] as const;

/**
 * How a run ended. `running` is only ever seen in the record of a run still in progress.
 * `not-applied`: the fix is verified and its patch saved, but it was not written to the host
 * repo (a file it touches changed since the run read it): the agent's work is good, the
 * working tree does not hold it, so a script must not read it as `ready-for-review`.
 */
export const RUN_OUTCOMES = [
  'ready-for-review',
  'not-applied',
  'nothing-to-fix',
  'failed',
  'rejected',
  'not-approved',
  'timeout',
  'budget',
  ...UNSCORED,
] as const;
export type RunOutcome = (typeof RUN_OUTCOMES)[number];
export type RunState = RunOutcome | 'running';

/**
 * How an eval trial is counted: the run's outcome, except that `failed` says which way the
 * last attempt failed (a trial is one run, so its category is always one of these words).
 */
export const TRIAL_CATEGORIES = [
  'ready-for-review',
  'nothing-to-fix',
  'tests-failed',
  'rejected',
  'not-approved',
  'no-changes',
  ...LIMITS,
  ...UNSCORED,
] as const;
export type TrialCategory = (typeof TRIAL_CATEGORIES)[number];

/** The category a trial passes with. */
export const PASSING_CATEGORY: TrialCategory = 'ready-for-review';

/**
 * Categories that say nothing about the agent: reported, kept out of the pass-rate
 * denominator, and they make an eval exit non-zero because it could not score them.
 */
export const UNSCORED_CATEGORIES: ReadonlySet<TrialCategory> = new Set<TrialCategory>(UNSCORED);

/** The trial category of a finished run. */
export function categoryOf(outcome: RunOutcome, lastVerdict: AttemptVerdict | undefined): TrialCategory {
  // A trial never writes to a host repo; were one to, its verified fix is still a pass.
  if (outcome === 'not-applied') return PASSING_CATEGORY;
  if (outcome !== 'failed') return outcome;
  switch (lastVerdict) {
    case 'no-changes':
    case 'max-turns':
    case 'token-budget':
    case 'budget':
    case 'timeout':
    case 'disk-budget':
    case 'sandbox-stopped':
    case 'rejected':
      return lastVerdict;
    default:
      return 'tests-failed';
  }
}

/** The attempt verdict for a loop that stopped without leaving a change to verify. */
export function verdictForEmptyLoop(stop: LoopStop): AttemptVerdict {
  switch (stop) {
    case 'max-turns':
    case 'token-budget':
    case 'budget':
    case 'timeout':
    case 'disk-budget':
    case 'sandbox-stopped':
    case 'interrupted':
      return stop;
    case 'completed':
      return 'no-changes';
  }
}

/**
 * One test case as its runner's report said it ended: `passed`, `failed` (a failure or an
 * error element), `skipped`; `missing` is a test a task names that the report does not hold.
 * A task that requires a test counts only `passed` as passing.
 */
export const TEST_STATUSES = ['passed', 'failed', 'skipped', 'missing'] as const;
export type TestStatus = (typeof TEST_STATUSES)[number];

/**
 * Where a test run's per-test results are read from: a JUnit report file the test command
 * writes (`junit`), or the console output of one of these runners (`test-results/test-log.ts`),
 * for repos that write no report. One list, so the catalog, the parsers and the instance
 * suites spell the runners alike.
 */
export const TEST_LOG_FORMATS = ['pytest', 'unittest', 'vitest', 'jest', 'mocha'] as const;
export type TestLogFormat = (typeof TEST_LOG_FORMATS)[number];

/**
 * How a task with named tests (SWE-bench's FAIL_TO_PASS and PASS_TO_PASS) came out:
 * `resolved` when every named test passed, `unresolved` otherwise, `no-report` when the
 * report could not be read or was refused (then nothing named can count as passed).
 */
export const TEST_VERDICTS = ['resolved', 'unresolved', 'no-report'] as const;
export type TestVerdict = (typeof TEST_VERDICTS)[number];
