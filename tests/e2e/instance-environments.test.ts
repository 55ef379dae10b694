/**
 * Instances on their own environments, end to end: the built CLI, real Docker, real git clones
 * made here. A pytest repo and a unittest repo (no JUnit: results read from the runners'
 * output) run on the Python base, a vitest repo on the Node base; the gold patches resolve all
 * three. A broken environment (a Python repo put on the Node base) and a missing prebuilt image
 * are errors with their reasons, never "does not resolve", and the other instance still runs.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { runCli } from '../helpers/cli.js';
import {
  jsonl,
  makeInstanceRepos,
  makePythonInstanceRepos,
  PYTHON_REPO_SPECS,
  REPO_SPECS,
  type InstanceRepos,
  type PythonInstanceRepos,
} from '../helpers/instance-repos.js';

interface Result {
  taskId: string;
  category: string;
  error?: string;
  tests?: { verdict?: string; failing: string[] };
}

async function results(out: string): Promise<Result[]> {
  return (await readFile(join(out, 'results.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result)
    .sort((a, b) => a.taskId.localeCompare(b.taskId));
}

describe('instances on their own environments (real Docker)', { timeout: 900_000 }, () => {
  let root: string;
  let js: InstanceRepos;
  let py: PythonInstanceRepos;
  const suite = (name: string, file: string) =>
    `name: ${name}\ninstances: ${file}\nrepos: clones\nrepoSpecs: ${JSON.stringify({ ...REPO_SPECS, ...PYTHON_REPO_SPECS })}\ndefaults:\n  concurrency: 2\n`;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    await ensureBaseImage('python', {});
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-instance-env-e2e-'));
    js = await makeInstanceRepos(root);
    py = await makePythonInstanceRepos(root);
  }, 900_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('--oracle resolves a pytest, a unittest and a vitest instance, each on its own base', async () => {
    await writeFile(join(root, 'three.jsonl'), jsonl([js.fees, py.units, py.scales]));
    await writeFile(join(root, 'three.yaml'), suite('three', 'three.jsonl'));
    const out = join(root, 'oracle');
    const r = await runCli(['eval', 'three.yaml', '--oracle', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary;
    expect(summary.overall).toMatchObject({ scored: 3, passes: 3 });
    expect(summary.instances).toMatchObject({ oracle: true, goldFails: [] });
    expect(summary.instances.goldErrors).toBeUndefined();
    for (const t of await results(out)) {
      expect(t.category, t.error).toBe('ready-for-review');
      expect(t.tests).toMatchObject({ verdict: 'resolved', failing: [] });
    }
  });

  it('a broken environment and a missing image are errors with their reasons; the other instance runs', async () => {
    const onNode = { ...py.units, base_image: 'node' };
    const absent = { ...py.scales, image_name: 'sandbox-harness-test/no-such-env:1' };
    await writeFile(join(root, 'broken.jsonl'), jsonl([onNode, absent, js.fees]));
    await writeFile(join(root, 'broken.yaml'), suite('broken', 'broken.jsonl'));
    const out = join(root, 'broken');
    const r = await runCli(['eval', 'broken.yaml', '--oracle', '--out', out, '--json'], { cwd: root });
    // Two trials could not be scored: the eval says so, and still writes its summary.
    expect(r.code, r.stderr).not.toBe(0);
    const summary = JSON.parse(await readFile(join(out, 'summary.json'), 'utf8'));
    expect(summary.instances.goldFails).toEqual([]);
    expect(summary.instances.goldErrors).toEqual({
      'acme__units-1': expect.stringMatching(/pytest/),
      'acme__scales-1': expect.stringMatching(/sandbox-harness-test\/no-such-env:1 does not exist/),
    });
    const [fees, scales, units] = await results(out);
    expect(fees).toMatchObject({ taskId: 'acme__fees-1', category: 'ready-for-review' });
    expect(scales).toMatchObject({ category: 'error', error: expect.stringMatching(/no-such-env:1/) });
    expect(units).toMatchObject({ category: 'error' });
    const report = await readFile(join(out, 'report.md'), 'utf8');
    expect(report).toContain('error, the gold patch never ran');
    expect(report).not.toContain('does not resolve');
  });
});
