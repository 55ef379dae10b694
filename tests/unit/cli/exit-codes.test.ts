import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { EXIT_CODES, exitCodeForRun } from '../../../src/cli/exit-codes.js';
import { RUN_OUTCOMES, type RunOutcome } from '../../../src/outcomes.js';

// One rule: the exit code follows the run's outcome, and docs/outcomes.md says the same.
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

/** A failure names the missing sentence, not the whole page. */
function expectIn(text: string, sentence: string): void {
  expect(text.includes(sentence), `docs/outcomes.md should say: ${sentence}`).toBe(true);
}

describe('exit codes of a run', () => {
  it('follow the outcome alone, for every outcome', () => {
    for (const outcome of RUN_OUTCOMES)
      expect([outcome, exitCodeForRun({ outcome })]).toEqual([outcome, EXPECTED[outcome]]);
    expect(exitCodeForRun({ outcome: 'error', errorCategory: 'internal' })).toBe(EXIT_CODES.internal);
  });

  it('are the ones docs/outcomes.md states', async () => {
    const page = (await readFile(new URL('../../../docs/outcomes.md', import.meta.url), 'utf8')).replace(
      /\s+/g,
      ' ',
    );
    expectIn(page, '`0` success (`ready-for-review`, `nothing-to-fix`)');
    expectIn(page, '`1` the task did not succeed (`failed`, `rejected`, `not-approved`, `timeout`');
    expectIn(page, '`3` infrastructure');
    expectIn(page, '`4` a verified fix that was not written to the repo (`not-applied`');
    expectIn(page, '`130` interrupted');
  });
});
