/**
 * The Slurm lab itself (tests/helpers/slurm.ts), on which the `slurm` backend's tests stand: a
 * real controller and three real nodes, each a slurmd in its own network namespace with its own
 * hostname and its own Docker engine. It proves what the backend will rely on: steps land on the
 * node they name, a node's `docker` is that node's engine, a container there is as hardened as a
 * local sandbox, drained and lost nodes look the way Slurm says they do, and the lab leaves
 * nothing behind. It also shows the fact that makes fencing necessary: a batch job requeued off
 * a lost node runs again elsewhere while its first container keeps running on the lost node,
 * and Slurm kills the old batch script when the node returns, but not that container.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimFolder, ENGINE_PREFIX, ENGINES_ROOT, ownerOf } from '../helpers/engines.js';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import {
  drainNode,
  killNode,
  nodeStates,
  restartNode,
  resumeNode,
  slurm,
  SLURM_ROOT,
  slurmTraces,
  startSlurm,
  stopSlurm,
  waitFor,
  waitForNode,
  type SlurmCluster,
  type SlurmNode,
} from '../helpers/slurm.js';

let cluster: SlurmCluster;

beforeAll(async () => {
  cluster = await startSlurm({ nodes: 3 });
}, 300_000);

afterAll(async () => {
  if (cluster) await stopSlurm(cluster);
});

const node = (name: string): SlurmNode => {
  const found = cluster.nodes.find((n) => n.name === name);
  if (!found) throw new Error(`no ${name}`);
  return found;
};

/** A node's engine asked from the host: names of its running containers of `job`. */
async function running(n: SlurmNode, job: string): Promise<string[]> {
  const containers = await n.engine.engine.containers.list({ 'shlab.job': job });
  return containers
    .filter((c) => c.state === 'running')
    .map((c) => c.name)
    .sort();
}

async function jobState(
  job: string,
): Promise<{ state: string; node: string; restarts: number; reason: string }> {
  const line = await slurm(cluster, 'scontrol', ['-o', 'show', 'job', job]);
  const field = (name: string) => new RegExp(`(?:^|\\s)${name}=(\\S*)`).exec(line)?.[1] ?? '';
  return {
    state: field('JobState'),
    node: field('NodeList'),
    restarts: Number(field('Restarts')),
    reason: field('Reason'),
  };
}

describe('a Slurm cluster the tests start themselves', () => {
  it('comes up with every node idle, in both partitions', async () => {
    const rows = (await slurm(cluster, 'sinfo', ['-h', '-N', '-o', '%N %P %t'])).trim().split('\n').sort();
    expect(rows).toEqual(['node1 main* idle', 'node2 main* idle', 'node3 main* idle', 'node3 solo idle']);
    expect([...(await nodeStates(cluster)).values()]).toEqual(['IDLE', 'IDLE', 'IDLE']);
  });

  it('runs a step on the node it names, under that node hostname, and `--partition` picks its nodes', async () => {
    const names = await Promise.all(
      cluster.nodes.map(async (n) => (await slurm(cluster, 'srun', ['-w', n.name, 'hostname'])).trim()),
    );
    expect(names).toEqual(['node1', 'node2', 'node3']);
    expect((await slurm(cluster, 'srun', ['-p', 'solo', 'hostname'])).trim()).toBe('node3');
  });

  it("runs a hardened container on each node's own engine: only lo, no capabilities, no host mounts", async () => {
    const probe = [
      'echo "net $(ls /sys/class/net | tr "\\n" " ")"',
      'grep CapEff /proc/self/status',
      'echo "uid $(id -u)"',
      'cat /proc/self/mountinfo',
    ].join('; ');
    await Promise.all(
      cluster.nodes.map(async (n) => {
        // A plain `docker` on the node is the node's engine: its data root is that engine's.
        const root = await slurm(cluster, 'srun', [
          '-w',
          n.name,
          'docker',
          'info',
          '--format',
          '{{.DockerRootDir}}',
        ]);
        expect(root.trim()).toBe(`${n.engine.dir}/data`);
        const out = await slurm(cluster, 'srun', [
          '-w',
          n.name,
          'docker',
          'run',
          '--rm',
          '--network',
          'none',
          '--cap-drop',
          'ALL',
          '--security-opt',
          'no-new-privileges',
          '--user',
          '1000',
          DEFAULT_BASE_IMAGE,
          'sh',
          '-c',
          probe,
        ]);
        const lines = out.trim().split('\n');
        expect(lines[0]?.trim()).toBe('net lo');
        expect(lines[1]).toMatch(/^CapEff:\s+0+$/);
        expect(lines[2]).toBe('uid 1000');
        // Every mount backed by a disk is one of the engine's own per-container files.
        const virtual = new Set([
          'overlay',
          'proc',
          'tmpfs',
          'devpts',
          'sysfs',
          'cgroup',
          'cgroup2',
          'mqueue',
        ]);
        const onDisk = lines.slice(3).flatMap((line) => {
          const [left = '', right = ''] = line.split(' - ');
          const [, , , root = '', mountPoint = ''] = left.split(' ');
          const [fstype = ''] = right.split(' ');
          return virtual.has(fstype) ? [] : [{ mountPoint, root }];
        });
        expect(onDisk.map((m) => m.mountPoint).sort()).toEqual([
          '/etc/hostname',
          '/etc/hosts',
          '/etc/resolv.conf',
        ]);
        for (const m of onDisk) expect(m.root.startsWith(`${n.engine.dir}/data/containers/`)).toBe(true);
      }),
    );
  });

  it('a drained node takes no new job, and Slurm says why the job waits', async () => {
    await drainNode(cluster, 'node2', 'lab test');
    try {
      expect((await nodeStates(cluster)).get('node2')).toBe('IDLE+DRAIN');
      const job = (
        await slurm(cluster, 'sbatch', ['--parsable', '-w', 'node2', '-o', '/dev/null', '--wrap', 'true'])
      ).trim();
      await waitFor(
        async () => (await jobState(job)).reason.startsWith('ReqNodeNotAvail'),
        15_000,
        async () => JSON.stringify(await jobState(job)),
      );
      expect((await slurm(cluster, 'squeue', ['-h', '-o', '%r', '-j', job])).trim()).toBe(
        'ReqNodeNotAvail, UnavailableNodes:node2',
      );
      await resumeNode(cluster, 'node2');
      await waitFor(
        async () => (await jobState(job)).state === 'COMPLETED',
        15_000,
        async () => JSON.stringify(await jobState(job)),
      );
    } finally {
      await resumeNode(cluster, 'node2').catch(() => undefined);
    }
  });

  it('a killed node goes DOWN; its requeued job runs again elsewhere while the first container keeps running on the lost node', async () => {
    // A sandbox as a batch job: the container carries the job id and the run (restart count),
    // and the script removes it when Slurm signals the job.
    const script = [
      '#!/bin/sh',
      'name="lab-$SLURM_JOB_ID-r${SLURM_RESTART_COUNT:-0}"',
      'trap \'docker rm -f "$name" >/dev/null 2>&1; exit 0\' TERM INT',
      'docker run -d --name "$name" --label shlab.job="$SLURM_JOB_ID" --label shlab.run="${SLURM_RESTART_COUNT:-0}" \\',
      `  --network none --cap-drop ALL --security-opt no-new-privileges --user 1000 --init ${DEFAULT_BASE_IMAGE} sleep infinity >/dev/null`,
      'docker wait "$name" >/dev/null & wait $!',
      '',
    ].join('\n');
    const lost = node('node3');
    // Only node3 is free when the job starts; the others take it after node3 is lost.
    await drainNode(cluster, 'node1');
    await drainNode(cluster, 'node2');
    let job = '';
    try {
      job = (await slurm(cluster, 'sbatch', ['--parsable', '-o', '/dev/null'], { input: script })).trim();
      await waitFor(
        async () => (await running(lost, job)).length === 1,
        30_000,
        async () => JSON.stringify(await jobState(job)),
      );
    } finally {
      await resumeNode(cluster, 'node1');
      await resumeNode(cluster, 'node2');
    }
    expect(await jobState(job)).toMatchObject({ state: 'RUNNING', node: 'node3', restarts: 0 });

    await killNode(cluster, 'node3');
    const down = await waitForNode(cluster, 'node3', (s) => s.startsWith('DOWN'), 40_000);
    expect(down).toBe('DOWN+NOT_RESPONDING');
    // Requeued: pending until its credential lifetime passes, then started on another node.
    await waitFor(
      async () => {
        const now = await jobState(job);
        return now.state === 'RUNNING' && now.restarts === 1;
      },
      60_000,
      async () => JSON.stringify(await jobState(job)),
    );
    const second = node((await jobState(job)).node);
    expect(second.name).not.toBe('node3');
    await waitFor(
      async () => (await running(second, job)).length === 1,
      30_000,
      async () => `no container of job ${job} on ${second.name}`,
    );
    // The same job runs twice: its first container lives on, on the node Slurm gave up on.
    expect(await running(lost, job)).toEqual([`lab-${job}-r0`]);
    expect(await running(second, job)).toEqual([`lab-${job}-r1`]);

    // The node comes back: Slurm kills the old batch script (SIGKILL: no trap runs), and the
    // old container is still there. Only a fence removes it.
    await restartNode(cluster, 'node3');
    await waitFor(
      async () => (await slurm(cluster, 'squeue', ['-h', '-s', '-w', 'node3', '-o', '%i'])).trim() === '',
      30_000,
      async () =>
        `steps left on node3: ${await slurm(cluster, 'squeue', ['-h', '-s', '-w', 'node3', '-o', '%i'])}`,
    );
    await new Promise((r) => setTimeout(r, 1000));
    expect(await running(lost, job)).toEqual([`lab-${job}-r0`]);

    // A fence, as a step on the returned node: every labelled container whose job is not
    // running there under the same run is removed, nothing of it read.
    const fence = [
      'me=$(hostname)',
      'docker ps --filter label=shlab.job --format \'{{.ID}} {{.Label "shlab.job"}} {{.Label "shlab.run"}}\' |',
      'while read id job run; do',
      '  now=$(scontrol -o show job "$job" 2>/dev/null)',
      '  case "$now" in *"JobState=RUNNING "*) ;; *) now= ;; esac',
      '  case "$now" in *" NodeList=$me "*) ;; *) now= ;; esac',
      '  case "$now" in *" Restarts=$run "*) echo "kept $job $run"; continue ;; esac',
      '  docker rm -f "$id" >/dev/null && echo "fenced $job $run"',
      'done',
    ].join('\n');
    const fenced = await slurm(cluster, 'srun', ['-w', 'node3', '-N1', '-n1', 'sh', '-c', fence]);
    expect(fenced.trim()).toBe(`fenced ${job} 0`);
    expect(await running(lost, job)).toEqual([]);
    expect(await running(second, job)).toEqual([`lab-${job}-r1`]);

    // Cancelling the job signals its batch script, whose trap removes the current container.
    await slurm(cluster, 'scancel', [job]);
    await waitFor(
      async () => (await running(second, job)).length === 0,
      30_000,
      async () => `job ${job} still has a container on ${second.name}`,
    );
  });

  it('stop leaves nothing behind: no process, namespace, mount, cgroup or folder', async () => {
    // A client still attached when the cluster stops goes with it.
    const hanging = slurm(cluster, 'srun', ['-w', 'node1', 'sleep', '300'], { timeoutMs: 120_000 }).catch(
      (error: unknown) => error,
    );
    await waitFor(
      async () => (await slurm(cluster, 'squeue', ['-h', '-s', '-w', 'node1', '-o', '%i'])).trim() !== '',
      15_000,
      async () => 'the step did not start',
    );
    expect(await slurmTraces(cluster)).not.toEqual([]);
    await stopSlurm(cluster);
    expect(await slurmTraces(cluster)).toEqual([]);
    expect(await hanging).toBeInstanceOf(Error);
    // Again: nothing to do, no error.
    await stopSlurm(cluster);
    expect(await slurmTraces(cluster)).toEqual([]);
    // Its names are free now, and other starts take them (folders claimed here stand for a
    // cluster and a node's engine): a late stop of this one leaves them alone.
    const owner = await ownerOf();
    const first = node('node1');
    const taken = await Promise.all([
      claimFolder({
        root: SLURM_ROOT,
        prefix: basename(cluster.dir).replace(/\d+$/, ''),
        owner,
        max: Number(/\d+$/.exec(cluster.dir)?.[0]),
        usable: (_slot, name) => join(SLURM_ROOT, name) === cluster.dir,
      }).catch(() => undefined),
      claimFolder({
        root: ENGINES_ROOT,
        prefix: ENGINE_PREFIX,
        owner,
        max: first.engine.slot,
        usable: (_slot, name) => name === first.engine.name,
      }).catch(() => undefined),
    ]);
    try {
      await stopSlurm(cluster);
      expect(existsSync(cluster.dir)).toBe(true);
      expect(existsSync(first.engine.dir)).toBe(true);
      expect(await slurmTraces(cluster)).toEqual([]);
    } finally {
      for (const t of taken) if (t) await rm(t.dir, { recursive: true, force: true });
    }
  });
});
