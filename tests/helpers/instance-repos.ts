/**
 * Two small local repos, each a real git clone with history, and SWE-bench-style instances
 * over them (gold patch and test patch made by `git diff`, as the datasets are): `acme/fees`
 * tested with vitest, `acme/parcels` with node:test. Written here, for the tests; nothing of
 * another project.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { copyPackages } from './node-packages.js';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.invalid',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.invalid',
      GIT_CONFIG_NOSYSTEM: '1',
    },
  });
}

async function write(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

export interface InstanceLine {
  instance_id: string;
  repo: string;
  base_commit: string;
  problem_statement: string;
  patch: string;
  test_patch: string;
  FAIL_TO_PASS: string | string[];
  PASS_TO_PASS: string | string[];
}

/** Commits `base`, then diffs `fix` and `tests` against it: the gold patch and the test patch. */
async function instance(
  clone: string,
  repo: string,
  id: string,
  base: Record<string, string>,
  fix: Record<string, string>,
  tests: Record<string, string>,
  lists: { F2P: string[]; P2P: string[] },
  problem: string,
): Promise<InstanceLine> {
  await write(clone, base);
  git(clone, 'add', '-A');
  git(clone, 'commit', '-q', '-m', `base of ${id}`);
  const baseCommit = git(clone, 'rev-parse', 'HEAD').trim();
  await write(clone, fix);
  const patch = git(clone, 'diff');
  git(clone, 'checkout', '-q', '--', '.');
  await write(clone, tests);
  git(clone, 'add', '-A');
  const testPatch = git(clone, 'diff', '--cached');
  git(clone, 'reset', '-q', '--hard');
  return {
    instance_id: id,
    repo,
    base_commit: baseCommit,
    problem_statement: problem,
    patch,
    test_patch: testPatch,
    // As the datasets have them: JSON-encoded strings.
    FAIL_TO_PASS: JSON.stringify(lists.F2P),
    PASS_TO_PASS: JSON.stringify(lists.P2P),
  };
}

export interface InstanceRepos {
  clones: string;
  fees: InstanceLine;
  parcels: InstanceLine;
  /** On `acme/parcels`: a PASS_TO_PASS test that fails in about half of the runs. */
  flaky: InstanceLine;
}

const VITEST = './node_modules/.bin/vitest run --reporter=junit --outputFile=reports/junit.xml';
const NODE_TEST =
  'mkdir -p reports && node --test --test-reporter=junit --test-reporter-destination=reports/junit.xml test/*.test.mjs';

export const REPO_SPECS = {
  'acme/fees': { testCommand: VITEST, testReport: 'reports/junit.xml', carry: ['node_modules'] },
  'acme/parcels': { testCommand: NODE_TEST, testReport: 'reports/junit.xml' },
};

export async function makeInstanceRepos(root: string): Promise<InstanceRepos> {
  const clones = join(root, 'clones');
  const fees = join(clones, 'acme__fees');
  const parcels = join(clones, 'acme__parcels');
  for (const dir of [fees, parcels]) {
    await mkdir(dir, { recursive: true });
    git(dir, 'init', '-q', '-b', 'main');
  }
  await write(fees, { '.gitignore': 'node_modules/\nreports/\n' });
  await copyPackages(['vitest'], fees);
  const feesInstance = await instance(
    fees,
    'acme/fees',
    'acme__fees-1',
    {
      'package.json': '{ "name": "fees", "private": true, "type": "module" }\n',
      'src/fee.js': 'export function fee(total) {\n  return total > 50 ? 0 : 5;\n}\n',
      'test/fee.test.js':
        "import { describe, expect, it } from 'vitest';\nimport { fee } from '../src/fee.js';\n\ndescribe('fee', () => {\n  it('charges small orders', () => expect(fee(10)).toBe(5));\n  it('ships large orders free', () => expect(fee(100)).toBe(0));\n});\n",
    },
    { 'src/fee.js': 'export function fee(total) {\n  return total >= 50 ? 0 : 5;\n}\n' },
    {
      'test/boundary.test.js':
        "import { describe, expect, it } from 'vitest';\nimport { fee } from '../src/fee.js';\n\ndescribe('fee', () => {\n  it('ships an order of exactly 50 free', () => expect(fee(50)).toBe(0));\n});\n",
    },
    {
      F2P: ['test/boundary.test.js > fee > ships an order of exactly 50 free'],
      P2P: [
        'test/fee.test.js > fee > charges small orders',
        'test/fee.test.js > fee > ships large orders free',
      ],
    },
    'Orders of exactly 50 EUR are charged a fee, but the policy says orders from 50 EUR ship free.',
  );
  await write(parcels, { '.gitignore': 'reports/\n' });
  const parcelsBase = {
    'package.json': '{ "name": "parcels", "private": true, "type": "module" }\n',
    'src/weight.mjs': 'export function grams(kg) {\n  return kg * 100;\n}\n',
    'test/weight.test.mjs':
      "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { grams } from '../src/weight.mjs';\n\ntest('zero weighs nothing', () => assert.equal(grams(0), 0));\n",
  };
  const parcelsInstance = await instance(
    parcels,
    'acme/parcels',
    'acme__parcels-1',
    parcelsBase,
    { 'src/weight.mjs': 'export function grams(kg) {\n  return kg * 1000;\n}\n' },
    {
      'test/grams.test.mjs':
        "import { describe, it } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { grams } from '../src/weight.mjs';\n\ndescribe('grams', () => {\n  it('a kilo is 1000 grams', () => assert.equal(grams(1), 1000));\n});\n",
    },
    { F2P: ['grams > a kilo is 1000 grams'], P2P: ['zero weighs nothing'] },
    'grams(1) returns 100: a kilogram must be 1000 grams.',
  );
  const flakyInstance = await instance(
    parcels,
    'acme/parcels',
    'acme__parcels-flaky',
    {
      'test/clock.test.mjs':
        "import { test } from 'node:test';\nimport { randomInt } from 'node:crypto';\n\n// Flaky on purpose: fails on about half of its runs (every sandbox has the same hostname, so chance decides).\ntest('the clock is steady', () => {\n  if (randomInt(2) === 0) throw new Error('the clock skipped');\n});\n",
    },
    { 'src/weight.mjs': 'export function grams(kg) {\n  return kg * 1000;\n}\n' },
    {
      'test/grams.test.mjs':
        "import { describe, it } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { grams } from '../src/weight.mjs';\n\ndescribe('grams', () => {\n  it('a kilo is 1000 grams', () => assert.equal(grams(1), 1000));\n});\n",
    },
    { F2P: ['grams > a kilo is 1000 grams'], P2P: ['zero weighs nothing', 'the clock is steady'] },
    'grams(1) returns 100: a kilogram must be 1000 grams.',
  );
  return { clones, fees: feesInstance, parcels: parcelsInstance, flaky: flakyInstance };
}

export interface PythonInstanceRepos {
  clones: string;
  /** `acme/units`, tested with pytest (results read from its `-rA` summary). */
  units: InstanceLine;
  /** `acme/scales`, tested with unittest (results read from its verbose lines). */
  scales: InstanceLine;
}

/** pytest from the repo root finds the package only when the repo is importable (no install). */
export const PYTHON_REPO_SPECS = {
  'acme/units': { testCommand: 'pytest -rA -p no:cacheprovider tests', testLog: 'pytest' },
  'acme/scales': { testCommand: 'python -m unittest -v', testLog: 'unittest' },
};

/** Two small Python repos, real git clones, one instance each; no package.json, no install. */
export async function makePythonInstanceRepos(root: string): Promise<PythonInstanceRepos> {
  const clones = join(root, 'clones');
  const units = join(clones, 'acme__units');
  const scales = join(clones, 'acme__scales');
  for (const dir of [units, scales]) {
    await mkdir(dir, { recursive: true });
    git(dir, 'init', '-q', '-b', 'main');
    await write(dir, { '.gitignore': '__pycache__/\n' });
  }
  const unitsInstance = await instance(
    units,
    'acme/units',
    'acme__units-1',
    {
      'pyproject.toml': '[project]\nname = "units"\nversion = "0.1.0"\n',
      'units/__init__.py': '',
      'units/convert.py': 'def grams(kg):\n    return kg * 100\n',
      'tests/test_convert.py':
        'from units.convert import grams\n\n\ndef test_zero():\n    assert grams(0) == 0\n',
    },
    { 'units/convert.py': 'def grams(kg):\n    return kg * 1000\n' },
    {
      'tests/test_kilo.py':
        'import pytest\n\nfrom units.convert import grams\n\n\n@pytest.mark.parametrize("kg", [1, 2])\ndef test_kilo(kg):\n    assert grams(kg) == kg * 1000\n',
    },
    {
      F2P: ['tests/test_kilo.py::test_kilo[1]', 'tests/test_kilo.py::test_kilo[2]'],
      P2P: ['tests/test_convert.py::test_zero'],
    },
    'grams(1) returns 100: a kilogram must be 1000 grams.',
  );
  const scalesInstance = await instance(
    scales,
    'acme/scales',
    'acme__scales-1',
    {
      'setup.py': 'from setuptools import setup\n\nsetup(name="scales", packages=["scales"])\n',
      'scales/__init__.py': '',
      'scales/fee.py': 'def fee(total):\n    return 0 if total > 50 else 5\n',
      'test_fee.py':
        'import unittest\n\nfrom scales.fee import fee\n\n\nclass FeeTest(unittest.TestCase):\n    def test_small(self):\n        self.assertEqual(fee(10), 5)\n',
    },
    { 'scales/fee.py': 'def fee(total):\n    return 0 if total >= 50 else 5\n' },
    {
      'test_boundary.py':
        'import unittest\n\nfrom scales.fee import fee\n\n\nclass BoundaryTest(unittest.TestCase):\n    def test_fifty_ships_free(self):\n        """Fifty ships free."""\n        self.assertEqual(fee(50), 0)\n',
    },
    {
      F2P: ['test_fifty_ships_free (test_boundary.BoundaryTest)'],
      P2P: ['test_fee.FeeTest.test_small'],
    },
    'Orders of exactly 50 are charged a fee, but from 50 they ship free.',
  );
  return { clones, units: unitsInstance, scales: scalesInstance };
}

export function jsonl(lines: readonly object[]): string {
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}
