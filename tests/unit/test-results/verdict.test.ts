import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseJunit } from '../../../src/test-results/junit.js';
import { judgeNamedTests } from '../../../src/test-results/verdict.js';

const report = (name: string) =>
  parseJunit(readFileSync(join(import.meta.dirname, '../../fixtures/junit', name)), { root: '/workspace' });

describe('the SWE-bench verdict from named tests', () => {
  it('pytest node ids (file::class::name) match the report', () => {
    const v = judgeNamedTests(
      {
        failToPass: ['tests/test_math.py::TestAdd::test_adds', 'tests/test_math.py::test_param[2]'],
        passToPass: ['tests/test_math.py::test_top_level'],
      },
      report('pytest-xunit1.xml'),
    );
    expect(v.verdict).toBe('resolved');
    expect(v.failToPass.map((t) => t.status)).toEqual(['passed', 'passed']);
  });

  it('vitest ids as the runner prints them, with or without the file', () => {
    const v = judgeNamedTests(
      { failToPass: ['vt/math.test.mjs > add > adds two numbers'], passToPass: ['add > nested > deep test'] },
      report('vitest.xml'),
    );
    expect(v.verdict).toBe('resolved');
  });

  it('a FAIL_TO_PASS test that failed, was skipped or is missing does not pass', () => {
    const v = judgeNamedTests(
      {
        failToPass: [
          'vt/math.test.mjs > add > fails on purpose',
          'vt/math.test.mjs > add > is skipped',
          'vt/math.test.mjs > add > not there',
        ],
        passToPass: [],
      },
      report('vitest.xml'),
    );
    expect(v.verdict).toBe('unresolved');
    expect(v.failToPass.map((t) => t.status)).toEqual(['failed', 'skipped', 'missing']);
  });

  it('a PASS_TO_PASS test that broke makes it unresolved', () => {
    const v = judgeNamedTests(
      { failToPass: ['top level test'], passToPass: ['add > fails on purpose'] },
      report('node-test.xml'),
    );
    expect(v.verdict).toBe('unresolved');
    expect(v.passToPass).toEqual([{ id: 'add > fails on purpose', status: 'failed' }]);
  });

  it('quarantined tests are left out of both lists, and counted', () => {
    const v = judgeNamedTests(
      {
        failToPass: ['top level test', 'add > fails on purpose'],
        passToPass: ['add > is skipped'],
        quarantined: ['add > fails on purpose', 'add > is skipped'],
      },
      report('node-test.xml'),
    );
    expect(v.verdict).toBe('resolved');
    expect(v.quarantined).toEqual(['add > fails on purpose', 'add > is skipped']);
    expect(v.failToPass).toHaveLength(1);
  });

  it('without a report nothing named passes', () => {
    const v = judgeNamedTests({ failToPass: ['a'], passToPass: ['b'] }, undefined, 'refused: too deep');
    expect(v).toMatchObject({ verdict: 'no-report', reason: 'refused: too deep' });
    expect([...v.failToPass, ...v.passToPass].every((t) => t.status === 'missing')).toBe(true);
  });
});
