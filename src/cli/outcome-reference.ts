/**
 * The outcomes reference for docs/outcomes.md: every run outcome with the exit code
 * `exitCodeForRun` gives it and how an eval counts it, from the vocabulary itself, so the page
 * cannot list an outcome that does not exist or an exit code the CLI does not return.
 * `npm run schema` writes it; a unit test fails when it is out of date.
 */
import {
  ATTEMPT_VERDICTS,
  categoryOf,
  LOOP_STOPS,
  PASSING_CATEGORY,
  RUN_OUTCOMES,
  TRIAL_CATEGORIES,
  UNSCORED_CATEGORIES,
  type RunOutcome,
} from '../outcomes.js';
import { exitCodeForRun } from './exit-codes.js';

/** What each outcome means for the person who reads it (a new outcome is a type error here). */
const MEANING: Record<RunOutcome, string> = {
  'ready-for-review': 'a verified fix, written to the working tree (or saved, with `--no-apply`)',
  'not-applied':
    'a verified fix that was not written: a file it touches changed since the run read it; the patch is saved, `sandbox-harness apply <run>` writes it later',
  'nothing-to-fix': 'the tests already passed on the untouched repo (`--force` runs anyway)',
  failed: 'no attempt was verified: the tests never passed, or the agent made no change',
  rejected: 'the gate refused the last change (a path outside `editableFiles`, a protected file, a limit)',
  'not-approved': 'verified, but the independent checker did not approve within `maxRounds`',
  timeout: "the run's time limit",
  budget: "the run's cost limit in money was reached before a verified fix",
  error:
    'the run could not be judged: a configuration problem (a broken test command, a cassette that ran out) or, with exit 70, a fault of sandbox-harness',
  infrastructure: 'the Docker engine or the model API was unavailable',
  interrupted: 'Ctrl-C (or SIGTERM); the host repo is left as it was',
};

const cell = (text: string): string => text.replace(/\|/g, '\\|');

export function outcomesReferenceMarkdown(): string {
  const rows = RUN_OUTCOMES.map((outcome) => {
    const exit = exitCodeForRun({ outcome });
    const internal = outcome === 'error' ? `${exit} (70)` : String(exit);
    const category = categoryOf(outcome, undefined);
    const counted = UNSCORED_CATEGORIES.has(category)
      ? 'not scored'
      : category === PASSING_CATEGORY
        ? 'pass'
        : 'fail';
    return `| \`${outcome}\` | ${internal} | ${counted} | ${cell(MEANING[outcome])} |`;
  });
  const list = (values: readonly string[]): string => values.map((v) => `\`${v}\``).join(', ');
  return [
    '| outcome | exit | in an eval | means |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
    `An agent loop stops with one of: ${list(LOOP_STOPS)}.`,
    '',
    `An attempt ends as one of: ${list(ATTEMPT_VERDICTS)}.`,
    '',
    `An eval trial is counted in one category: ${list(TRIAL_CATEGORIES)} (the run's outcome, except that \`failed\` says how its last attempt failed).`,
  ].join('\n');
}
