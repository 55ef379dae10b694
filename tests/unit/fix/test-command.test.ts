/**
 * The broken-test-command classifier over real output: each fixture in
 * tests/fixtures/test-output/ is an excerpt of what a real runner printed on this kind of
 * machine (npm 9 and 11, vitest 2 and 4, jest 29, mocha 10, node:test on Node 20, pytest 9),
 * with its exit code here. The "failing" ones are real bugs (an assertion, a test importing
 * what the ticket is about, a crash in the code under test): they must never be "broken".
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { classifyTestRun, detectRunner, type TestCommandProblemKind } from '../../../src/fix/test-command.js';

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'test-output');
const sample = (name: string) => readFileSync(join(FIXTURES, `${name}.txt`), 'utf8');

type Case = [
  fixture: string,
  exitCode: number,
  command: string,
  expected: TestCommandProblemKind | undefined,
];

const BROKEN: Case[] = [
  ['sh-127', 127, 'frobnicate --all', 'command-not-found'],
  ['sh-126', 126, './t.sh', 'not-executable'],
  ['npm-script-bin-missing', 127, 'npm test', 'command-not-found'],
  ['vitest-not-installed', 127, 'npm test', 'command-not-found'],
  ['pytest-cmd-missing', 127, 'pytest-nope -q', 'command-not-found'],
  ['npm-missing-script', 1, 'npm run tset', 'missing-script'],
  ['npm9-missing-script', 1, 'npm run tset', 'missing-script'],
  ['npm-no-test-script', 1, 'npm test', 'missing-script'],
  ['npm-no-pkg', 254, 'npm test', 'no-package-json'],
  ['npm9-no-pkg', 254, 'npm test', 'no-package-json'],
  ['npm-init-default-test', 1, 'npm test', 'no-tests'],
  ['npx-no-install', 1, 'npx --no-install jest', 'runner-cannot-start'],
  ['npx-vitest-not-installed', 1, 'npx --no-install vitest run', 'runner-cannot-start'],
  ['vitest4-no-tests', 1, 'npm test', 'no-tests'],
  ['vitest2-no-tests', 1, 'npm test', 'no-tests'],
  ['vitest4-filter-none', 1, 'npx vitest run nomatch', 'no-tests'],
  ['vitest2-filter-none', 1, 'npx vitest run nomatch', 'no-tests'],
  ['jest-no-tests', 1, 'npm test', 'no-tests'],
  ['mocha-no-tests', 1, 'npm test', 'no-tests'],
  ['mocha-spec-missing', 1, 'npx mocha "nope/**/*.js"', 'no-tests'],
  ['nodetest-no-tests', 0, 'npm test', 'no-tests'],
  ['nodetest-glob-none', 1, 'node --test "test/**/*.test.js"', 'no-tests'],
  ['nodetest-file-missing', 1, 'node --test test/nope.test.js', 'no-tests'],
  ['pytest-no-tests', 5, 'python3 -m pytest -q', 'no-tests'],
  ['pytest-k-none', 5, 'python3 -m pytest -q -k nomatch', 'no-tests'],
  ['pytest-usage', 4, 'python3 -m pytest --nope', 'runner-cannot-start'],
  ['pytest-ini-bad-addopts', 4, 'python3 -m pytest -q', 'runner-cannot-start'],
  ['pytest-path-missing', 4, 'python3 -m pytest -q tests/', 'runner-cannot-start'],
  ['pytest-conftest-import', 4, 'python3 -m pytest -q', 'runner-cannot-start'],
  ['pytest-pyproject-cov', 4, 'python3 -m pytest -q', 'runner-cannot-start'],
  ['pytest-required-plugins', 4, 'python3 -m pytest -q', 'runner-cannot-start'],
  ['pytest-minversion', 4, 'python -m pytest -q', 'runner-cannot-start'],
  ['pytest-plugin-missing', 1, 'python3 -m pytest -q', 'runner-cannot-start'],
  ['unittest-no-tests-py311', 0, 'python3 -m unittest', 'no-tests'],
  ['unittest-no-tests-py313', 5, 'python -m unittest', 'no-tests'],
  ['unittest-start-missing', 1, 'python3 -m unittest discover -s nope', 'runner-cannot-start'],
  ['python-no-pytest', 1, 'python3 -m pytest_nope', undefined],
  ['python-m-coverage-missing', 1, 'python -m coverage run -m pytest -q', 'runner-cannot-start'],
  ['vitest4-config-broken', 1, 'npm test', 'runner-cannot-start'],
  ['vitest4-config-syntax', 1, 'npm test', 'runner-cannot-start'],
  ['vitest2-config-broken', 1, 'npm test', 'runner-cannot-start'],
  ['vitest2-config-syntax', 1, 'npm test', 'runner-cannot-start'],
  ['jest-config-broken', 1, 'npm test', 'runner-cannot-start'],
  ['jest-config-syntax', 1, 'npm test', 'runner-cannot-start'],
  ['jest-preset-missing', 1, 'npm test', 'runner-cannot-start'],
  ['mocha-require-missing', 1, 'npm test', 'runner-cannot-start'],
  ['node-runner-bin-missing', 1, 'node node_modules/vitest/vitest.mjs run', 'runner-cannot-start'],
  ['node-runner-bin-missing-cjs', 1, 'node node_modules/jest/bin/jest.js', 'runner-cannot-start'],
  ['node-script-missing', 1, 'node scripts/run-tests.js', 'runner-cannot-start'],
  ['node-esm-entry-missing', 1, 'node run-tests.mjs', 'runner-cannot-start'],
  ['node-bad-option-npm', 9, 'npm test', 'runner-cannot-start'],
  ['node-bad-option', 9, 'node --experimental-strip-types --test', 'runner-cannot-start'],
  ['npm-script-pnpm-missing', 127, 'npm test', 'command-not-found'],
  ['nodetest-ts-on-node20', 1, 'node --test test/a.test.ts', 'runner-cannot-start'],
  ['node-options-not-allowed', 9, 'NODE_OPTIONS=--experimental-strip-types npx mocha', 'runner-cannot-start'],
];

/** Real bugs: what a ticket's failing tests look like. Never broken. */
const FAILING: Case[] = [
  ['vitest4-failing', 1, 'npm test', undefined],
  ['vitest2-failing', 1, 'npm test', undefined],
  ['vitest4-failing-import', 1, 'npm test', undefined],
  ['vitest2-failing-import', 1, 'npm test', undefined],
  ['vitest4-failing-require', 1, 'npm test', undefined],
  ['vitest2-failing-require', 1, 'npm test', undefined],
  ['jest-failing', 1, 'npm test', undefined],
  ['jest-failing-require', 1, 'npm test', undefined],
  ['mocha-failing', 1, 'npm test', undefined],
  ['mocha-failing-require', 1, 'npm test', undefined],
  ['nodetest-failing', 1, 'npm test', undefined],
  ['nodetest-failing-require', 1, 'npm test', undefined],
  ['pytest-failing', 1, 'python3 -m pytest -q', undefined],
  ['pytest-failing-import', 2, 'python3 -m pytest -q', undefined],
  ['unittest-failing', 1, 'python3 -m unittest', undefined],
  ['unittest-failing-import-py313', 1, 'python -m unittest', undefined],
  ['node-script-throws', 1, 'node t.js', undefined],
  ['node-script-missing-module', 1, 'node t2.js', undefined],
  ['node-esm-import-missing', 1, 'node t.mjs', undefined],
  ['node-esm-pkg-missing', 1, 'node t2.mjs', undefined],
];

const PASSING: Case[] = [
  ['vitest4-passing', 0, 'npm test', undefined],
  ['vitest2-passing', 0, 'npm test', undefined],
  ['jest-passing', 0, 'npm test', undefined],
  ['mocha-passing', 0, 'npm test', undefined],
  ['nodetest-passing', 0, 'node --test', undefined],
  ['pytest-passing', 0, 'python3 -m pytest -q', undefined],
];

function classify(fixture: string, exitCode: number, command: string) {
  const output = sample(fixture);
  return classifyTestRun({ exitCode, output, runner: detectRunner(command, output) });
}

describe('classifyTestRun on real runner output', () => {
  it.each(BROKEN)('%s (exit %i, `%s`) is %s', (fixture, exitCode, command, expected) => {
    const problem = classify(fixture, exitCode, command);
    expect(problem?.kind).toBe(expected);
    if (expected) expect(problem?.reason.length).toBeGreaterThan(10);
  });

  it.each(FAILING)('%s (exit %i): a genuinely failing test is never broken', (fixture, exitCode, command) => {
    expect(classify(fixture, exitCode, command)).toBeUndefined();
  });

  it.each(PASSING)('%s (exit %i): passing tests are not broken', (fixture, exitCode, command) => {
    expect(classify(fixture, exitCode, command)).toBeUndefined();
  });

  it('says what was wrong in words a person can act on', () => {
    expect(classify('npm9-missing-script', 1, 'npm run tset')?.reason).toBe(
      'package.json has no "tset" script',
    );
    expect(classify('sh-127', 127, 'frobnicate --all')?.reason).toBe('`frobnicate` was not found (exit 127)');
    expect(classify('vitest-not-installed', 127, 'npm test')?.reason).toContain('`vitest`');
    expect(classify('pytest-conftest-import', 4, 'pytest')?.reason).toContain("No module named 'nopemodule'");
    expect(classify('npm-script-pnpm-missing', 127, 'npm test')?.reason).toContain(
      '`pnpm` was not found (exit 127): the sandbox image has npm but not pnpm',
    );
    expect(classify('sh-127', 127, 'frobnicate --all')?.reason).not.toContain('npm');
    expect(classify('nodetest-glob-none', 1, 'node --test "test/**/*.test.js"')?.reason).toContain(
      'does not expand a glob given to --test',
    );
    expect(classify('nodetest-file-missing', 1, 'node --test test/nope.test.js')?.reason).toBe(
      'node --test found no test file at /workspace/test/nope.test.js',
    );
    expect(classify('node-bad-option-npm', 9, 'npm test')?.reason).toContain(
      "the sandbox's node does not know the option --experimental-transform-types (exit 9)",
    );
    // A config's addopts naming a plugin's options: the file that says so, and the way around it.
    const cov = classify('pytest-pyproject-cov', 4, 'pytest')?.reason;
    expect(cov).toContain('unrecognized arguments: --cov=foo -n');
    expect(cov).toContain('/tmp/pyshapes/d/pyproject.toml');
    expect(cov).toContain('-o addopts=""');
    expect(classify('pytest-required-plugins', 4, 'pytest')?.reason).toContain(
      'Missing required plugins: pytest-cov',
    );
    expect(classify('pytest-minversion', 4, 'pytest')?.reason).toBe(
      "pytest is older than the config asks: /workspace/pyproject.toml: 'minversion' requires pytest-9.0, actual pytest-8.3.5 (exit 4; the Python base's pytest is the one there is)",
    );
    expect(classify('python-m-coverage-missing', 1, 'python -m coverage run -m pytest')?.reason).toBe(
      '`python -m coverage`: No module named coverage: it is not installed in the sandbox',
    );
    expect(classify('pytest-plugin-missing', 1, 'pytest')?.reason).toContain(
      `plugin "xdist" (-p): No module named 'xdist'`,
    );
  });
});

describe('classifyTestRun stays conservative', () => {
  it('a timed-out run is never broken, whatever it printed', () => {
    const output = sample('npm9-missing-script');
    expect(classifyTestRun({ exitCode: 1, timedOut: true, output, runner: 'npm' })).toBeUndefined();
  });

  it('a run whose summary shows tests ran is the ticket, even when a test printed a runner message', () => {
    // A repo that tests a test runner: its own failing test prints what a broken run prints.
    const output = `${sample('jest-no-tests')}\n${sample('jest-failing')}`;
    expect(classifyTestRun({ exitCode: 1, output, runner: 'jest' })).toBeUndefined();
    const vitest = `${sample('vitest2-failing')}\nNo test files found, exiting with code 1\n`;
    expect(classifyTestRun({ exitCode: 1, output: vitest, runner: 'vitest' })).toBeUndefined();
  });

  it('TypeScript files node could not load are broken only when no test passed and every failure is one', () => {
    const output = sample('nodetest-ts-on-node20');
    expect(classifyTestRun({ exitCode: 1, output, runner: 'node-test' })?.reason).toContain(
      'node cannot load the TypeScript file /workspace/test/a.test.ts',
    );
    const onePassed = output.replace('# pass 0', '# pass 1');
    expect(classifyTestRun({ exitCode: 1, output: onePassed, runner: 'node-test' })).toBeUndefined();
    const another = `${output}\nnot ok 2 - adds\n`;
    expect(classifyTestRun({ exitCode: 1, output: another, runner: 'node-test' })).toBeUndefined();
    expect(classifyTestRun({ exitCode: 1, output, runner: 'vitest' })).toBeUndefined();
  });

  it("node's refusal of an option counts only as node's own exit 9", () => {
    const output = sample('node-bad-option');
    expect(classifyTestRun({ exitCode: 1, output, runner: 'node-test' })).toBeUndefined();
  });

  it('exit 127 without the shell saying "not found" is not guessed at', () => {
    expect(classifyTestRun({ exitCode: 127, output: 'tests crashed\n', runner: 'unknown' })).toBeUndefined();
  });

  it('pytest exit 5 only counts for pytest; exit 4 only for a usage error or a missing package in conftest', () => {
    expect(
      classifyTestRun({ exitCode: 5, output: 'no tests ran in 0.1s\n', runner: 'unknown' }),
    ).toBeUndefined();
    const conftestBug =
      "ImportError while loading conftest '/workspace/conftest.py'.\nconftest.py:1: in <module>\n    from app import create_app\nE   ImportError: cannot import name 'create_app' from 'app'\n";
    expect(classifyTestRun({ exitCode: 4, output: conftestBug, runner: 'pytest' })).toBeUndefined();
  });

  it('a "Missing script" line from a later step still needs a failing exit code', () => {
    expect(
      classifyTestRun({ exitCode: 0, output: sample('npm9-missing-script'), runner: 'npm' }),
    ).toBeUndefined();
  });
});

describe('detectRunner', () => {
  it('reads the runner from the command, or from the script npm echoes', () => {
    expect(detectRunner('python -m pytest -x')).toBe('pytest');
    expect(detectRunner('python -m unittest -v')).toBe('unittest');
    expect(detectRunner('PYTHONPATH=src python3.13 -W error -m unittest discover -s tests')).toBe('unittest');
    expect(detectRunner('python -m unittest_extras')).toBe('unknown');
    expect(detectRunner('npx vitest run')).toBe('vitest');
    expect(detectRunner('node --test test/')).toBe('node-test');
    expect(detectRunner('npm test', sample('jest-no-tests'))).toBe('jest');
    expect(detectRunner('npm test', sample('nodetest-no-tests'))).toBe('node-test');
    expect(detectRunner('npm run tset', sample('npm9-missing-script'))).toBe('npm');
    expect(detectRunner('./run.sh')).toBe('unknown');
  });
});
