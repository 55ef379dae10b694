/**
 * What a verification tells the record and the maker: the per-test results written beside
 * the attempt, the full test output kept for people, and the feedback the next attempt gets
 * (which never shows what held-out tests printed).
 */
import type { AttemptRecord } from '../runs/record.js';
import { tally, type NamedVerdict } from '../test-results/verdict.js';
import { failureFeedback, formatTestRun, type TestLayer } from './test-layers.js';
import type { Run } from './types.js';
import type { Verification, VerificationResults } from './verify.js';

/** The per-test results: counts in the record, every test in `attempts/<n>/test-results.json`. */
export async function recordResults(
  run: Run,
  n: number,
  results: VerificationResults,
): Promise<Pick<AttemptRecord, 'testReport' | 'namedTests'>> {
  const file = `attempts/${n}/test-results.json`;
  const { reading, named } = results;
  await run.dir.writeFile(
    file,
    `${JSON.stringify(
      {
        ...(reading.ok ? { tests: reading.report.tests } : { refused: reading.reason, tests: [] }),
        ...(named ? { named } : {}),
        exitCode: results.exitCode,
      },
      null,
      2,
    )}\n`,
  );
  return {
    testReport: reading.ok
      ? { status: 'read', counts: reading.report.counts, file }
      : { status: 'refused', reason: reading.reason, file },
    ...(named
      ? {
          namedTests: {
            verdict: named.verdict,
            exitCode: results.exitCode,
            failToPass: tally(named.failToPass),
            passToPass: tally(named.passToPass),
            quarantined: named.quarantined,
          },
        }
      : {}),
  };
}

/**
 * Feedback when the named tests decide: how many did not pass, never their names (the
 * FAIL_TO_PASS tests are held out from the agent).
 */
export function namedFeedback(named: NamedVerdict): string {
  if (named.verdict === 'no-report')
    return `Your change was applied to a fresh copy of the repository, but the tests' report could not be read (${named.reason ?? 'no report'}), so no test counts as passed.`;
  const f = tally(named.failToPass);
  const p = tally(named.passToPass);
  return `Your change was applied to a fresh copy of the repository and tests were run that you may not see: ${f.total - f.passed} of ${f.total} tests that must start passing did not pass, and ${p.total - p.passed} of ${p.total} tests that passed before no longer pass. Read the ticket again and fix the behaviour it describes.`;
}

/**
 * What the maker is told about failing tests. With held-out tests, only what the visible
 * tests alone printed, and the fact that held-out tests failed: never the output of a run
 * that included them (their file names, assertions and expected values).
 */
export function testFeedback(
  verification: Verification,
  plan: { readonly layers: readonly TestLayer[]; readonly heldOut: readonly string[] },
  bytes: number,
): string {
  if (verification.heldOut === 'failed') return HELD_OUT_FAILED;
  if (plan.heldOut.length === 0) return failureFeedback(verification.tests, bytes, plan.layers.length);
  const visible = verification.visible;
  const shown = visible && !visible.passed ? failureFeedback(visible, bytes, plan.layers.length) : '';
  return `${shown || 'Your change was applied to a fresh copy of the repository and the tests failed.'}\n${HELD_OUT_ALSO}`;
}

const HELD_OUT_FAILED =
  'Your change was applied to a fresh copy of the repository. The visible tests pass there, but held-out tests that you cannot see failed: the change does not do what the ticket asks in every case. Read the ticket and the business rules again and fix the behaviour, not the visible tests.';
const HELD_OUT_ALSO =
  '(Held-out tests that you cannot see ran too; what they printed is not shown. The output above is of the visible tests alone.)';

/** The record keeps everything, for people: the run with the held-out tests, and the visible one. */
export function formatForRecord(verification: Verification): string {
  const text = formatTestRun(verification.tests);
  const visible = verification.visible
    ? `\n=== the visible tests alone (what the agent was shown)\n${formatTestRun(verification.visible)}`
    : '';
  return verification.heldOut || verification.visible
    ? `${text}\n=== held-out tests: ${verification.heldOut ?? 'ran (the visible tests fail too)'}\n${visible}`
    : text;
}
