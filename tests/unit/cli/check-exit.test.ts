import { describe, expect, it } from 'vitest';
import { EXIT_CODES, exitCodeForCheck } from '../../../src/cli/exit-codes.js';

describe('check exit codes', () => {
  it('0 when the tests do what was expected, 1 when not, 2 when the command did not run the tests', () => {
    expect(exitCodeForCheck({ verdict: 'failing', asExpected: true })).toBe(EXIT_CODES.ok);
    expect(exitCodeForCheck({ verdict: 'passing', asExpected: false })).toBe(EXIT_CODES.taskFailed);
    expect(exitCodeForCheck({ verdict: 'passing', asExpected: true })).toBe(EXIT_CODES.ok);
    // Broken is the configuration's fault whatever was expected: where fix stops with exit 2.
    expect(exitCodeForCheck({ verdict: 'broken', asExpected: true })).toBe(EXIT_CODES.usage);
  });
});
