/**
 * `eval <instances> --predictions`: another agent's patches scored end to end, on the built
 * CLI and real Docker, no model. Three instances over two local git repos: one prediction
 * resolves its instance, one (an empty patch) does not, one is malformed (a path outside the
 * repo) and is that instance's error; a prediction for an instance not in the suite is named.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { runCli } from '../helpers/cli.js';
import { jsonl, makeInstanceRepos, REPO_SPECS, type InstanceRepos } from '../helpers/instance-repos.js';

interface Result {
  taskId: string;
  category: string;
  model?: string;
  error?: string;
  tests?: { verdict?: string };
}

describe('predictions end to end (real Docker, no model)', { timeout: 900_000 }, () => {
  let root: string;
  let repos: InstanceRepos;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-predictions-e2e-'));
    repos = await makeInstanceRepos(root);
    await writeFile(join(root, 'set.jsonl'), jsonl([repos.fees, repos.parcels, repos.flaky]));
    await writeFile(
      join(root, 'suite.yaml'),
      `name: preds\ninstances: set.jsonl\nrepos: clones\nrepoSpecs: ${JSON.stringify(REPO_SPECS)}\ndefaults:\n  concurrency: 2\n`,
    );
  }, 900_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('one prediction resolves, one does not, a malformed one is its error; the model is named', async () => {
    const model = 'acme/agent-7';
    const escape = '--- a/../../escape.js\n+++ b/../../escape.js\n@@ -1 +1 @@\n-a\n+b\n';
    // The fix plus its own version of the test the test patch adds, one the fix fails: SWE-bench
    // resets the test patch's files before applying it, so the instance is still resolved.
    const ownTest = repos.fees.test_patch.replace('expect(fee(50)).toBe(0)', 'expect(fee(50)).toBe(5)');
    await writeFile(
      join(root, 'preds.jsonl'),
      jsonl([
        {
          instance_id: repos.fees.instance_id,
          model_name_or_path: model,
          model_patch: repos.fees.patch + ownTest,
        },
        { instance_id: repos.parcels.instance_id, model_name_or_path: model, model_patch: '' },
        { instance_id: repos.flaky.instance_id, model_name_or_path: model, model_patch: escape },
        { instance_id: 'ghost-1', model_name_or_path: model, model_patch: '' },
      ]),
    );
    const out = join(root, 'out');
    const r = await runCli(['eval', 'suite.yaml', '--predictions', 'preds.jsonl', '--out', out], {
      cwd: root,
    });
    // A trial that ended in error (the malformed prediction) makes the eval exit 2.
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toContain('predictions: preds.jsonl (acme/agent-7)');
    expect(r.stdout).toContain('predictions for instances not in the suite: ghost-1');
    expect(r.stdout).toContain(`empty patches: ${repos.parcels.instance_id}`);
    const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Result);
    const by = (id: string) => results.find((t) => t.taskId === id)!;
    expect(by(repos.fees.instance_id)).toMatchObject({
      category: 'ready-for-review',
      model,
      tests: { verdict: 'resolved' },
    });
    // An empty patch changes nothing: scored as the agent's failure, as SWE-bench counts it, and
    // not run at all (no run record, no time).
    expect(by(repos.parcels.instance_id)).toMatchObject({ model, category: 'no-changes', durationMs: 0 });
    expect(by(repos.parcels.instance_id)).not.toHaveProperty('runId');
    expect(r.stdout).toContain(
      `test patch files reset (as SWE-bench does): ${repos.fees.instance_id}: test/boundary.test.js`,
    );
    expect(by(repos.flaky.instance_id)).toMatchObject({ category: 'error' });
    expect(by(repos.flaky.instance_id).error).toContain(
      `the prediction of ${model} for ${repos.flaky.instance_id}: the patch names a path outside the repo`,
    );
    const summary = JSON.parse(await readFile(join(out, 'summary.json'), 'utf8'));
    expect(summary.overall).toMatchObject({ passes: 1 });
    expect(summary.instances.predictions).toMatchObject({
      file: 'preds.jsonl',
      models: [model],
      noPrediction: [],
      unknown: ['ghost-1'],
      emptyPatch: [repos.parcels.instance_id],
      testEditsReset: { [repos.fees.instance_id]: ['test/boundary.test.js'] },
      // SWE-bench's own keys beside ours.
      swebench: {
        resolved_ids: [repos.fees.instance_id],
        unresolved_ids: [],
        empty_patch_ids: [repos.parcels.instance_id],
        error_ids: [repos.flaky.instance_id],
      },
    });
    const report = await readFile(join(out, 'report.md'), 'utf8');
    expect(report).toContain('## Predictions');
    expect(report).toContain(model);
    // Nothing was written outside the working copies.
    await expect(readFile(join(root, 'escape.js'))).rejects.toThrow();
  });
});
