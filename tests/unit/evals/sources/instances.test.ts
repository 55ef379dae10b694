import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../../src/catalog/load.js';
import { ConfigError } from '../../../../src/errors.js';
import { parseInstances, loadInstanceSuite } from '../../../../src/evals/sources/instances.js';
import { materializeInstances } from '../../../../src/evals/sources/instances-materialize.js';
import { recogniseSource, sourceInput } from '../../../../src/evals/sources/index.js';
import { instancesSource } from '../../../../src/evals/sources/instances-source.js';
import { oracleFindings } from '../../../../src/evals/sources/quarantine.js';
import { treeHash } from '../../../helpers/cli.js';
import {
  jsonl,
  makeInstanceRepos,
  makePythonInstanceRepos,
  PYTHON_REPO_SPECS,
  REPO_SPECS,
  type InstanceRepos,
  type PythonInstanceRepos,
} from '../../../helpers/instance-repos.js';
import { trialSpecs, type Suite } from '../../../../src/evals/suite.js';
import type { EvalSummary } from '../../../../src/evals/summary.js';
import { result } from '../helpers.js';

function problems(text: string): string[] {
  try {
    parseInstances(text, 'set.jsonl');
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('accepted');
}

/** What a trial's test report said: its verdict and the named tests that did not pass. */
const tests = (verdict: 'resolved' | 'unresolved', failing: string[]) => ({
  passed: 1,
  failed: failing.length,
  skipped: 0,
  verdict,
  exitCode: 0,
  failing,
});

const good = {
  instance_id: 'a-1',
  repo: 'acme/a',
  base_commit: 'abcdef1',
  problem_statement: 'fix it',
  patch: '',
  test_patch: '',
  FAIL_TO_PASS: '["t1"]',
  PASS_TO_PASS: [],
};

describe('instances files', () => {
  it('reads lists as JSON lists or JSON-encoded strings', () => {
    const { instances } = parseInstances(
      jsonl([good, { ...good, instance_id: 'a-2', FAIL_TO_PASS: ['t2'] }]),
      'x',
    );
    expect(instances.map((i) => i.FAIL_TO_PASS)).toEqual([['t1'], ['t2']]);
  });

  it('names every problem at file:line, with the field', () => {
    const text = [
      JSON.stringify(good),
      '{not json',
      JSON.stringify({ ...good, instance_id: 'a/../b', base_commit: 'main' }),
      JSON.stringify({ ...good, FAIL_TO_PASS: '"t1"' }),
      JSON.stringify(good),
      JSON.stringify({ ...good, instance_id: 'a-3', problem_statement: '  ' }),
    ].join('\n');
    expect(problems(text)).toEqual([
      expect.stringMatching(/^set\.jsonl:2: not a JSON object/),
      'set.jsonl:3: instance_id: expected an id of letters, digits, ".", "_" or "-" (at most 128)',
      'set.jsonl:3: base_commit: expected a commit id (hex)',
      'set.jsonl:4: FAIL_TO_PASS: expected a list of test ids (a JSON list, or a string holding one)',
      'set.jsonl:5: instance_id "a-1" is used twice (first at line 1)',
      'set.jsonl:6: problem_statement: the problem statement is empty',
    ]);
    expect(problems('\n')).toEqual(['set.jsonl: no instances in the file']);
  });
});

describe('instances into tasks', () => {
  let root: string;
  let repos: InstanceRepos;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-instances-'));
    repos = await makeInstanceRepos(root);
    await writeFile(join(root, 'set.jsonl'), jsonl([repos.fees, repos.parcels]));
    await writeFile(
      join(root, 'suite.yaml'),
      `name: two-repos\ninstances: set.jsonl\nrepos: clones\nrepoSpecs: ${JSON.stringify(REPO_SPECS)}\n`,
    );
  }, 120_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('a working copy at base_commit with the test patch held out; the clone is not written to', async () => {
    const before = treeHash(join(repos.clones, 'acme__fees'), /^$/);
    const source = await loadInstanceSuite(join(root, 'suite.yaml'));
    const out = join(root, 'out');
    const { suite } = await materializeInstances(source, { outDir: out, oracle: true });
    expect(treeHash(join(repos.clones, 'acme__fees'), /^$/)).toBe(before);
    const task = suite.tasks.find((t) => t.id === 'acme__fees-1')!;
    expect(task.repo).toBe(join(out, 'instances', 'acme__fees-1', 'repo'));
    // At the base commit (the bug is there), with the test patch applied, dependencies carried.
    expect(await readFile(join(task.repo!, 'src/fee.js'), 'utf8')).toContain('total > 50');
    expect(existsSync(join(task.repo!, 'test/boundary.test.js'))).toBe(true);
    expect(existsSync(join(task.repo!, 'node_modules/vitest/package.json'))).toBe(true);
    expect(existsSync(join(task.repo!, '.git'))).toBe(false);
    const catalog = await loadCatalog(task.catalog);
    expect(catalog.catalog.agent).toMatchObject({
      editableFiles: ['**'],
      heldOutTests: ['test/boundary.test.js'],
      maxAttempts: 1,
      testReport: {
        format: 'junit',
        path: 'reports/junit.xml',
        failToPass: ['test/boundary.test.js > fee > ships an order of exactly 50 free'],
        passToPass: [
          'test/fee.test.js > fee > charges small orders',
          'test/fee.test.js > fee > ships large orders free',
        ],
      },
    });
    expect(catalog.repoDir).toBe(task.repo);
    expect(await readFile(task.ticket, 'utf8')).toContain('from 50 EUR ship free');
    // The oracle writes the gold patch's files: the fixed comparison.
    const cassette = JSON.parse(await readFile(task.cassettes![0]!, 'utf8'));
    expect(JSON.stringify(cassette.turns[0].content)).toContain('total >= 50');
    // A patch, not a model: its trials do not wait for the baseline's verdict (nothing to save).
    expect(task.patchOnly).toBe(true);
    expect(trialSpecs({ ...suite, tasks: [task] }, 1)[0]?.patchOnly).toBe(true);
  });

  it("a repo's spec may give its instances egress by name; the others keep no network", async () => {
    const specs = {
      ...REPO_SPECS,
      'acme/fees': {
        ...REPO_SPECS['acme/fees'],
        egress: { allow: ['registry.npmjs.org'], phases: ['agent'] },
      },
    };
    await writeFile(
      join(root, 'suite-egress.yaml'),
      `name: two-repos\ninstances: set.jsonl\nrepos: clones\nrepoSpecs: ${JSON.stringify(specs)}\n`,
    );
    const source = await loadInstanceSuite(join(root, 'suite-egress.yaml'));
    const { suite } = await materializeInstances(source, { outDir: join(root, 'out-egress') });
    const egress = async (id: string) =>
      (await loadCatalog(suite.tasks.find((t) => t.id === id)!.catalog)).catalog.sandbox.egress;
    expect(await egress('acme__fees-1')).toMatchObject({
      allow: ['registry.npmjs.org'],
      phases: ['agent'],
    });
    expect(await egress('acme__parcels-1')).toBeUndefined();
  });

  it('visible tests: present for the agent, never editable', async () => {
    const source = await loadInstanceSuite(join(root, 'suite.yaml'));
    const { suite } = await materializeInstances(source, {
      outDir: join(root, 'out-visible'),
      visibleTests: true,
    });
    const task = suite.tasks.find((t) => t.id === 'acme__parcels-1')!;
    const catalog = await loadCatalog(task.catalog);
    expect(catalog.catalog.agent.heldOutTests).toEqual([]);
    expect(task.mustNotTouch).toEqual(['test/grams.test.mjs']);
  });

  it('refuses what it cannot do with the reason: no clone, a commit the clone lacks, no test command', async () => {
    const source = await loadInstanceSuite(join(root, 'suite.yaml'));
    const clone = (over: object) => ({
      ...source,
      instances: { ...source.instances, instances: [{ ...source.instances.instances[0]!, ...over }] },
    });
    await expect(
      materializeInstances(clone({ repo: 'acme/absent', test_command: 'true' }), {
        outDir: join(root, 'o1'),
      }),
    ).rejects.toThrow(/no local clone of acme\/absent/);
    await expect(
      materializeInstances(clone({ base_commit: 'deadbeefdeadbeef' }), { outDir: join(root, 'o2') }),
    ).rejects.toThrow(/base_commit deadbeefdeadbeef is not in the local clone/);
    await expect(
      materializeInstances({ ...clone({}), repoSpecs: {} }, { outDir: join(root, 'o3') }),
    ).rejects.toThrow(/no test command for acme\/fees/);
    // Nothing fetched or written in the clone meanwhile.
    expect(
      execFileSync('git', ['status', '--porcelain'], {
        cwd: join(repos.clones, 'acme__fees'),
        encoding: 'utf8',
      }),
    ).toBe('');
  });
  it('as a task source: --oracle makes the suite, and the summary section says what the runs found and writes the quarantine file', async () => {
    const quarantine = join(root, 'quarantine.json');
    const input = sourceInput(join(root, 'suite.yaml'), 'suite.yaml', root);
    expect(await recogniseSource(input)).toBe(instancesSource);
    const opened = await instancesSource.open(input, { oracle: true, quarantine });
    expect(opened.name).toBe('two-repos');
    const made = await opened.make({ outDir: join(root, 'out-source'), say: () => undefined });
    const ids = made.suite.tasks.map((t) => t.id);
    expect(ids).toEqual(['acme__fees-1', 'acme__parcels-1']);
    const sections = await made.summarize!([
      result({ taskId: 'acme__fees-1', trial: 0 }, 'ready-for-review', { tests: tests('resolved', []) }),
      result({ taskId: 'acme__fees-1', trial: 1 }, 'tests-failed', { tests: tests('unresolved', ['clock']) }),
      result({ taskId: 'acme__parcels-1', trial: 0 }, 'tests-failed', { tests: tests('unresolved', ['kg']) }),
    ]);
    expect(sections).toEqual({
      instances: {
        oracle: true,
        goldFails: ['acme__parcels-1'],
        flakyTests: { 'acme__fees-1': ['clock'] },
        quarantined: { 'acme__fees-1': ['clock'] },
      },
    });
    expect(JSON.parse(await readFile(quarantine, 'utf8'))).toEqual({
      version: 1,
      tests: { 'acme__fees-1': ['clock'] },
      goldFails: ['acme__parcels-1'],
    });
    // Without --oracle the file is read back, and the section says what it left out.
    const next = await instancesSource.open(input, { quarantine });
    const again = await next.make({ outDir: join(root, 'out-source-2'), say: () => undefined });
    expect(again.suite.tasks.map((t) => t.id)).toEqual(['acme__fees-1']);
    expect(await again.summarize!([])).toEqual({
      instances: {
        oracle: false,
        goldFails: ['acme__parcels-1'],
        quarantined: { 'acme__fees-1': ['clock'] },
      },
    });
  }, 60_000);
});

describe('oracle findings', () => {
  it('a named test that passed in some runs and not others flakes; an instance never resolved fails with its gold patch', () => {
    const findings = oracleFindings([
      result({ taskId: 'a', trial: 0 }, 'ready-for-review', { tests: tests('resolved', []) }),
      result({ taskId: 'a', trial: 1 }, 'tests-failed', { tests: tests('unresolved', ['clock']) }),
      result({ taskId: 'b', trial: 0 }, 'tests-failed', { tests: tests('unresolved', ['boundary']) }),
      result({ taskId: 'b', trial: 1 }, 'tests-failed', { tests: tests('unresolved', ['boundary']) }),
      result({ taskId: 'c', trial: 0 }, 'infrastructure'),
    ]);
    expect(findings).toEqual({
      goldFails: ['b'],
      goldErrors: {},
      flakyInstances: ['a'],
      flakyTests: { a: ['clock'] },
    });
  });

  it('a gold patch that never ran is an error with its reason, not a gold patch that does not resolve', () => {
    const findings = oracleFindings([
      result({ taskId: 'py', trial: 0 }, 'error', { error: '`python` was not found (exit 127)' }),
      result({ taskId: 'py', trial: 1 }, 'error', { error: '`python` was not found (exit 127)' }),
      result({ taskId: 'log', trial: 0 }, 'tests-failed', {
        tests: {
          ...tests('unresolved', []),
          verdict: 'no-report',
          refused: 'the pytest output refused: no result line',
        },
      }),
      result({ taskId: 'b', trial: 0 }, 'tests-failed', { tests: tests('unresolved', ['boundary']) }),
    ]);
    expect(findings.goldFails).toEqual(['b']);
    expect(findings.goldErrors).toEqual({
      py: '`python` was not found (exit 127)',
      log: 'the pytest output refused: no result line',
    });
    // Every table and line says it: an error, and why; never "does not resolve".
    const summary = {
      instances: {
        oracle: true,
        goldFails: [],
        goldErrors: { py: findings.goldErrors.py! },
        quarantined: {},
      },
    } as unknown as EvalSummary;
    const text = JSON.stringify([
      instancesSource.section!.report!(summary),
      instancesSource.section!.lines!(summary, {}),
    ]);
    expect(text).toContain('error, the gold patch never ran: `python` was not found (exit 127)');
    expect(text).not.toMatch(/does not resolve|every gold patch resolved/);
  });
});

describe('each instance on its own environment', () => {
  let root: string;
  let repos: PythonInstanceRepos;
  const suiteFile = async (name: string, extra: string, lines: object[]) => {
    await writeFile(join(root, `${name}.jsonl`), jsonl(lines));
    await writeFile(
      join(root, `${name}.yaml`),
      `name: ${name}\ninstances: ${name}.jsonl\nrepos: clones\nrepoSpecs: ${JSON.stringify(PYTHON_REPO_SPECS)}\n${extra}`,
    );
    return loadInstanceSuite(join(root, `${name}.yaml`));
  };
  const sandboxOf = async (suite: Suite, id: string) =>
    (await loadCatalog(suite.tasks.find((t) => t.id === id)!.catalog)).catalog;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-instance-env-'));
    repos = await makePythonInstanceRepos(root);
  }, 120_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('a Python repo runs on the Python base, importable from its root, its results read from the runner output', async () => {
    const source = await suiteFile('py', '', [repos.units, repos.scales]);
    const lines: string[] = [];
    const { suite } = await materializeInstances(source, {
      outDir: join(root, 'out-py'),
      onLine: (l) => lines.push(l),
    });
    const units = await sandboxOf(suite, 'acme__units-1');
    expect(units.sandbox).toMatchObject({
      baseImage: 'sandbox-harness/base-python:3',
      env: { PYTHONPATH: '/workspace' },
    });
    expect(units.agent.testReport).toMatchObject({
      format: 'pytest',
      failToPass: ['tests/test_kilo.py::test_kilo[1]', 'tests/test_kilo.py::test_kilo[2]'],
    });
    expect(units.agent.testReport?.path).toBeUndefined();
    expect((await sandboxOf(suite, 'acme__scales-1')).agent.testReport?.format).toBe('unittest');
    expect(lines).toContain(
      '  environment: built on sandbox-harness/base-python:3 (a Python project: the Python base)',
    );
  });

  it('the instance line, then its repo spec, then the suite name the environment', async () => {
    const withImage = { ...repos.units, image_name: 'registry.example/acme/units-env:1' };
    const source = await suiteFile('chosen', 'baseImage: node\n', [withImage, repos.scales]);
    const { suite } = await materializeInstances(source, { outDir: join(root, 'out-chosen') });
    expect((await sandboxOf(suite, 'acme__units-1')).sandbox.image).toBe('registry.example/acme/units-env:1');
    const scales = await sandboxOf(suite, 'acme__scales-1');
    expect(scales.sandbox.baseImage).toBe('sandbox-harness/base-node:20');
    expect(scales.sandbox.env).toBeUndefined();

    await writeFile(join(root, 'Dockerfile.py'), 'FROM sandbox-harness/base-python:3\nCOPY . /workspace\n');
    const specs = {
      ...PYTHON_REPO_SPECS,
      'acme/scales': { ...PYTHON_REPO_SPECS['acme/scales'], dockerfile: 'Dockerfile.py' },
    };
    await writeFile(
      join(root, 'docker.yaml'),
      `name: docker\ninstances: chosen.jsonl\nrepos: clones\nbaseImage: python\nrepoSpecs: ${JSON.stringify(specs)}\n`,
    );
    const made = await materializeInstances(await loadInstanceSuite(join(root, 'docker.yaml')), {
      outDir: join(root, 'out-docker'),
    });
    const task = made.suite.tasks.find((t) => t.id === 'acme__scales-1')!;
    expect((await sandboxOf(made.suite, 'acme__scales-1')).sandbox.dockerfile).toBe('Dockerfile.instance');
    expect(await readFile(join(task.catalog, '..', 'Dockerfile.instance'), 'utf8')).toContain(
      'COPY . /workspace',
    );
  });

  it('refuses two ways to one environment, and names that are no image', async () => {
    await expect(suiteFile('both', 'image: a/b:1\nbaseImage: python\n', [repos.units])).rejects.toThrow(
      /set one of image, baseImage and dockerfile, not image and baseImage/,
    );
    expect(problems(jsonl([{ ...good, image_name: 'Not An Image!' }]))).toEqual([
      expect.stringMatching(/^set\.jsonl:1: image_name: /),
    ]);
    expect(problems(jsonl([{ ...good, image_name: 'a/b:1', base_image: 'python' }]))).toEqual([
      'set.jsonl:1: base_image: set image_name (used as it is) or base_image (built on), not both',
    ]);
  });
});

describe('one instance refused, the rest made', () => {
  it("an instance whose clone is missing is that instance's error; the others are made", async () => {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-instance-refused-'));
    try {
      const repos = await makePythonInstanceRepos(root);
      const absent = {
        ...repos.scales,
        instance_id: 'acme__gone-1',
        repo: 'acme/gone',
        test_command: 'true',
      };
      await writeFile(join(root, 'set.jsonl'), jsonl([absent, repos.units]));
      await writeFile(
        join(root, 'suite.yaml'),
        `name: some\ninstances: set.jsonl\nrepos: clones\nrepoSpecs: ${JSON.stringify(PYTHON_REPO_SPECS)}\n`,
      );
      const { suite } = await materializeInstances(await loadInstanceSuite(join(root, 'suite.yaml')), {
        outDir: join(root, 'out'),
      });
      expect(suite.tasks.map((t) => [t.id, t.refused])).toEqual([
        ['acme__gone-1', expect.stringMatching(/^no local clone of acme\/gone in .*\(hint: /)],
        ['acme__units-1', undefined],
      ]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }, 60_000);
});
