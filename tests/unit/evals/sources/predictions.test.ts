import { lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/errors.js';
import {
  loadPredictions,
  matchPredictions,
  MAX_PATCH_BYTES,
  parsePredictions,
  swebenchReport,
} from '../../../../src/evals/sources/predictions.js';
import { materializeInstances } from '../../../../src/evals/sources/instances-materialize.js';
import { loadInstanceSuite } from '../../../../src/evals/sources/instances.js';
import { sourceInput } from '../../../../src/evals/sources/index.js';
import { instancesSource } from '../../../../src/evals/sources/instances-source.js';
import { patchedFiles } from '../../../../src/evals/sources/working-copy.js';
import type { EvalSummary } from '../../../../src/evals/summary.js';
import { result } from '../helpers.js';
import { jsonl, makeInstanceRepos, REPO_SPECS, type InstanceRepos } from '../../../helpers/instance-repos.js';

function problems(text: string): string[] {
  try {
    parsePredictions(text, 'preds.jsonl');
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('accepted');
}

const PATCH = '--- a/x.js\n+++ b/x.js\n@@ -1 +1 @@\n-a\n+b\n';
const pred = (id: string, patch: unknown = PATCH, model: unknown = 'agent-7') => ({
  instance_id: id,
  model_patch: patch,
  model_name_or_path: model,
});

describe('predictions files', () => {
  it('reads JSONL, a JSON list and a JSON object keyed by instance id alike', () => {
    const want = new Map([
      ['a-1', { instanceId: 'a-1', model: 'agent-7', patch: PATCH }],
      ['a-2', { instanceId: 'a-2', model: 'agent-7', patch: PATCH }],
    ]);
    expect(parsePredictions(jsonl([pred('a-1'), pred('a-2')]), 'p')).toEqual(want);
    expect(parsePredictions(JSON.stringify([pred('a-1'), pred('a-2')], null, 2), 'p')).toEqual(want);
    expect(
      parsePredictions(JSON.stringify({ 'a-1': pred('a-1'), 'a-2': pred('a-2') }, null, 2), 'p'),
    ).toEqual(want);
    // The dict form may leave instance_id out of each value; one line of it is a dict, not JSONL.
    const { instance_id: _, ...bare } = pred('a-1');
    expect(parsePredictions(JSON.stringify({ 'a-1': bare }), 'p').get('a-1')).toEqual(want.get('a-1'));
  });

  it("what cannot be tied to an instance is the file's error, each at file:line", () => {
    expect(
      problems(
        [
          JSON.stringify(pred('a-1')),
          '{not json',
          JSON.stringify(pred('../etc')),
          JSON.stringify({ model_patch: PATCH }),
          JSON.stringify(pred('a-1')),
        ].join('\n'),
      ),
    ).toEqual([
      expect.stringMatching(/^preds\.jsonl:2: not a JSON object/),
      'preds.jsonl:3: instance_id: expected an id of letters, digits, ".", "_" or "-" (at most 128), got "../etc"',
      'preds.jsonl:4: instance_id: expected an id of letters, digits, ".", "_" or "-" (at most 128), got nothing',
      'preds.jsonl:5: instance_id "a-1" has a prediction already (at preds.jsonl:1)',
    ]);
    expect(problems('\n\n')).toEqual(['preds.jsonl: no predictions in the file']);
    expect(problems(JSON.stringify({ 'a-1': pred('a-2') }))).toEqual([
      'preds.jsonl: key "a-1": instance_id says "a-2"',
    ]);
  });

  it("a prediction that cannot be used is that instance's error; null is an empty patch; the model name is cleaned", () => {
    const got = parsePredictions(
      jsonl([
        pred('a-1', 42),
        pred('a-2', PATCH, ''),
        pred('a-3', null),
        pred('a-4', 'x'.repeat(MAX_PATCH_BYTES + 1)),
        pred('a-5', PATCH, 'org/model\u001b[31m\nv2'),
      ]),
      'p',
    );
    expect(got.get('a-1')).toEqual({
      instanceId: 'a-1',
      model: 'agent-7',
      error: 'model_patch: expected a unified diff, got number 42',
    });
    expect(got.get('a-2')).toEqual({
      instanceId: 'a-2',
      error: 'model_name_or_path: expected the model\'s name, got ""',
    });
    expect(got.get('a-3')).toEqual({ instanceId: 'a-3', model: 'agent-7', patch: '' });
    expect(got.get('a-4')).toMatchObject({ error: `model_patch is larger than ${MAX_PATCH_BYTES} bytes` });
    expect(got.get('a-5')).toMatchObject({ model: 'org/model [31m v2' });
  });

  it('names the instances with no prediction and the predictions for no instance', () => {
    const preds = parsePredictions(jsonl([pred('a-1'), pred('z-9')]), 'p');
    expect(matchPredictions(preds, ['a-1', 'a-2'])).toEqual({ noPrediction: ['a-2'], unknown: ['z-9'] });
  });

  it('refuses a file that is not a regular file, and hashes what it read', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-preds-'));
    try {
      await expect(loadPredictions(dir, 'folder')).rejects.toThrow(
        'predictions file folder is not a regular file',
      );
      await expect(loadPredictions(join(dir, 'none'), 'none')).rejects.toThrow(
        'cannot read predictions file none',
      );
      await writeFile(join(dir, 'p.jsonl'), jsonl([pred('a-1')]));
      const loaded = await loadPredictions(join(dir, 'p.jsonl'));
      expect(loaded.byId.size).toBe(1);
      expect(loaded.sha256).toMatch(/^[0-9a-f]{64}$/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('as SWE-bench counts', () => {
  it('empty patches apart, unscored trials as errors, resolved only when every trial passed', () => {
    const report = swebenchReport(
      ['a', 'b', 'c', 'd', 'e', 'f'],
      { noPrediction: ['f'], emptyPatch: ['d'] },
      [
        result({ taskId: 'a', trial: 0 }, 'ready-for-review'),
        result({ taskId: 'b', trial: 0 }, 'ready-for-review'),
        result({ taskId: 'b', trial: 1 }, 'tests-failed'),
        result({ taskId: 'c', trial: 0 }, 'infrastructure'),
        result({ taskId: 'd', trial: 0 }, 'no-changes'),
      ],
    );
    expect(report).toEqual({
      total_instances: 6,
      submitted_instances: 5,
      completed_instances: 2,
      resolved_instances: 1,
      unresolved_instances: 1,
      empty_patch_instances: 1,
      error_instances: 1,
      submitted_ids: ['a', 'b', 'c', 'd', 'e'],
      completed_ids: ['a', 'b'],
      incomplete_ids: ['e', 'f'],
      empty_patch_ids: ['d'],
      resolved_ids: ['a'],
      unresolved_ids: ['b'],
      error_ids: ['c'],
    });
  });
});

describe('a patch as files, applied where nothing of the repo changes', () => {
  let root: string;
  let repo: string;
  let outside: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-patched-'));
    repo = join(root, 'repo');
    outside = join(root, 'outside');
    await mkdir(join(repo, 'src'), { recursive: true });
    await mkdir(outside);
    await writeFile(join(repo, 'src/a.js'), 'a\n');
    await writeFile(join(outside, 'secret.js'), 'a\n');
    await symlink(outside, join(repo, 'lib'));
    await symlink(join(outside, 'secret.js'), join(repo, 'src/linked.js'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  const edit = (file: string) => `--- a/${file}\n+++ b/${file}\n@@ -1 +1 @@\n-a\n+b\n`;

  it('gives the files as the patch leaves them', async () => {
    expect(await patchedFiles(repo, edit('src/a.js'), 'patch')).toEqual([
      { path: 'src/a.js', content: 'b\n' },
    ]);
    expect(await readFile(join(repo, 'src/a.js'), 'utf8')).toBe('a\n');
  });

  it('refuses a path through a symbolic link, outside the repo, or into .git; nothing outside is read or written', async () => {
    await expect(patchedFiles(repo, edit('lib/secret.js'), 'model_patch')).rejects.toThrow(
      'the model_patch touches lib/secret.js through the symbolic link lib; not applied',
    );
    await expect(patchedFiles(repo, edit('src/linked.js'), 'model_patch')).rejects.toThrow(
      'through the symbolic link src/linked.js',
    );
    await expect(patchedFiles(repo, edit('../outside/secret.js'), 'model_patch')).rejects.toThrow(
      'outside the repo',
    );
    await expect(patchedFiles(repo, edit('.git/config'), 'model_patch')).rejects.toThrow('inside .git');
    expect(await readFile(join(outside, 'secret.js'), 'utf8')).toBe('a\n');
  });

  it('refuses a patch that makes a file its ---/+++ lines do not name (a link, a rename)', async () => {
    const link =
      'diff --git a/evil b/evil\nnew file mode 120000\n--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n';
    await expect(patchedFiles(repo, link, 'model_patch')).rejects.toThrow(
      'evil is not a regular file after the patch',
    );
    const copy =
      'diff --git a/src/a.js b/src/c.js\nsimilarity index 100%\ncopy from src/a.js\ncopy to src/c.js\n';
    await expect(patchedFiles(repo, copy, 'model_patch')).rejects.toThrow(/does not apply|do not name/);
    expect((await lstat(join(repo, 'src/a.js'))).isFile()).toBe(true);
  });
});

describe('predictions into tasks', () => {
  let root: string;
  let repos: InstanceRepos;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-predictions-'));
    repos = await makeInstanceRepos(root);
    await writeFile(join(root, 'set.jsonl'), jsonl([repos.fees, repos.parcels, repos.flaky]));
    await writeFile(
      join(root, 'suite.yaml'),
      `name: preds\ninstances: set.jsonl\nrepos: clones\nrepoSpecs: ${JSON.stringify(REPO_SPECS)}\n`,
    );
  }, 120_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it("each prediction's patch replays under its model's name; a bad one is its instance's error; missing and unknown are named", async () => {
    const preds = join(root, 'preds.jsonl');
    await writeFile(
      preds,
      jsonl([
        pred(repos.fees.instance_id, repos.fees.patch, 'acme-agent-1'),
        pred(repos.parcels.instance_id, edit('../../escape.js'), 'acme-agent-1'),
        pred('nobody-1', PATCH, 'acme-agent-1'),
      ]),
    );
    const input = sourceInput(join(root, 'suite.yaml'), 'suite.yaml', root);
    const opened = await instancesSource.open(input, { predictions: preds });
    const lines: string[] = [];
    const made = await opened.make({ outDir: join(root, 'out'), say: (l) => lines.push(l) });
    // The instance without a prediction is not run at all.
    expect(made.suite.tasks.map((t) => t.id)).toEqual([repos.fees.instance_id, repos.parcels.instance_id]);
    const [fees, parcels] = made.suite.tasks;
    const cassette = JSON.parse(await readFile(fees!.cassettes![0]!, 'utf8'));
    expect(cassette.model).toBe('acme-agent-1');
    expect(fees!.patchOnly).toBe(true);
    expect(JSON.stringify(cassette.turns[0].content)).toContain('total >= 50');
    expect(parcels!.refused).toBe(
      `the prediction of acme-agent-1 for ${repos.parcels.instance_id}: the patch names a path outside the repo: a/../../escape.js`,
    );
    const sections = await made.summarize!([
      result({ taskId: repos.fees.instance_id, trial: 0 }, 'ready-for-review'),
      result({ taskId: repos.parcels.instance_id, trial: 0 }, 'error'),
    ]);
    expect(sections.instances?.predictions).toEqual({
      file: 'preds.jsonl',
      models: ['acme-agent-1'],
      noPrediction: [repos.flaky.instance_id],
      unknown: ['nobody-1'],
      emptyPatch: [],
      testEditsReset: {},
      swebench: expect.objectContaining({
        total_instances: 3,
        submitted_instances: 2,
        completed_instances: 1,
        resolved_ids: [repos.fees.instance_id],
        unresolved_ids: [],
        error_ids: [repos.parcels.instance_id],
        incomplete_ids: [repos.flaky.instance_id],
      }),
    });
    const summary = { ...sections } as unknown as EvalSummary;
    const shown = instancesSource.section!.lines(summary, { predictions: preds });
    expect(shown).toEqual(
      expect.arrayContaining([
        'predictions: preds.jsonl (acme-agent-1)',
        `no prediction (not run, not scored): ${repos.flaky.instance_id}`,
        'predictions for instances not in the suite: nobody-1',
        'as SWE-bench counts: 1 resolved, 0 unresolved, 0 empty patch, 1 error, 1 incomplete (of 3)',
      ]),
    );
    const table = instancesSource.section!.report(summary)[0]!;
    expect(table.heading).toBe('Predictions');
    expect(JSON.stringify(table.table.rows)).toContain('acme-agent-1');
    expect(JSON.stringify(table.table.rows)).toContain('no prediction: not run, not scored');
  }, 60_000);

  it("a prediction's changes to the test patch's files are dropped, as SWE-bench resets them, and named", async () => {
    // The gold fix plus its own version of the test the test patch adds (one that the fix fails).
    const ownTest = repos.fees.test_patch.replace('expect(fee(50)).toBe(0)', 'expect(fee(50)).toBe(5)');
    expect(ownTest).not.toBe(repos.fees.test_patch);
    const preds = join(root, 'test-edit.jsonl');
    await writeFile(preds, jsonl([pred(repos.fees.instance_id, repos.fees.patch + ownTest, 'm')]));
    const input = sourceInput(join(root, 'suite.yaml'), 'suite.yaml', root);
    const opened = await instancesSource.open(input, { predictions: preds });
    const made = await opened.make({ outDir: join(root, 'out-test-edit'), say: () => undefined });
    const cassette = JSON.stringify(JSON.parse(await readFile(made.suite.tasks[0]!.cassettes![0]!, 'utf8')));
    expect(cassette).toContain('total >= 50');
    expect(cassette).not.toContain('test/boundary.test.js');
    const sections = await made.summarize!([
      result({ taskId: repos.fees.instance_id, trial: 0 }, 'ready-for-review'),
    ]);
    expect(sections.instances?.predictions?.testEditsReset).toEqual({
      [repos.fees.instance_id]: ['test/boundary.test.js'],
    });
    const summary = { ...sections } as unknown as EvalSummary;
    expect(instancesSource.section!.lines(summary, { predictions: preds })).toContain(
      `test patch files reset (as SWE-bench does): ${repos.fees.instance_id}: test/boundary.test.js`,
    );
  }, 60_000);

  it('an empty patch is not run (no-changes as it stands) and named; --oracle with --predictions is refused', async () => {
    const preds = join(root, 'empty.jsonl');
    await writeFile(preds, jsonl([pred(repos.fees.instance_id, '', 'm')]));
    const source = await loadInstanceSuite(join(root, 'suite.yaml'));
    const { loadPredictions: load } = await import('../../../../src/evals/sources/predictions.js');
    const made = await materializeInstances(source, {
      outDir: join(root, 'out-empty'),
      predictions: await load(preds),
    });
    expect(made.suite.tasks.map((t) => t.id)).toEqual([repos.fees.instance_id]);
    expect(made.predictions?.emptyPatch).toEqual([repos.fees.instance_id]);
    expect(made.suite.tasks[0]!.settled).toEqual({
      category: 'no-changes',
      reason: 'an empty patch',
      model: 'm',
    });
    const input = sourceInput(join(root, 'suite.yaml'), 'suite.yaml', root);
    await expect(instancesSource.open(input, { oracle: true, predictions: preds })).rejects.toThrow(
      '--oracle and --predictions both say what to apply: give one',
    );
  }, 60_000);
});

function edit(file: string): string {
  return `--- a/${file}\n+++ b/${file}\n@@ -1 +1 @@\n-a\n+b\n`;
}
