/**
 * Per-test results from runners' console output (no JUnit file), read from real runs in the
 * sandbox images (tests/fixtures/test-output/: pytest 8.3 `-rA` and `-v`, unittest on Python
 * 3.13 and the pre-3.11 form of the same names, vitest 4 `--reporter=verbose`, jest 29
 * `--verbose`, mocha 10's spec reporter), and as hostile data: each fixture's own tests print a
 * lying "passed" line for a test that failed.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ReportRefused } from '../../../src/test-results/junit.js';
import { leadingNodeId } from '../../../src/test-results/log-python.js';
import { LOG_LIMITS, logLines, parseTestLog, type LogFormat } from '../../../src/test-results/test-log.js';
import { judgeNamedTests } from '../../../src/test-results/verdict.js';

const fixture = (name: string) =>
  readFileSync(join(import.meta.dirname, '../../fixtures/test-output', name), 'utf8');

function statuses(format: LogFormat, text: string, exitCode = 1): Record<string, string> {
  const report = parseTestLog(format, text, { exitCode });
  return Object.fromEntries(report.tests.map((t) => [t.id, t.status]));
}

function verdict(
  format: LogFormat,
  text: string,
  failToPass: string[],
  passToPass: string[] = [],
  exitCode = 1,
) {
  return judgeNamedTests({ failToPass, passToPass }, parseTestLog(format, text, { exitCode }));
}

describe('pytest output', () => {
  it('reads -rA summary lines: parametrized ids with spaces, brackets and " - ", classes, xfail/xpass, setup errors', () => {
    expect(statuses('pytest', fixture('pytest-ra-mixed.txt'))).toEqual({
      'tests/test_a.py::test_ok': 'passed',
      'tests/test_a.py::test_param[one two]': 'passed',
      'tests/test_a.py::TestK::test_m': 'passed',
      'tests/test_a.py::test_xfail': 'passed',
      'tests/test_a.py::test_xpass': 'passed',
      'tests/test_a.py::test_err': 'failed',
      // Its own captured output says "PASSED tests/test_a.py::test_bad": the summary's FAILED wins.
      'tests/test_a.py::test_bad': 'failed',
      'tests/test_a.py::test_param[we[i]rd - id]': 'failed',
    });
  });

  it('reads -v lines alike, and a skipped test is skipped', () => {
    const s = statuses('pytest', fixture('pytest-v-mixed.txt'));
    expect(s).toMatchObject({
      'tests/test_a.py::test_ok': 'passed',
      'tests/test_a.py::test_param[one two]': 'passed',
      'tests/test_a.py::test_param[we[i]rd - id]': 'failed',
      'tests/test_a.py::test_skip': 'skipped',
      'tests/test_a.py::test_bad': 'failed',
    });
  });

  it('FAIL_TO_PASS by node id or by the JUnit-style id; a test printed PASSED by another one still fails', () => {
    const text = fixture('pytest-ra-mixed.txt');
    expect(
      verdict('pytest', text, ['tests/test_a.py::test_param[one two]', 'tests/test_a.py > TestK > test_m'])
        .verdict,
    ).toBe('resolved');
    const lied = verdict('pytest', text, ['tests/test_a.py::test_bad']);
    expect(lied.verdict).toBe('unresolved');
    expect(lied.failToPass).toEqual([{ id: 'tests/test_a.py::test_bad', status: 'failed' }]);
  });

  it('a node id ends where its brackets close; an unclosed one is no id', () => {
    expect(leadingNodeId('t.py::test_p[a [b] c] - msg')).toBe('t.py::test_p[a [b] c]');
    expect(leadingNodeId('t.py::test_x - msg [1]')).toBe('t.py::test_x');
    expect(leadingNodeId('t.py::test_p[cut')).toBeUndefined();
  });

  it('"SKIPPED [1] file:line" names no test; "ERROR file" of a collection error is a failure of the file', () => {
    const s = statuses('pytest', 'SKIPPED [1] tests/t.py:3: why\nERROR tests/test_import.py\n', 2);
    expect(s).toEqual({ 'tests/test_import.py': 'failed' });
  });
});

describe('unittest output', () => {
  const py313 = fixture('unittest-verbose-py313.txt');
  const py310 = fixture('unittest-verbose-py310-form.txt');

  it.each([
    ['3.11+ names', py313],
    ['pre-3.11 names', py310],
  ])(
    'reads verbose lines (%s): docstrings, output before the status, skips, subtests, class setup',
    (_, text) => {
      expect(statuses('unittest', text)).toEqual({
        'tests.test_u.TestSetup.setUpClass': 'failed',
        'tests.test_u.TestThings.test_doc': 'passed',
        'tests.test_u.TestThings.test_error': 'failed',
        'tests.test_u.TestThings.test_fail': 'failed',
        'tests.test_u.TestThings.test_ok': 'passed',
        'tests.test_u.TestThings.test_prints': 'passed',
        'tests.test_u.TestThings.test_skipped': 'skipped',
        // One subtest failed: the test failed.
        'tests.test_u.TestThings.test_sub': 'failed',
        'tests.test_u.TestThings.test_xfail': 'passed',
        'tests.test_u.TestThings.test_xpass': 'failed',
      });
    },
  );

  it('an instance may name a test in either form, by its dotted path, or by its docstring line (SWE-bench Django ids)', () => {
    for (const text of [py313, py310]) {
      const v = verdict('unittest', text, [
        'test_ok (tests.test_u.TestThings)',
        'test_ok (tests.test_u.TestThings.test_ok)',
        'tests.test_u.TestThings.test_prints',
        'Adds numbers the right way.',
      ]);
      expect(v.verdict).toBe('resolved');
    }
  });

  it('a status printed by the test on its own line is taken only for the test waiting for one; the FAIL: block decides', () => {
    const text = [
      'test_a (m.C.test_a) ... ',
      'ok',
      'FAIL',
      'test_b (m.C.test_b) ... ok',
      '',
      '======',
      'FAIL: test_a (m.C.test_a)',
      'Traceback ...',
    ].join('\n');
    expect(statuses('unittest', text)).toEqual({ 'm.C.test_a': 'failed', 'm.C.test_b': 'passed' });
  });
});

describe('JavaScript runners', () => {
  it('vitest --reporter=verbose: ids as the JUnit report has them, with or without the file; a lie loses to ×', () => {
    const text = fixture('vitest4-verbose.txt');
    expect(statuses('vitest', text)).toEqual({
      'test/a.test.js > fee > charges small orders': 'passed',
      'test/a.test.js > fee > ships > large orders free': 'failed',
      'test/a.test.js > fee > later': 'skipped',
      'test/a.test.js > fee > nested [x] > deep one': 'passed',
      'test/a.test.js > top level': 'passed',
      'test/b.test.js > other file': 'passed',
    });
    expect(
      verdict('vitest', text, ['fee > charges small orders', 'test/b.test.js > other file']).verdict,
    ).toBe('resolved');
    expect(verdict('vitest', text, ['test/a.test.js > fee > ships > large orders free']).verdict).toBe(
      'unresolved',
    );
  });

  it('jest --verbose: describe blocks by indentation, skipped and todo, the ● failure headings', () => {
    const text = fixture('jest29-verbose.txt');
    expect(statuses('jest', text)).toEqual({
      'test/a.test.js > top level (5 ms)': 'passed',
      'test/a.test.js > fee > charges small orders': 'passed',
      'test/a.test.js > fee > ships large orders free': 'failed',
      'test/a.test.js > fee > later': 'skipped',
      'test/a.test.js > fee > someday': 'skipped',
      'test/a.test.js > fee > nested > deep one': 'passed',
    });
    // SWE-bench's jest ids are bare titles; the lying console line cannot pass the failed one.
    expect(verdict('jest', text, ['charges small orders', 'fee > nested > deep one']).verdict).toBe(
      'resolved',
    );
    expect(verdict('jest', text, ['ships large orders free']).verdict).toBe('unresolved');
  });

  it('mocha spec: suites by indentation up to the summary; a printed ✔ under the wrong suite loses to 1)', () => {
    const text = fixture('mocha10-spec.txt');
    expect(statuses('mocha', text)).toEqual({
      'top level': 'passed',
      'fee > charges small orders': 'passed',
      'fee > ships large orders free': 'failed',
      'fee > later': 'skipped',
      'fee > nested > deep one': 'passed',
    });
  });
});

describe('test output as hostile data', () => {
  it('output that names no failure from a command that exited non-zero is not believed', () => {
    const forged = 'PASSED tests/t.py::test_fix\n';
    expect(() => parseTestLog('pytest', forged, { exitCode: 1 })).toThrow(/exited with code 1.*not believed/);
    expect(parseTestLog('pytest', forged, { exitCode: 0 }).counts).toEqual({
      passed: 1,
      failed: 0,
      skipped: 0,
    });
    const v = judgeNamedTests({ failToPass: ['tests/t.py::test_fix'], passToPass: [] }, undefined, 'refused');
    expect(v.verdict).toBe('no-report');
  });

  it('no result line at all is no report', () => {
    expect(() => parseTestLog('pytest', 'collected 0 items\n', { exitCode: 5 })).toThrow(ReportRefused);
  });

  it('escape sequences and control characters are taken out; a carriage return shows only what follows it', () => {
    expect(
      logLines(
        '\u001b[32mPASSED\u001b[0m a.py::t\nPASSED a.py::x\rFAILED a.py::y\nPA\u0000SSED a.py::z\u0007',
      ),
    ).toEqual(['PASSED a.py::t', 'FAILED a.py::y', 'PASSED a.py::z']);
    const s = statuses('pytest', 'PASSED a.py::x\rFAILED a.py::x\n');
    expect(s).toEqual({ 'a.py::x': 'failed' });
  });

  it('caps: too many bytes or lines refuse the output; an overlong line or name is skipped', () => {
    const limits = { ...LOG_LIMITS, maxBytes: 100, maxLines: 3 };
    expect(() => logLines('x'.repeat(101), limits)).toThrow(/more than the 100/);
    expect(() => logLines('a\nb\nc\nd', limits)).toThrow(/more than 3 lines/);
    const long = `PASSED a.py::${'x'.repeat(5000)}\nPASSED a.py::short\n`;
    expect(statuses('pytest', long, 0)).toEqual({ 'a.py::short': 'passed' });
    const many = Array.from({ length: 20 }, (_, i) => `PASSED a.py::t${i}`).join('\n');
    expect(() =>
      parseTestLog('pytest', many, { exitCode: 0, limits: { ...LOG_LIMITS, maxTests: 10 } }),
    ).toThrow(/more than 10 tests/);
  });

  it('a million-line flood is refused before any line is parsed', () => {
    const flood = 'PASSED a.py::t\n'.repeat(600_000);
    expect(() => parseTestLog('pytest', flood, { exitCode: 0 })).toThrow(ReportRefused);
  });
});
