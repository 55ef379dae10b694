/**
 * `doctor --backend slurm` and `gc --backend slurm` through the built CLI against a real Slurm
 * cluster (tests/helpers/slurm.ts): doctor checks the controller, the partitions, the nodes and
 * probes a hardened container on each; gc cancels this tool's jobs and removes its containers,
 * of one run or all, and never a job or a container that is not its own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLURM_LABEL } from '../../src/sandbox/slurm/job-script.js';
import { SlurmBackend } from '../../src/sandbox/slurm/slurm-sandbox.js';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import { cleanEnv, runCli } from '../helpers/cli.js';
import { slurm, startSlurm, stopSlurm, type SlurmCluster } from '../helpers/slurm.js';

let cluster: SlurmCluster | undefined;
const ready = (): SlurmCluster => {
  if (!cluster) throw new Error('the Slurm lab did not start');
  return cluster;
};
const FOREIGN_JOB = 'someone-else';
const FOREIGN_CONTAINER = 'someone-elses-container';

beforeAll(async () => {
  cluster = await startSlurm({ nodes: 2 });
}, 300_000);

afterAll(async () => {
  if (cluster) await stopSlurm(cluster);
});

const cli = (args: string[]) => runCli(args, { env: cleanEnv({ SLURM_CONF: ready().confFile }) });

/** Names of the containers on every node's engine, this tool's or not. */
async function containers(): Promise<string[]> {
  const all = await Promise.all(
    ready().nodes.map(async (n) => (await n.engine.engine.containers.list({})).map((c) => c.name)),
  );
  return all.flat().sort();
}

async function jobNames(): Promise<string[]> {
  const out = await slurm(ready(), 'squeue', ['-h', '-t', 'PENDING,RUNNING', '-o', '%j']);
  return out.split('\n').filter(Boolean).sort();
}

describe('operator commands on a Slurm cluster', { timeout: 300_000 }, () => {
  it('doctor --backend slurm: the controller, partitions, nodes and a probe per node, all passing', async () => {
    const r = await cli(['doctor', '--backend', 'slurm', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      ok: boolean;
      checks: { name: string; ok: boolean; detail: string }[];
    };
    expect(report.ok).toBe(true);
    expect(report.checks.map((c) => c.name)).toEqual([
      'controller',
      'partitions',
      'nodes',
      'node node1',
      'node node2',
    ]);
    for (const c of report.checks.filter((x) => x.name.startsWith('node ')))
      expect(c.detail).toMatch(/only lo, no capabilities, no host mounts/);
  });

  it('doctor --backend slurm without a controller: infrastructure, exit 3, with what to check', async () => {
    const r = await runCli(['doctor', '--backend', 'slurm', '--json'], {
      env: cleanEnv({ SLURM_CONF: '/nonexistent/slurm.conf' }),
    });
    expect(r.code).not.toBe(0);
    expect(`${r.stdout}${r.stderr}`).toMatch(/slurm\.conf/);
  });

  it('gc --backend slurm removes only its own jobs and containers: of one run, then all', async () => {
    const backend = new SlurmBackend({ conf: ready().confFile, timeLimitMinutes: 10 });
    const a = await backend.create({ image: DEFAULT_BASE_IMAGE, runId: 'gc-run-a', role: 'attempt-1' });
    const b = await backend.create({ image: DEFAULT_BASE_IMAGE, runId: 'gc-run-b', role: 'attempt-1' });
    // Someone else's job, and someone else's container on a node (no labels of this tool).
    await slurm(ready(), 'sbatch', ['-J', FOREIGN_JOB, '-o', '/dev/null', '--wrap', 'sleep 600']);
    await slurm(ready(), 'srun', [
      '-w',
      'node1',
      '-N1',
      '-n1',
      'docker',
      'run',
      '-d',
      '--name',
      FOREIGN_CONTAINER,
      DEFAULT_BASE_IMAGE,
      'sleep',
      '600',
    ]);
    try {
      expect(await containers()).toEqual([a.id, b.id, FOREIGN_CONTAINER].sort());

      const one = await cli(['gc', '--backend', 'slurm', '--run', 'gc-run-a', '--json']);
      expect(one.code, one.stderr).toBe(0);
      expect(await containers()).toEqual([b.id, FOREIGN_CONTAINER].sort());
      expect(await jobNames()).toEqual(['sandbox-harness.gc-run-b', FOREIGN_JOB]);

      const all = await cli(['gc', '--backend', 'slurm', '--json']);
      expect(all.code, all.stderr).toBe(0);
      expect(await containers()).toEqual([FOREIGN_CONTAINER]);
      expect(await jobNames()).toEqual([FOREIGN_JOB]);
      // (The foreign container carries the base image's own `sandbox-harness` label: only a job label is this tool's sandbox.)
      for (const n of ready().nodes)
        expect(await n.engine.engine.containers.list({ [SLURM_LABEL.job]: true })).toEqual([]);
    } finally {
      await Promise.all([a.dispose(), b.dispose()]);
      await slurm(ready(), 'scancel', [`--name=${FOREIGN_JOB}`]).catch(() => '');
      await slurm(ready(), 'srun', [
        '-w',
        'node1',
        '-N1',
        '-n1',
        'docker',
        'rm',
        '-f',
        FOREIGN_CONTAINER,
      ]).catch(() => '');
    }
  });
});
