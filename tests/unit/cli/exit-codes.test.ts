import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { EXIT_CODES, exitCodeForRun } from '../../../src/cli/exit-codes.js';
import { RUN_OUTCOMES, type RunOutcome } from '../../../src/outcomes.js';

// One rule: the exit code follows the run's outcome, and the README says the same.
const EXPECTED: Record<RunOutcome, number> = {
  'ready-for-review': 0,
  'nothing-to-fix': 0,
  'not-applied': 4,
  failed: 1,
  rejected: 1,
  'not-approved': 1,
  timeout: 1,
  budget: 1,
  error: 2,
  infrastructure: 3,
  interrupted: 130,
};

/** A failure names the missing sentence, not the whole README. */
function expectIn(text: string, sentence: string): void {
  expect(text.includes(sentence), `README should say: ${sentence}`).toBe(true);
}

describe('exit codes of a run', () => {
  it('follow the outcome alone, for every outcome', () => {
    for (const outcome of RUN_OUTCOMES)
      expect([outcome, exitCodeForRun({ outcome })]).toEqual([outcome, EXPECTED[outcome]]);
    expect(exitCodeForRun({ outcome: 'error', errorCategory: 'internal' })).toBe(EXIT_CODES.internal);
  });

  it('are the ones the README states', async () => {
    const readme = (await readFile(new URL('../../../README.md', import.meta.url), 'utf8')).replace(
      /\s+/g,
      ' ',
    );
    expectIn(readme, '`0` success (`ready-for-review`, `nothing-to-fix`)');
    expectIn(readme, '`1` the task did not succeed (`failed`, `rejected`, `not-approved`, `timeout`');
    expectIn(readme, '`3` infrastructure');
    expectIn(readme, '`4` a verified fix that was not written to the repo (`not-applied`');
    expectIn(readme, '`130` interrupted');
  });
});
