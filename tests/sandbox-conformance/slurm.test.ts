/**
 * The sandbox contract on the `slurm` backend, against a real Slurm cluster the test starts
 * itself (tests/helpers/slurm.ts: munge, slurmctld, three slurmd nodes, each with its own Docker
 * engine in its own network namespace): every sandbox a batch job, its container made by the
 * node's own `docker` from the shared hardened spec, every call a job step. The same suite as
 * Docker's (`conformance.ts`) and the file contract (`files.ts`), plus what is Slurm's own: the
 * job's options, exit codes that travel in-band, and nothing left on any node.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLURM_LABEL } from '../../src/sandbox/slurm/job-script.js';
import { SlurmBackend, type SlurmSandbox } from '../../src/sandbox/slurm/slurm-sandbox.js';
import { fenceNode } from '../../src/sandbox/slurm/slurm-operator.js';
import { SandboxDead, SandboxUnavailable } from '../../src/errors.js';
import { shellQuote } from '../../src/sandbox/shell.js';
import type { Sandbox, SandboxBackend } from '../../src/sandbox/types.js';
import { fixtureImage } from '../helpers/docker.js';
import { killNode, restartNode, slurm, startSlurm, stopSlurm, type SlurmCluster } from '../helpers/slurm.js';
import { describeSandboxConformance } from './conformance.js';
import { describeFileConformance, type ArrangeStep } from './files.js';

let cluster: SlurmCluster | undefined;
let image = '';
let backend: SlurmBackend | undefined;
const ready = (): SlurmCluster => {
  if (!cluster) throw new Error('the Slurm lab did not start');
  return cluster;
};
const theBackend = (): SlurmBackend => {
  backend ??= new SlurmBackend({ conf: ready().confFile, timeLimitMinutes: 30 });
  return backend;
};

beforeAll(async () => {
  image = await fixtureImage('conformance');
  cluster = await startSlurm({ nodes: 3, images: [image] });
}, 300_000);

afterAll(async () => {
  if (cluster) await stopSlurm(cluster);
});

/** Every container of this backend on every node's engine, by label. */
async function containersOnNodes(filter: Record<string, string>) {
  const all = await Promise.all(
    ready().nodes.map(async (n) =>
      (await n.engine.engine.containers.list({ [SLURM_LABEL.marker]: '1', ...filter })).map((c) => ({
        node: n.name,
        ...c,
      })),
    ),
  );
  return all.flat();
}

async function arrange(sandbox: Sandbox, steps: ArrangeStep[]): Promise<void> {
  const q = shellQuote;
  const lines = steps.map((step) => {
    if ('symlink' in step)
      return `mkdir -p "$(dirname ${q(step.symlink.path)})" && ln -s ${q(step.symlink.target)} ${q(step.symlink.path)}`;
    if ('hardlink' in step) return `ln ${q(step.hardlink.existing)} ${q(step.hardlink.path)}`;
    if ('fifo' in step) return `mkfifo ${q(step.fifo)}`;
    if ('mkdir' in step) return `mkdir -p ${q(step.mkdir)}`;
    if ('remove' in step) return `rm -rf ${q(step.remove)}`;
    if ('write' in step) return `printf %s ${q(step.write.content)} > ${q(step.write.path)}`;
    return `chmod ${step.chmod.mode.toString(8)} ${q(step.chmod.path)}`;
  });
  const result = await sandbox.exec(lines.join(' && '));
  if (result.exitCode !== 0) throw new Error(`arrange failed: ${result.stderr}`);
}

describeSandboxConformance({
  name: 'slurm',
  backend: (): SandboxBackend => theBackend(),
  image: async () => image,
  reportedEnv: async (sandbox) => {
    const found = await Promise.all(
      ready().nodes.map(async (n) => (await n.engine.engine.containers.inspect(sandbox.id))?.env),
    );
    return found.find((env) => env !== undefined) ?? [];
  },
  network: {
    // The host end of the first node's link: every node reaches it (the controller listens there).
    hostAddress: async () => ready().controller.address,
    // A plain step on a node is networked: the control that the address really is reachable.
    connectFromNetworked: async (address, port) => {
      const script = `const s=require('net').connect(${port},'${address}');s.on('connect',()=>{console.log('connected');s.destroy()});s.on('error',(e)=>{console.log(e.code)})`;
      const out = await slurm(ready(), 'srun', ['-w', 'node2', '-N1', '-n1', process.execPath, '-e', script]);
      return out.trim();
    },
  },
  exists: async (id) => (await containersOnNodes({})).some((c) => c.name === id),
  sandboxesOfRun: async (runId) => (await containersOnNodes({ [SLURM_LABEL.run]: runId })).map((c) => c.name),
});

{
  const made: Sandbox[] = [];
  describeFileConformance({
    name: 'slurm',
    make: async (spec = {}) => {
      const sandbox = await theBackend().create({ image, role: 'file-conformance', ...spec });
      made.push(sandbox);
      return sandbox;
    },
    arrange,
    cleanup: async () => {
      await Promise.all(made.splice(0).map((s) => s.dispose()));
    },
  });
}

describe('slurm: what is special to a sandbox as a job', () => {
  it('is a --no-requeue job with none of the host variables, and leaves no job or container after dispose', async () => {
    process.env.SANDBOX_HARNESS_TEST_SECRET = 'must-not-reach-the-cluster';
    let sandbox: Sandbox | undefined;
    try {
      sandbox = await theBackend().create({ image, role: 'specifics', runId: 'slurm-specifics' });
      const job = /-(\d+)-r0$/.exec(sandbox.id)?.[1] ?? '';
      const show = await slurm(ready(), 'scontrol', ['-o', 'show', 'job', job]);
      expect(show).toMatch(/Requeue=0/);
      expect(show).toMatch(/JobName=sandbox-harness\.slurm-specifics/);
      const env = await slurm(ready(), 'scontrol', ['show', 'job', job, '--details']);
      expect(env).not.toContain('must-not-reach-the-cluster');
      const r = await sandbox.exec('env');
      expect(r.stdout).not.toContain('must-not-reach-the-cluster');
      // Exit codes pass exactly, through srun and the node's docker exec.
      for (const code of [0, 1, 42, 125, 126, 127, 255]) {
        expect((await sandbox.exec(`exit ${code}`)).exitCode).toBe(code);
      }
      await sandbox.dispose();
      expect(await containersOnNodes({ [SLURM_LABEL.run]: 'slurm-specifics' })).toEqual([]);
      const left = await slurm(ready(), 'squeue', ['-h', '-j', job, '-o', '%T']).catch(() => '');
      expect(['', 'COMPLETING']).toContain(left.trim());
    } finally {
      delete process.env.SANDBOX_HARNESS_TEST_SECRET;
      await sandbox?.dispose();
    }
  });

  it('a cancelled job takes its container with it (the trap)', async () => {
    const sandbox = await theBackend().create({ image, role: 'cancel', runId: 'slurm-cancel' });
    expect(await containersOnNodes({ [SLURM_LABEL.run]: 'slurm-cancel' })).toHaveLength(1);
    await slurm(ready(), 'scancel', ['--name=sandbox-harness.slurm-cancel']);
    // 0.3-3 s on an idle machine; the node's dockerd finishes the removal even when Slurm's
    // KillWait ends the trap's docker client first, which on a loaded 2-core host takes longer.
    const deadline = Date.now() + 60_000;
    while ((await containersOnNodes({ [SLURM_LABEL.run]: 'slurm-cancel' })).length > 0) {
      if (Date.now() > deadline) throw new Error('the container outlived its job');
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(await sandbox.isAlive()).toBe(false);
    await sandbox.dispose();
  });
});

describe('slurm: a node lost mid-command', () => {
  it('is infrastructure, not a dead sandbox (never exit 0); nothing more runs in it; the lost copy is fenced when the node returns', async () => {
    const sandbox = (await theBackend().create({ image, role: 'lost', runId: 'slurm-lost' })) as SlurmSandbox;
    const { node, job } = sandbox.address;
    const running = sandbox.exec('sleep 120', { timeoutMs: 180_000 });
    running.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1000));
    const lostAt = Date.now();
    await killNode(ready(), node);
    // srun itself exits 0 once Slurm declares the node down: only the missing end record says why.
    const error = await running.then(
      (r) => new Error(`exec answered ${JSON.stringify(r)}`),
      (e: unknown) => e,
    );
    // The cluster failed, not the sandbox's processes: infrastructure (an eval retries it
    // elsewhere), never SandboxDead (which the agent loop takes as "the sandbox stopped").
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect(error).not.toBeInstanceOf(SandboxDead);
    expect(String(error)).toMatch(new RegExp(`node ${node} was lost`));
    expect(Date.now() - lostAt).toBeLessThan(60_000);
    // The lost copy is never read again, not even once its node is back.
    await expect(sandbox.exec('true')).rejects.toThrow(SandboxUnavailable);
    expect(await sandbox.isAlive()).toBe(false);
    // The container lives on, on the lost node (slurmd dead is not the node dead).
    expect((await containersOnNodes({ [SLURM_LABEL.job]: job })).map((c) => c.state)).toEqual(['running']);
    await restartNode(ready(), node);
    await fenceNode(theBackend().client, node);
    const deadline = Date.now() + 20_000;
    while ((await containersOnNodes({ [SLURM_LABEL.job]: job })).length > 0) {
      if (Date.now() > deadline) throw new Error('the lost copy outlived the fence');
      await new Promise((r) => setTimeout(r, 200));
    }
    await sandbox.dispose();
  });
});

describe('slurm: a node whose slurmd died before Slurm noticed (SlurmdTimeout is 300 s by default)', () => {
  let late: SlurmCluster | undefined;
  let lateBackend: SlurmBackend | undefined;
  const lateReady = () => {
    if (!late || !lateBackend) throw new Error('the second Slurm lab did not start');
    return { cluster: late, backend: lateBackend };
  };
  beforeAll(async () => {
    // Slurm keeps calling a silent node fine for 5 minutes: only the harness's own steps find it.
    late = await startSlurm({ nodes: 2, images: [image], slurmdTimeoutSec: 300 });
    lateBackend = new SlurmBackend({ conf: late.confFile, timeLimitMinutes: 30 });
  }, 300_000);
  afterAll(async () => {
    if (late) await stopSlurm(late);
  });

  it('a shared sandbox joining a job there goes to another node; the next command there is infrastructure; the lost copy is removed once it is back', async () => {
    const { cluster: c, backend: b } = lateReady();
    const sandbox = (await b.create({ image, role: 'attempt-0', runId: 'late-1' })) as SlurmSandbox;
    const { node, job } = sandbox.address;
    await killNode(c, node);
    // Slurm still says RUNNING and the node allocated; no step can launch there.
    expect((await slurm(c, 'squeue', ['-h', '-j', job, '-o', '%T'])).trim()).toBe('RUNNING');
    // The eval's baseline joins any job this process holds: the held one is on the dead node,
    // which its first step finds out. It is made once more, on the other node.
    const baseline = (await b.create({ image, role: 'baseline', runId: 'late-2' })) as SlurmSandbox;
    try {
      expect(baseline.address.node).not.toBe(node);
      expect((await baseline.exec('echo ok')).stdout.trim()).toBe('ok');
    } finally {
      await baseline.dispose();
    }
    // The sandbox there: its next command is the node lost (infrastructure), never "the sandbox died".
    const error = await sandbox.exec('true').then(
      (r) => new Error(`exec answered ${JSON.stringify(r)}`),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect(error).not.toBeInstanceOf(SandboxDead);
    expect(String(error)).toMatch(new RegExp(`node ${node} was lost`));
    await sandbox.dispose();
    // Back: the job the harness gave up is ended by Slurm, and the lost copy goes with it.
    await restartNode(c, node);
    const lost = async () =>
      (await c.nodes.find((n) => n.name === node)!.engine.engine.containers.list({ [SLURM_LABEL.job]: job }))
        .length;
    const deadline = Date.now() + 60_000;
    while ((await lost()) > 0) {
      if (Date.now() > deadline) throw new Error('the lost copy outlived the return of its node');
      await new Promise((r) => setTimeout(r, 500));
    }
  });
});

// Never a leftover: the lab's engines are asked directly after everything above.
afterAll(async () => {
  if (!cluster) return;
  const left = await containersOnNodes({});
  if (left.length) {
    throw new Error(`containers left on the nodes: ${left.map((c) => `${c.node}/${c.name}`).join(', ')}`);
  }
});
