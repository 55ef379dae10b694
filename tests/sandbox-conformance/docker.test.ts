import { describe, expect, it } from 'vitest';
import { networkInterfaces } from 'node:os';
import { DockerBackend, dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { DockerEngine, dockerEngine } from '../../src/sandbox/docker/engine.js';
import { KEPT_NAME_PREFIX, LABEL, containerLabels } from '../../src/sandbox/docker/labels.js';
import { reapOrphans } from '../../src/sandbox/docker/gc.js';
import { spawn } from 'node:child_process';
import { describeSandboxConformance } from './conformance.js';
import { describeFileConformance, type ArrangeStep } from './files.js';
import { fixtureImage } from '../helpers/docker.js';
import { shellQuote } from '../../src/sandbox/shell.js';
import type { Sandbox } from '../../src/sandbox/types.js';

/** The docker0 bridge address: reachable from a networked container, so a real test of `none`. */
function bridgeAddress(): string {
  const docker0 = networkInterfaces().docker0?.find((a) => a.family === 'IPv4');
  return docker0?.address ?? '192.0.2.1';
}

describeSandboxConformance({
  name: 'docker',
  backend: () => dockerBackend(),
  image: () => fixtureImage('conformance'),
  reportedEnv: async (sandbox) => (await dockerEngine().inspectContainer(sandbox.id))?.env ?? [],
  outsideAddress: bridgeAddress,
});

/** The same sandbox with every file call made as the agent's tools make them: over the command channel. */
function overTheChannel(sandbox: Sandbox): Sandbox {
  return new Proxy(sandbox, {
    get(target, key, receiver) {
      if (key === 'readFile' || key === 'listFiles')
        return (path: string, options = {}) => target[key](path, { ...options, fast: true });
      if (key === 'writeFiles')
        return (files: Parameters<Sandbox['writeFiles']>[0], options = {}) =>
          target.writeFiles(files, { ...options, fast: true });
      const value: unknown = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

for (const fast of [false, true]) {
  const made: Sandbox[] = [];
  describeFileConformance({
    name: fast ? 'docker, file calls over the command channel' : 'docker',
    make: async (spec = {}) => {
      const sandbox = await dockerBackend().create({
        image: await fixtureImage('conformance'),
        role: 'file-conformance',
        ...spec,
      });
      made.push(sandbox);
      return fast ? overTheChannel(sandbox) : sandbox;
    },
    arrange,
    cleanup: async () => {
      await Promise.all(made.splice(0).map((s) => s.dispose()));
    },
  });
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

describe('docker backend specifics', () => {
  it('applies the hardening baseline to every container', async () => {
    const sandbox = await dockerBackend().create({
      image: await fixtureImage('conformance'),
      role: 'hardening',
    });
    try {
      const details = await dockerEngine().inspectContainer(sandbox.id);
      expect(details?.hostConfig).toMatchObject({
        NetworkMode: 'none',
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges'],
        Privileged: false,
        Init: true,
        ReadonlyRootfs: false,
        IpcMode: 'private',
      });
      const host = details!.hostConfig as {
        Memory: number;
        MemorySwap: number;
        PidsLimit: number;
        Binds: unknown;
        Tmpfs: Record<string, string>;
      };
      expect(host.Memory).toBeGreaterThan(0);
      expect(host.MemorySwap).toBe(host.Memory);
      expect(host.PidsLimit).toBeGreaterThan(0);
      expect(host.Binds ?? []).toEqual([]);
      expect(host.Tmpfs['/tmp']).toMatch(/size=/);
      expect(details!.labels).toMatchObject({ [LABEL.marker]: '1', [LABEL.role]: 'hardening' });
      for (const key of [LABEL.run, LABEL.session, LABEL.created, LABEL.keep])
        expect(details!.labels[key]).toBeTruthy();
    } finally {
      await sandbox.dispose();
    }
  });

  it('keeps a container when asked, stopped and renamed so the reaper leaves it', async () => {
    const sandbox = await dockerBackend().create({
      image: await fixtureImage('conformance'),
      role: 'kept',
      runId: 'conformance-kept',
    });
    await sandbox.dispose({ keep: true });
    const details = await dockerEngine().inspectContainer(sandbox.id);
    expect(details?.running).toBe(false);
    expect(details?.name).toMatch(/^sandbox-harness-kept-/);
    const again = await dockerBackend().attach({ id: sandbox.id, runId: 'conformance-kept' });
    expect((await again.exec('cat src/greeting.txt')).stdout).toBe('hello\n');
    await again.dispose();
    expect(await dockerEngine().inspectContainer(sandbox.id)).toBeUndefined();
  });

  it('reaps containers whose owning harness process is gone, but not kept ones', async () => {
    const deadPid = await new Promise<number>((resolve) => {
      const child = spawn('true');
      child.on('exit', () => resolve(child.pid!));
    });
    const image = await fixtureImage('conformance');
    const make = (name: string) =>
      dockerEngine().createContainer({
        name,
        image,
        entrypoint: ['sleep'],
        cmd: ['infinity'],
        user: '1000:1000',
        workingDir: '/workspace',
        env: [],
        labels: { ...containerLabels({ role: 'orphan' }), [LABEL.ownerPid]: String(deadPid) },
        memoryBytes: 256 * 1024 * 1024,
        nanoCpus: 1e9,
        pids: 64,
        maxFileBytes: 1024 * 1024,
        tmpfsBytes: 1024 * 1024,
        nofile: 256,
      });
    const suffix = Math.random().toString(36).slice(2, 8);
    const orphan = await make(`sandbox-harness-orphan-${suffix}`);
    const kept = await make(`${KEPT_NAME_PREFIX}orphan-${suffix}`);
    try {
      const removed = await reapOrphans(dockerEngine());
      expect(removed).toContain(orphan);
      expect(removed).not.toContain(kept);
      expect(await dockerEngine().inspectContainer(orphan)).toBeUndefined();
      expect(await dockerEngine().inspectContainer(kept)).toBeDefined();
    } finally {
      await dockerEngine().removeContainer(orphan);
      await dockerEngine().removeContainer(kept);
    }
  });

  it('says what to do when the daemon cannot be reached', async () => {
    const saved = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = 'unix:///tmp/sandbox-harness-no-such-docker.sock';
    try {
      const backend = new DockerBackend(new DockerEngine());
      await expect(backend.create({ image: 'anything' })).rejects.toMatchObject({
        code: 'SANDBOX_UNAVAILABLE',
        message: expect.stringContaining('DOCKER_HOST=unix:///tmp/sandbox-harness-no-such-docker.sock'),
        hint: expect.stringMatching(/setup|doctor/),
      });
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
  });
});
