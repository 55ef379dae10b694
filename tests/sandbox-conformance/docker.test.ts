import { describe, expect, it } from 'vitest';
import { DockerBackend, dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { DockerEngine, dockerEngine } from '../../src/sandbox/docker/engine.js';
import { KEPT_NAME_PREFIX, LABEL, containerLabels } from '../../src/sandbox/docker/labels.js';
import { reapOrphans } from '../../src/sandbox/docker/gc.js';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { describeSandboxConformance } from './conformance.js';
import { describeFileConformance, type ArrangeStep } from './files.js';
import { fixtureImage } from '../helpers/docker.js';
import { cpuStats, engineGet } from '../helpers/engine-api.js';
import { shellQuote } from '../../src/sandbox/shell.js';
import type { Sandbox } from '../../src/sandbox/types.js';

const run = promisify(execFile);

/**
 * The default bridge's gateway: an address of this host that a networked container reaches.
 * The daemon is asked (docker0 is down while no container uses it, and Node lists only
 * interfaces that are up); when it names no gateway, the bridge takes the subnet's first
 * address. The control connection in the test proves the address right either way.
 */
async function bridgeAddress(): Promise<string> {
  const bridge = await engineGet<{ IPAM?: { Config?: { Gateway?: string; Subnet?: string }[] } }>(
    '/networks/bridge',
  );
  const v4 = bridge?.IPAM?.Config?.find((c) => c.Subnet && !c.Subnet.includes(':'));
  const fromSubnet = v4?.Subnet?.replace(/\.\d+\/\d+$/, '.1');
  const address = v4?.Gateway ?? fromSubnet;
  if (!address) {
    throw new Error(
      `the daemon has no default bridge with an IPv4 subnet (got ${JSON.stringify(bridge?.IPAM)}): the network test needs one (dockerd without --bridge none)`,
    );
  }
  return address;
}

/** Connects from a throwaway container on the default bridge: the control for the network test. */
async function connectFromNetworked(address: string, port: number): Promise<string> {
  const name = `sandbox-harness-test-netcontrol-${randomBytes(4).toString('hex')}`;
  const script = `const s=require('net').connect(${port},'${address}');s.on('connect',()=>{console.log('connected');s.destroy()});s.on('error',(e)=>{console.log(e.code)})`;
  try {
    const { stdout } = await run('docker', [
      'run',
      '--rm',
      '--name',
      name,
      '--network',
      'bridge',
      '--label',
      'sandbox-harness.test=network-control',
      await fixtureImage('conformance'),
      'node',
      '-e',
      script,
    ]);
    return stdout.trim();
  } finally {
    await run('docker', ['rm', '-f', name]).catch(() => undefined);
  }
}

describeSandboxConformance({
  name: 'docker',
  backend: () => dockerBackend(),
  image: () => fixtureImage('conformance'),
  reportedEnv: async (sandbox) => (await dockerEngine().inspectContainer(sandbox.id))?.env ?? [],
  network: { hostAddress: bridgeAddress, connectFromNetworked },
  exists: async (id) => (await dockerEngine().inspectContainer(id)) !== undefined,
  sandboxesOfRun: async (runId) =>
    (await dockerEngine().listContainers({ [LABEL.run]: runId })).map((c) => c.id),
});

/** A container labelled as made by a harness process that no longer exists. */
async function orphanContainer(name: string): Promise<string> {
  const deadPid = await new Promise<number>((resolve) => {
    const child = spawn('true');
    child.on('exit', () => resolve(child.pid!));
  });
  return dockerEngine().createContainer({
    name,
    image: await fixtureImage('conformance'),
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
}

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

// Three ways to the same behaviour: changes and exports read from the container's layers on
// this host (the default here), every file call over the command channel, and everything by
// scripts inside the sandbox (as on a remote engine).
for (const way of ['layers', 'channel', 'inside'] as const) {
  const made: Sandbox[] = [];
  describeFileConformance({
    name:
      way === 'layers'
        ? 'docker'
        : way === 'channel'
          ? 'docker, file calls over the command channel'
          : 'docker, changes and exports read inside the sandbox',
    make: async (spec = {}) => {
      const backend = way === 'inside' ? new DockerBackend(dockerEngine(), 'local', false) : dockerBackend();
      const sandbox = await backend.create({
        image: await fixtureImage('conformance'),
        role: 'file-conformance',
        ...spec,
      });
      made.push(sandbox);
      return way === 'channel' ? overTheChannel(sandbox) : sandbox;
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
  it('an engine stream that breaks off while the pristine tree is read is the engine failing, not the run', async () => {
    const image = await fixtureImage('conformance');
    const engine = dockerEngine();
    const real = engine.getArchive.bind(engine);
    const cut = Object.create(engine) as DockerEngine;
    // The archive starts to arrive, then the connection dies (an engine killed mid-read).
    cut.getArchive = async (id, path) => {
      const stream = await real(id, path);
      const broken = new PassThrough();
      stream?.once('data', (chunk: Buffer) => {
        broken.write(chunk.subarray(0, 700));
        broken.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
        stream.destroy();
      });
      return broken;
    };
    const failure = await new DockerBackend(cut).workspaceTree(image).catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: 'SANDBOX_UNAVAILABLE', category: 'infrastructure' });
    expect(String(failure)).toMatch(/broke off: socket hang up/);
    // And a sound read of the same image still works.
    expect((await new DockerBackend(engine).workspaceTree(image)).size).toBeGreaterThan(0);
  });

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

  it('enforces the file-size, open-files and CPU limits it sets', async () => {
    const sandbox = await dockerBackend().create({
      image: await fixtureImage('conformance'),
      role: 'limits',
      resources: { cpus: 0.5, maxFileBytes: 1024 * 1024 },
    });
    try {
      const details = await dockerEngine().inspectContainer(sandbox.id);
      const host = details!.hostConfig as { NanoCpus: number; Ulimits: { Name: string; Soft: number }[] };
      expect(host.NanoCpus).toBe(500_000_000);
      expect(host.Ulimits).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ Name: 'fsize', Soft: 1024 * 1024 }),
          expect.objectContaining({ Name: 'nofile', Soft: 4096 }),
        ]),
      );

      // File size: writing past the limit fails and the file stops at the limit.
      const big = await sandbox.exec('head -c 3000000 /dev/zero > big.bin; echo "rc=$?"; stat -c %s big.bin');
      expect(big.stdout).toMatch(/^rc=(?!0\n)\d+\n1048576\n$/);

      // Open files: a process gets no more descriptors than the limit.
      const files = await sandbox.exec(
        `node -e "const fs=require('fs');let n=0;try{for(;;){fs.openSync('/dev/null','r');n++}}catch(e){console.log(e.code, n)}"`,
      );
      const [code, opened] = files.stdout.trim().split(' ');
      expect(code).toBe('EMFILE');
      expect(Number(opened)).toBeGreaterThan(4000);
      expect(Number(opened)).toBeLessThan(4096);

      // CPU: four busy loops get half a core between them. The cgroup's own accounting, read
      // by the daemon, must show the quota bit (throttled periods) and no more than half of
      // the wall time used; the 100 ms slack covers one CFS period's rounding. A loaded
      // machine only lowers the usage, never raises it past the quota.
      const started = Date.now();
      const before = await cpuStats(sandbox.id);
      const busy = await sandbox.exec(
        "for i in 1 2 3 4; do timeout 3 sh -c 'while :; do :; done' & done; wait; echo done",
        { timeoutMs: 30_000 },
      );
      expect(busy.stdout.trim()).toBe('done');
      const after = await cpuStats(sandbox.id);
      const wallMs = Date.now() - started;
      const usedMs = (after.usageNs - before.usageNs) / 1e6;
      expect(after.throttledPeriods).toBeGreaterThan(before.throttledPeriods);
      expect(usedMs).toBeGreaterThan(0);
      expect(usedMs).toBeLessThan(0.5 * wallMs + 100);
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
    const suffix = randomBytes(3).toString('hex');
    const orphan = await orphanContainer(`sandbox-harness-orphan-${suffix}`);
    const kept = await orphanContainer(`${KEPT_NAME_PREFIX}orphan-${suffix}`);
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

  it('reaps orphans when a backend creates its first sandbox, and only then', async () => {
    const suffix = randomBytes(3).toString('hex');
    const before = await orphanContainer(`sandbox-harness-orphan-startup-${suffix}`);
    const backend = new DockerBackend(new DockerEngine());
    const made: string[] = [];
    let after: string | undefined;
    try {
      const first = await backend.create({ image: await fixtureImage('conformance'), role: 'startup' });
      made.push(first.id);
      expect(await dockerEngine().inspectContainer(before)).toBeUndefined();
      // The reaper runs once per backend: an orphan that appears later waits for the next start-up.
      after = await orphanContainer(`sandbox-harness-orphan-later-${suffix}`);
      const second = await backend.create({ image: await fixtureImage('conformance'), role: 'startup' });
      made.push(second.id);
      expect(await dockerEngine().inspectContainer(after)).toBeDefined();
    } finally {
      for (const id of [before, ...(after ? [after] : []), ...made]) await dockerEngine().removeContainer(id);
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
