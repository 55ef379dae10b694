/**
 * `check` on the Python base, for the shapes a newcomer's first real Python repo has and the
 * base cannot run as they are (small projects of this test's own, git repositories as a
 * user's are):
 *  - a src/ layout package (`pip install -e .` in the project's own workflow, never in a
 *    sandbox): the tests fail on `ModuleNotFoundError`, which stays `failing` (it may be the
 *    ticket), with a hint that names `sandbox.env.PYTHONPATH`; with it set, no hint;
 *  - a `pytest.ini` whose `addopts` names a plugin's option (`--cov`) that the base does not
 *    have: `broken`, naming the config file and `-o addopts=""`;
 *  - `python -m unittest` over a `tests/` folder without `__init__.py`: Python 3.12+ runs
 *    0 tests, `broken` (no tests), not a failing ticket;
 *  - `async def` tests without an async plugin, which pytest skips: a hint says why.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { cleanEnv, runCli } from '../helpers/cli.js';
import { writeGitProject } from '../helpers/project.js';

const SHOPCALC = {
  'shopcalc/__init__.py': '"""Order totals."""\n\n\ndef total(prices, quantities):\n    return sum(prices)\n',
  'tests/test_total.py':
    'from shopcalc import total\n\n\ndef test_total_counts_quantities():\n    assert total([2, 3], [2, 1]) == 7\n',
};

async function project(root: string, name: string, files: Record<string, string>, catalog: string) {
  await writeGitProject(join(root, name), files);
  const file = join(root, `${name}.yaml`);
  await writeFile(
    file,
    `name: ${name}\nowner: team-data\ndescription: Order totals.\nrepo: ./${name}\n${catalog}`,
  );
  return file;
}

interface CheckJson {
  exitCode: number;
  verdict: string;
  broken?: { kind: string; reason: string };
  hints: string[];
}

async function check(catalog: string): Promise<CheckJson> {
  const r = await runCli(['check', '--catalog', catalog, '--json'], {
    cwd: dirname(catalog),
    env: cleanEnv(),
  });
  expect(r.stderr).not.toMatch(/Error:|at .*\.js:\d+/);
  const report = JSON.parse(r.stdout) as CheckJson;
  expect(r.code).toBe(report.exitCode);
  return report;
}

const PYTHON_BASE = 'sandbox:\n  baseImage: sandbox-harness/base-python:3\n';

describe('check on the Python base: what a first real repo meets (real Docker)', { timeout: 600_000 }, () => {
  let root = '';

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('python', {});
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-python-check-'));
  }, 900_000);

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('a src/ layout: failing with a PYTHONPATH hint; with sandbox.env.PYTHONPATH, failing on the assertion and no hint', async () => {
    const files = Object.fromEntries(
      Object.entries(SHOPCALC).map(([p, c]) => [p.replace(/^shopcalc/, 'src/shopcalc'), c]),
    );
    const without = await project(
      root,
      'src-layout',
      files,
      `${PYTHON_BASE}agent:\n  editableFiles: [src/**]\n  testCommand: python -m pytest -q\n`,
    );
    const report = await check(without);
    expect(report).toMatchObject({ verdict: 'failing', exitCode: 0 });
    expect(report.hints).toEqual([expect.stringContaining('`shopcalc`, which is src/shopcalc/ in the repo')]);
    expect(report.hints[0]).toContain('PYTHONPATH: src');
    const human = await runCli(['check', '--catalog', without], { cwd: root, env: cleanEnv() });
    expect(human.stdout).toMatch(/^hint {8}the tests cannot import `shopcalc`/m);

    const withPath = join(root, 'src-layout-path.yaml');
    await writeFile(
      withPath,
      `name: src-layout-path\nowner: team-data\ndescription: Order totals.\nrepo: ./src-layout\n${PYTHON_BASE}  env:\n    PYTHONPATH: src\nagent:\n  editableFiles: [src/**]\n  testCommand: python -m pytest -q\n`,
    );
    expect(await check(withPath)).toMatchObject({ verdict: 'failing', exitCode: 0, hints: [] });
  });

  it("pytest.ini's addopts with --cov (pytest-cov is not in the base): broken, naming the config and the way around it", async () => {
    const catalog = await project(
      root,
      'cov-addopts',
      { ...SHOPCALC, 'pytest.ini': '[pytest]\naddopts = --cov=shopcalc --cov-report=term-missing\n' },
      `${PYTHON_BASE}agent:\n  editableFiles: [shopcalc/**]\n  testCommand: python -m pytest -q\n`,
    );
    const report = await check(catalog);
    expect(report).toMatchObject({ verdict: 'broken', exitCode: 2, broken: { kind: 'runner-cannot-start' } });
    expect(report.broken?.reason).toContain('unrecognized arguments: --cov=shopcalc');
    expect(report.broken?.reason).toContain('/workspace/pytest.ini');
    expect(report.broken?.reason).toContain('-o addopts=""');
  });

  it('async def tests without an async plugin: pytest skips them, so the run passes; check says why', async () => {
    const catalog = await project(
      root,
      'async-tests',
      {
        'shopcalc/__init__.py': SHOPCALC['shopcalc/__init__.py'],
        'tests/test_total.py':
          'import pytest\n\nfrom shopcalc import total\n\n\n@pytest.mark.asyncio\nasync def test_total_counts_quantities():\n    assert total([2, 3], [2, 1]) == 7\n',
      },
      `${PYTHON_BASE}agent:\n  editableFiles: [shopcalc/**]\n  testCommand: python -m pytest -q\n`,
    );
    const report = await check(catalog);
    // pytest 8.3 (the offline base) skips them; 8.4+ fails them: the hint is there either way.
    expect(['passing', 'failing']).toContain(report.verdict);
    expect(report.hints).toEqual([expect.stringContaining('pytest did not run the `async def` tests')]);
  });

  it('python -m unittest over a tests/ folder that is not a package: broken (no tests), not a failing ticket', async () => {
    const catalog = await project(
      root,
      'unittest-none',
      {
        'shopcalc/__init__.py': SHOPCALC['shopcalc/__init__.py'],
        'tests/test_total.py':
          'import unittest\n\nfrom shopcalc import total\n\n\nclass TotalTest(unittest.TestCase):\n    def test_quantities(self):\n        self.assertEqual(total([2, 3], [2, 1]), 7)\n',
      },
      `${PYTHON_BASE}agent:\n  editableFiles: [shopcalc/**]\n  testCommand: python -m unittest\n`,
    );
    const report = await check(catalog);
    expect(report).toMatchObject({ verdict: 'broken', exitCode: 2, broken: { kind: 'no-tests' } });
    expect(report.broken?.reason).toContain('unittest found no tests');
  });
});
