import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JUNIT_LIMITS, parseJunit, ReportRefused } from '../../../src/test-results/junit.js';

// Written by the real runners (vitest 4, jest 29 + jest-junit 16, mocha 10 +
// mocha-junit-reporter 2, node 20's node:test, pytest 9) over the same small test file, with
// the temp folder they ran in renamed to /workspace (the sandbox's).
const fixture = (name: string) => readFileSync(join(import.meta.dirname, '../../fixtures/junit', name));
const parse = (name: string) => parseJunit(fixture(name), { root: '/workspace' });
const byStatus = (name: string) =>
  Object.fromEntries(parse(name).tests.map((t) => [t.id, t.status] as const));

function refusal(text: string | Buffer, limits = JUNIT_LIMITS): string {
  try {
    parseJunit(text, { limits });
  } catch (error) {
    if (error instanceof ReportRefused) return error.reason;
    throw error;
  }
  throw new Error('the report was accepted');
}

describe('JUnit reports of real runners', () => {
  it('vitest: file > describe > name, skipped and failed told apart', () => {
    expect(byStatus('vitest.xml')).toEqual({
      'vt/math.test.mjs > add > adds two numbers': 'passed',
      'vt/math.test.mjs > add > fails on purpose': 'failed',
      'vt/math.test.mjs > add > is skipped': 'skipped',
      'vt/math.test.mjs > add > nested > deep test': 'passed',
      'vt/math.test.mjs > top level test': 'passed',
    });
    const failed = parse('vitest.xml').tests.find((t) => t.status === 'failed');
    expect(failed?.message).toContain('expected 2 to be 3');
    expect(failed?.durationMs).toBe(25);
  });

  it('jest-junit configured with file, classname and title: the same ids as vitest', () => {
    expect(byStatus('jest-configured.xml')).toEqual({
      'test/math.test.js > add > adds two numbers': 'passed',
      'test/math.test.js > add > fails on purpose': 'failed',
      'test/math.test.js > add > is skipped': 'skipped',
      'test/math.test.js > add > nested > deep test': 'passed',
      'test/math.test.js > top level test': 'passed',
    });
  });

  it('jest-junit with its defaults: stable ids from the suite and the full title', () => {
    expect(byStatus('jest.xml')).toEqual({
      'add > add adds two numbers': 'passed',
      'add > add fails on purpose': 'failed',
      'add > add is skipped': 'skipped',
      'add > add nested deep test': 'passed',
      'add > top level test': 'passed',
    });
  });

  it('mocha-junit-reporter: absolute files made workspace-relative, the root suite dropped', () => {
    expect(byStatus('mocha.xml')).toEqual({
      'top level test': 'passed',
      'test/math.test.js > add > add adds two numbers': 'passed',
      'test/math.test.js > add > add fails on purpose': 'failed',
      'test/math.test.js > nested > add nested deep test': 'passed',
    });
  });

  it('node:test: nested suites, its classname="test" ignored', () => {
    expect(byStatus('node-test.xml')).toEqual({
      'top level test': 'passed',
      'add > adds two numbers': 'passed',
      'add > fails on purpose': 'failed',
      'add > is skipped': 'skipped',
      'add > nested > deep test': 'passed',
    });
  });

  it('pytest (xunit1): file > class > name, the module dropped from the class', () => {
    expect(byStatus('pytest-xunit1.xml')).toEqual({
      'tests/test_math.py > TestAdd > test_adds': 'passed',
      'tests/test_math.py > TestAdd > test_fails': 'failed',
      'tests/test_math.py > TestAdd > test_skipped': 'skipped',
      'tests/test_math.py > test_top_level': 'passed',
      'tests/test_math.py > test_param[1]': 'passed',
      'tests/test_math.py > test_param[2]': 'passed',
    });
  });

  it('pytest (default xunit2, no file attribute): the dotted class is the suite', () => {
    expect(parse('pytest.xml').tests.map((t) => t.id)).toContain('tests.test_math.TestAdd > test_adds');
    expect(parse('pytest.xml').counts).toEqual({ passed: 4, failed: 1, skipped: 1 });
  });
});

describe('hostile reports are refused with the reason', () => {
  const wrap = (cases: string) =>
    `<?xml version="1.0"?><testsuites><testsuite name="s">${cases}</testsuite></testsuites>`;

  it('billion laughs and external entities: any DOCTYPE is refused before parsing', () => {
    const lol = `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><testsuites><testcase name="&lol2;"/></testsuites>`;
    expect(refusal(lol)).toMatch(/DOCTYPE or entities/);
    const xxe = `<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuites><testcase name="&x;"/></testsuites>`;
    expect(refusal(xxe)).toMatch(/DOCTYPE/);
  });

  it('an undeclared entity stays text; predefined ones and char refs decode once', () => {
    const report = parseJunit(wrap('<testcase name="a &amp;lt; b &#x3E; &unknown;"/>'));
    expect(report.tests[0]?.name).toBe('a &lt; b > &unknown;');
  });

  it('huge: more bytes than the cap', () => {
    const big = wrap('<testcase name="t"/>'.padEnd(200, ' '));
    expect(refusal(big, { ...JUNIT_LIMITS, maxBytes: 100 })).toMatch(/more than the 100 allowed/);
  });

  it('deep: nesting past the cap, without a stack overflow', () => {
    const deep = `<testsuites>${'<testsuite name="x">'.repeat(5000)}${'</testsuite>'.repeat(5000)}</testsuites>`;
    expect(refusal(deep)).toMatch(/nested deeper than 32/);
  });

  it('too many test cases', () => {
    const many = wrap(Array.from({ length: 11 }, (_, i) => `<testcase name="t${i}"/>`).join(''));
    expect(refusal(many, { ...JUNIT_LIMITS, maxTests: 10 })).toMatch(/more than 10 test cases/);
  });

  it('wrong names: missing, empty, control characters, too long', () => {
    expect(refusal(wrap('<testcase classname="c"/>'))).toMatch(/has no name/);
    expect(refusal(wrap('<testcase name="  "/>'))).toMatch(/has no name/);
    expect(refusal(wrap('<testcase name="a&#10;b"/>'))).toMatch(/control characters/);
    expect(refusal(wrap(`<testcase name="${'x'.repeat(1001)}"/>`))).toMatch(/1001 characters/);
  });

  it('not JUnit: another root element, two roots, not XML, NUL bytes', () => {
    expect(refusal('<html><body/></html>')).toMatch(/root element is <html>/);
    expect(refusal('<testsuites></testsuites><testsuites></testsuites>')).toMatch(/root element|well-formed/);
    expect(refusal('<testsuites><testcase name="a"></testsuites>')).toMatch(/not well-formed/);
    expect(refusal('just text')).toMatch(/root element is missing|well-formed/);
    expect(refusal(Buffer.from('<testsuites>\u0000</testsuites>'))).toMatch(/NUL/);
  });

  it('a name that would pollute a prototype is only data; such an element is refused', () => {
    const report = parseJunit(wrap('<testcase name="__proto__" classname="constructor"/>'));
    expect(report.tests[0]?.id).toBe('s > constructor > __proto__');
    expect(refusal(wrap('<testcase name="t"><__proto__ polluted="yes"/></testcase>'))).toMatch(/__proto__/);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a repeated id is one test that passed only if every case did', () => {
    const report = parseJunit(wrap('<testcase name="t"/><testcase name="t"><failure/></testcase>'));
    expect(report.tests).toEqual([expect.objectContaining({ id: 's > t', status: 'failed' })]);
    expect(report.counts).toEqual({ passed: 0, failed: 1, skipped: 0 });
  });
});
