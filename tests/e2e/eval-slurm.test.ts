/**
 * `sandbox-harness eval --backend slurm` end to end: the built CLI, the offline example suite
 * (cassettes, never a real model) over a real Slurm cluster (tests/helpers/slurm.ts), against
 * the same suite on the local engine. Every sandbox is a job: the repo image is built on the
 * nodes from the context the harness sends, trials wait in Slurm's queue (shown with Slurm's
 * reason), and the results name the node each trial ran on.
 */
import { cp, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLURM_LABEL } from '../../src/sandbox/slurm/job-script.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { cleanEnv, ROOT, runCli, startCli, treeHash } from '../helpers/cli.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { killNode, restartNode, slurm, startSlurm, stopSlurm, type SlurmCluster } from '../helpers/slurm.js';

interface Result {
  taskId: string;
  trial: number;
  outcome: string;
  category: string;
  engine?: string;
  runId: string;
  infraRetried?: boolean;
  firstTry?: { engine?: string; category: string };
}

/** Containers of this tool on every node's engine, with their node and role. */
async function ourContainers(cluster: SlurmCluster) {
  const all = await Promise.all(
    cluster.nodes.map(async (n) =>
      (await n.engine.engine.containers.list({ [SLURM_LABEL.marker]: '1' })).map((c) => ({
        node: n.name,
        name: c.name,
        state: c.state,
        role: c.labels[SLURM_LABEL.role] ?? '',
      })),
    ),
  );
  return all.flat();
}

let cluster: SlurmCluster | undefined;
const ready = (): SlurmCluster => {
  if (!cluster) throw new Error('the Slurm lab did not start');
  return cluster;
};

async function readResults(outDir: string): Promise<Result[]> {
  const text = await readFile(join(outDir, 'results.jsonl'), 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result)
    .sort((a, b) => a.taskId.localeCompare(b.taskId) || a.trial - b.trial);
}

const outcomes = (results: Result[]) => results.map((r) => [r.taskId, r.trial, r.outcome, r.category]);

describe('eval over a Slurm cluster (offline suite)', { timeout: 900_000 }, () => {
  beforeAll(async () => {
    await ensureBaseImage('node', {});
    // One CPU per node: three sandboxes at once, so a fourth trial waits in Slurm's queue.
    cluster = await startSlurm({ nodes: 3, cpusPerNode: 1 });
  }, 300_000);

  afterAll(async () => {
    if (cluster) await stopSlurm(cluster);
    await removeExampleCopies();
  });

  it('gives the local outcomes; trials queue with Slurm reason; results name the node; nothing is left on the nodes', async () => {
    const copy = await exampleCopy();
    const root = dirname(copy.root);
    await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
    const suite = join(root, 'evals', 'suite.yaml');
    const before = treeHash(copy.repo);

    const local = await runCli(['eval', suite, '-n', '1', '--out', join(root, 'out-local'), '--json'], {
      cwd: root,
    });
    expect(local.code, local.stderr).toBe(0);

    const env = cleanEnv({ SLURM_CONF: ready().confFile });
    const out = join(root, 'out-slurm');
    const r = await runCli(
      ['eval', suite, '-n', '1', '--concurrency', '4', '--backend', 'slurm', '--out', out],
      {
        cwd: root,
        env,
      },
    );
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);

    const onSlurm = await readResults(out);
    expect(outcomes(onSlurm)).toEqual(outcomes(await readResults(join(root, 'out-local'))));
    expect(onSlurm.map((x) => x.outcome).sort()).toEqual(['failed', 'failed', 'passed', 'passed']);
    // Each trial names the node its attempt ran on, as a fleet's trial names its engine.
    const nodes = ready().nodes.map((n) => n.name);
    for (const x of onSlurm) expect(nodes).toContain(x.engine);
    // Four trials on three one-CPU nodes: some waited, and the progress said why in Slurm's words.
    expect(r.stderr).toMatch(/queued \d+: (Resources|Priority)/);
    expect(r.stderr).toContain('no trial waits in the queue');

    // No job of the eval and no container of this tool is left on any node; the repo is untouched.
    const jobs = await slurm(ready(), 'squeue', ['-h', '-o', '%i %j %T']);
    expect(jobs.split('\n').filter((l) => /sandbox-harness\./.test(l) && !/COMPLETING/.test(l))).toEqual([]);
    for (const n of ready().nodes) {
      const left = await n.engine.engine.containers.list({ [SLURM_LABEL.marker]: '1' });
      expect(left.map((c) => c.name)).toEqual([]);
    }
    expect(treeHash(copy.repo)).toBe(before);
  });

  it('a node lost mid-eval: its trial is retried once elsewhere and marked so, none is lost or scored twice, no container is left', async () => {
    const copy = await exampleCopy();
    const root = dirname(copy.root);
    await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
    const suite = join(root, 'evals', 'suite.yaml');
    const out = join(root, 'out-lost');
    const env = cleanEnv({ SLURM_CONF: ready().confFile });
    const { done } = startCli(
      ['eval', suite, '-n', '1', '--concurrency', '3', '--backend', 'slurm', '--out', out],
      {
        cwd: root,
        env,
      },
    );
    // The first attempt sandbox that runs: its node is the one lost.
    let victim: string | undefined;
    const deadline = Date.now() + 300_000;
    while (!victim) {
      if (Date.now() > deadline) throw new Error('no attempt sandbox ran');
      victim = (await ourContainers(ready())).find(
        (c) => c.role.startsWith('attempt-') && c.state === 'running',
      )?.node;
      if (!victim) await new Promise((r) => setTimeout(r, 200));
    }
    await killNode(ready(), victim);
    const r = await done;
    try {
      expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
      const results = await readResults(out);
      // Every trial once: none lost, none scored twice.
      expect(results.map((x) => `${x.taskId}#${x.trial}`)).toEqual([
        'fixes-threshold#0',
        'flaky-fix#0',
        'gives-up#0',
        'hard-codes-reviewed#0',
      ]);
      expect(results.map((x) => x.outcome).sort()).toEqual(['failed', 'failed', 'passed', 'passed']);
      const retried = results.filter((x) => x.infraRetried);
      expect(retried.length).toBeGreaterThanOrEqual(1);
      for (const x of retried) {
        expect(x.firstTry, JSON.stringify(results, null, 1)).toMatchObject({
          engine: victim,
          category: 'infrastructure',
        });
        expect(x.engine).not.toBe(victim);
      }
      expect(r.stderr).toMatch(new RegExp(`retried after infrastructure failure`));
    } finally {
      await restartNode(ready(), victim);
    }
    // The lost copy: once its node is back, Slurm ends the old job's script, whose trap removes it.
    const gone = Date.now() + 60_000;
    for (;;) {
      const left = await ourContainers(ready());
      if (left.length === 0) break;
      if (Date.now() > gone) throw new Error(`left on the nodes: ${JSON.stringify(left)}`);
      await new Promise((r2) => setTimeout(r2, 500));
    }
  });
});
