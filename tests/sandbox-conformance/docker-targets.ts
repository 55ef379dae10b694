/**
 * The sandbox contract on a Docker-API engine, parameterised by engine and runtime: the local
 * dockerd under runc (`docker.test.ts`), the same engine under gVisor (`runsc.test.ts`),
 * rootful Podman's API service (`podman.test.ts`) and a second dockerd with userns-remap
 * (`userns.test.ts`) all run this one file. A target says how to reach its engine and make
 * the fixture image present there; everything else is the same test.
 *
 * To run the suite under another engine or runtime, add a target: a `DockerTarget` and a
 * test file that calls `describeDockerConformance(target)`.
 */
import { hardenedContainer } from '../../src/sandbox/container/container-spec.js';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import {
  DockerEngine,
  dockerEngine,
  EngineContainers,
  EngineExec,
} from '../../src/sandbox/docker/engine/index.js';
import { KEPT_NAME_PREFIX, LABEL, containerLabels } from '../../src/sandbox/docker/labels.js';
import { reapOrphans } from '../../src/sandbox/docker/operator/collect-garbage.js';
import { shellQuote } from '../../src/sandbox/shell.js';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../../src/sandbox/types.js';
import { describeSandboxConformance } from './conformance.js';
import { describeFileConformance, type ArrangeStep } from './files.js';
import { fixtureImage } from '../helpers/docker.js';
import { cpuStats, engineGet } from '../helpers/engine-api.js';

const run = promisify(execFile);

/** The three ways a Docker sandbox reads its changes: layers on this host, channel, scripts inside. */
export type Way = 'layers' | 'channel' | 'inside';

export interface PreparedTarget {
  engine: DockerEngine;
  /** The engine's Unix socket, for the read-only API checks of the tests. */
  socketPath: string;
  /** The conformance fixture's image, present on that engine. */
  image: string;
  /**
   * Where the engine maps a container's ids on the host (userns-remap: the remap user's
   * subordinate ids); absent: ids inside are the host's ids. The suite checks the engine says
   * the same (its `userns` security option) and that processes and files really are mapped so.
   */
  remap?: { uid: number; gid: number };
}

export interface DockerTarget {
  /** Names the suite: `docker`, `docker runsc`, `podman`, `docker userns-remap`. */
  name: string;
  /** The OCI runtime every sandbox is made with; absent: the engine's default. */
  runtime?: string;
  /** Starts what the target needs and makes the fixture image present; called once, in beforeAll. */
  prepare(): Promise<PreparedTarget>;
  /** Stops what `prepare` started. */
  release?(): Promise<void>;
  /** Which ways of the file contract to run (default: all three). */
  ways?: readonly Way[];
  /**
   * How the change list is read from the writable layer on this target, as detected: the
   * test checks that the sandbox really used the layer (`layers`) or fell back to the scan
   * inside (`scan`). Never assumed from the engine's name: the test proves which.
   */
  layerReads: 'layers' | 'scan';
}

/** The default bridge's gateway on the local engine: an address of this host a networked container reaches. */
export async function bridgeAddress(): Promise<string> {
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

/**
 * Connects from a throwaway runc container on the local engine's default bridge: the control
 * for the network test of every target (the address is this host's, so a sandbox of any
 * engine on this host that reached it would have network).
 */
export async function connectFromNetworked(address: string, port: number): Promise<string> {
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

/** A backend whose every new sandbox gets `runtime` (kept ones keep theirs). */
export function withRuntime(backend: DockerBackend, runtime: string | undefined): DockerBackend {
  if (!runtime) return backend;
  return new Proxy(backend, {
    get(target, key, receiver) {
      if (key === 'create') return (spec: SandboxSpec) => target.create({ runtime, ...spec });
      const value: unknown = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
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

async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await condition()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return condition();
}

/** The local engine, as the environment names it, under its default runtime or `runtime`. */
export function localTarget(
  options: { runtime?: string; name?: string; ways?: readonly Way[] } = {},
): DockerTarget {
  return {
    name: options.name ?? 'docker',
    ...(options.runtime ? { runtime: options.runtime } : {}),
    ...(options.ways ? { ways: options.ways } : {}),
    layerReads: 'layers',
    prepare: async () => ({
      engine: dockerEngine(),
      socketPath: process.env.DOCKER_HOST?.startsWith('unix://')
        ? process.env.DOCKER_HOST.slice('unix://'.length)
        : '/var/run/docker.sock',
      image: await fixtureImage('conformance'),
    }),
  };
}

export function describeDockerConformance(target: DockerTarget): void {
  describe(`Docker API target: ${target.name}`, () => {
    let prepared: PreparedTarget | undefined;
    const ready = (): PreparedTarget => {
      if (!prepared) throw new Error(`target ${target.name} was not prepared`);
      return prepared;
    };
    const backends = new Map<boolean, DockerBackend>();
    /** One backend per target (and one that reads changes inside), as a run has. */
    const backend = (hostReads = true): DockerBackend => {
      let made = backends.get(hostReads);
      if (!made) {
        made = withRuntime(new DockerBackend(ready().engine, target.name, hostReads), target.runtime);
        backends.set(hostReads, made);
      }
      return made;
    };

    beforeAll(async () => {
      prepared = await target.prepare();
    });
    afterAll(async () => {
      await target.release?.();
    });

    describeSandboxConformance({
      name: target.name,
      backend: (): SandboxBackend => backend(),
      image: async () => ready().image,
      reportedEnv: async (sandbox) => (await ready().engine.containers.inspect(sandbox.id))?.env ?? [],
      network: {
        hostAddress: bridgeAddress,
        connectFromNetworked,
        // gVisor's own network stack says "no route to host" where Linux says "network unreachable".
        ...(target.runtime === 'runsc' ? { noRoute: ['EHOSTUNREACH'] } : {}),
      },
      ...(target.runtime === 'runsc' ? { forkBomb: 'may-end-sandbox' as const } : {}),
      exists: async (id) => (await ready().engine.containers.inspect(id)) !== undefined,
      sandboxesOfRun: async (runId) =>
        (await ready().engine.containers.list({ [LABEL.run]: runId })).map((c) => c.id),
    });

    // Three ways to the same behaviour: changes and exports read from the container's layers on
    // this host (where the engine's storage allows it), every file call over the command
    // channel, and everything by scripts inside the sandbox (as on a remote engine).
    for (const way of target.ways ?? (['layers', 'channel', 'inside'] as const)) {
      const made: Sandbox[] = [];
      describeFileConformance({
        name:
          way === 'layers'
            ? target.name
            : way === 'channel'
              ? `${target.name}, file calls over the command channel`
              : `${target.name}, changes and exports read inside the sandbox`,
        make: async (spec = {}) => {
          const sandbox = await backend(way !== 'inside').create({
            image: ready().image,
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
        ...(target.runtime === 'runsc' && way !== 'inside' ? { fifoRefusedAs: 'missing' as const } : {}),
      });
    }

    describe(`${target.name}: engine and runtime specifics`, () => {
      const made: Sandbox[] = [];
      const make = async (spec: Partial<SandboxSpec> = {}) => {
        const sandbox = await backend().create({ image: ready().image, role: 'specifics', ...spec });
        made.push(sandbox);
        return sandbox;
      };
      // Each test's sandboxes go when it ends (see files.ts: live sandboxes slow every later test).
      afterEach(async () => {
        await Promise.all(made.splice(0).map((s) => s.dispose().catch(() => undefined)));
      });

      it('applies the hardening baseline, under the runtime asked for', async () => {
        const sandbox = await make({ role: 'hardening' });
        const details = await ready().engine.containers.inspect(sandbox.id);
        const product = (await ready().engine.info()).product;
        expect(details?.hostConfig).toMatchObject({
          NetworkMode: 'none',
          SecurityOpt: ['no-new-privileges'],
          Privileged: false,
          Init: true,
          ReadonlyRootfs: false,
        });
        const asked = details!.hostConfig as { CapDrop: string[]; IpcMode: string };
        if (product === 'docker') {
          expect(asked.CapDrop).toEqual(['ALL']);
          expect(asked.IpcMode).toBe('private');
        } else {
          // Podman reports `CapDrop: ALL` as every capability it would have granted, and a
          // private IPC namespace as "shareable"; what holds is checked inside below.
          expect(asked.CapDrop.length).toBeGreaterThan(0);
          expect(['private', 'shareable']).toContain(asked.IpcMode);
        }
        // Whatever the engine's words: no process of the sandbox can ever hold a capability.
        const caps = await sandbox.exec("grep -E '^Cap(Bnd|Eff|Prm)' /proc/self/status /proc/1/status");
        expect(caps.stdout.trim().split('\n').length).toBe(6);
        for (const line of caps.stdout.trim().split('\n')) expect(line).toMatch(/\t0{16}$/);
        const host = details!.hostConfig as {
          Memory: number;
          MemorySwap: number;
          PidsLimit: number;
          Binds: unknown;
          Tmpfs: Record<string, string>;
          Runtime?: string;
          Ulimits: { Name: string; Soft: number; Hard: number }[];
        };
        expect(host.Memory).toBeGreaterThan(0);
        expect(host.MemorySwap).toBe(host.Memory);
        expect(host.PidsLimit).toBeGreaterThan(0);
        expect(host.Binds ?? []).toEqual([]);
        expect(host.Tmpfs['/tmp']).toMatch(/size=/);
        // Every rlimit is explicit: an engine's own defaults (Podman's exceed this machine's hard
        // limits) never decide whether a sandbox starts.
        for (const name of ['nofile', 'fsize', 'nproc'])
          expect(host.Ulimits.map((u) => u.Name.replace(/^RLIMIT_/i, '').toLowerCase())).toContain(name);
        const info = await ready().engine.info();
        // Podman reports "oci" here: its containers all run under the service's runtime.
        if (info.product === 'docker') expect(host.Runtime).toBe(target.runtime ?? info.defaultRuntime);
        expect(details!.labels).toMatchObject({
          [LABEL.marker]: '1',
          [LABEL.role]: 'hardening',
          [LABEL.runtime]: target.runtime ?? 'default',
        });
        for (const key of [LABEL.run, LABEL.session, LABEL.created, LABEL.keep])
          expect(details!.labels[key]).toBeTruthy();
        // The runtime really runs the sandbox: gVisor's kernel answers `uname` with its own version.
        const kernel = (await sandbox.exec('uname -r')).stdout.trim();
        if (target.runtime === 'runsc') expect(kernel).toBe('4.4.0');
        else expect(kernel).not.toBe('4.4.0');
      });

      it("maps the sandbox's ids on this host as the engine says: one to one, or into the userns-remap range", async () => {
        const { engine, socketPath, remap } = ready();
        const userns = (await engine.info()).securityOptions.some((o) => /(^|,)name=userns(,|$)/.test(o));
        expect(userns).toBe(remap !== undefined);
        const base = remap ?? { uid: 0, gid: 0 };
        const sandbox = await make({ role: 'host-ids' });
        const inside = await sandbox.exec(
          "printf mine > owned.txt && id -u && id -g && grep -E '^(Uid|Gid):' /proc/1/status | cut -f2",
        );
        const [uid, gid, initUid, initGid] = inside.stdout.trim().split('\n').map(Number);
        // The sandbox user is never root inside, whatever the host's view.
        expect(uid).toBeGreaterThan(0);
        // What it wrote sits in the writable layer on this host, owned by its ids as mapped.
        const details = await engine.containers.inspect(sandbox.id);
        const upperDir = details!.graphDriver.upperDir!;
        const file = await lstat(join(upperDir, 'workspace', 'owned.txt'));
        expect([file.uid, file.gid]).toEqual([base.uid + uid!, base.gid + gid!]);
        // Under runc the container's init is a host process: its host ids are the mapped ones
        // too, so under a remap even the container's root is an unprivileged id here. (gVisor's
        // processes live in its own kernel; the host pid is the runsc sandbox's.)
        if (target.runtime !== 'runsc') {
          const state = await engineGet<{ State: { Pid: number } }>(
            `/containers/${sandbox.id}/json`,
            socketPath,
          );
          const status = await readFile(`/proc/${state!.State.Pid}/status`, 'utf8');
          const hostIds = (field: string) => Number(new RegExp(`^${field}:\\t(\\d+)`, 'm').exec(status)?.[1]);
          expect([hostIds('Uid'), hostIds('Gid')]).toEqual([base.uid + initUid!, base.gid + initGid!]);
          if (remap) expect(hostIds('Uid')).toBeGreaterThanOrEqual(remap.uid);
        }
      });

      it('enforces the file-size, open-files and CPU limits it sets', async () => {
        const sandbox = await make({ role: 'limits', resources: { cpus: 0.5, maxFileBytes: 1024 * 1024 } });
        const details = await ready().engine.containers.inspect(sandbox.id);
        const host = details!.hostConfig as { NanoCpus: number; Ulimits: { Name: string; Soft: number }[] };
        expect(host.NanoCpus).toBe(500_000_000);
        // Docker says `fsize`, Podman `RLIMIT_FSIZE`: one name for both.
        const named = host.Ulimits.map((u) => ({
          ...u,
          Name: u.Name.replace(/^RLIMIT_/i, '').toLowerCase(),
        }));
        expect(named).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ Name: 'fsize', Soft: 1024 * 1024 }),
            expect.objectContaining({ Name: 'nofile', Soft: 4096 }),
          ]),
        );
        // File size: writing past the limit fails and the file stops at the limit.
        const big = await sandbox.exec('head -c 3000000 /dev/zero > big.bin; echo "rc=$?"; wc -c < big.bin');
        expect(big.stdout).toMatch(/^rc=(?!0\n)\d+\n1048576\n$/);

        // Open files: a process gets no more descriptors than the limit.
        const files = await sandbox.exec(
          `node -e "const fs=require('fs');let n=0;try{for(;;){fs.openSync('/dev/null','r');n++}}catch(e){console.log(e.code, n)}"`,
        );
        const [code, opened] = files.stdout.trim().split(' ');
        expect(code).toBe('EMFILE');
        expect(Number(opened)).toBeGreaterThan(4000);
        expect(Number(opened)).toBeLessThan(4096);

        // CPU: four busy loops get half a core between them, by the cgroup's own accounting
        // (the daemon reads it; under gVisor the sandbox's whole kernel is in that cgroup).
        const burn = async () => {
          const started = Date.now();
          const before = await cpuStats(sandbox.id, ready().socketPath);
          const busy = await sandbox.exec(
            "for i in 1 2 3 4; do timeout 3 sh -c 'while :; do :; done' & done; wait; echo done",
            { timeoutMs: 30_000 },
          );
          expect(busy.stdout.trim()).toBe('done');
          const after = await cpuStats(sandbox.id, ready().socketPath);
          const wallMs = Date.now() - started;
          const usedMs = (after.usageNs - before.usageNs) / 1e6;
          return { wallMs, usedMs, throttled: after.throttledPeriods > before.throttledPeriods };
        };
        // Podman's stats report no throttling periods on this cgroup v1 host; the CPU time used
        // against the wall clock below is the limit itself, for every engine.
        const throttles = (await ready().engine.info()).product === 'docker';
        let cpu = await burn();
        // The kernel throttles a sandbox that reaches its quota. One that never got that much
        // (the machine's other work took the cores, as when test files run side by side) had
        // nothing to throttle and proves nothing either way: it burns again, at most twice more.
        for (
          let again = 0;
          throttles && !cpu.throttled && cpu.usedMs < 0.45 * cpu.wallMs && again < 2;
          again++
        )
          cpu = await burn();
        // A sandbox that still never got near its quota (a machine loaded far past its cores)
        // cannot show the throttling; NanoCpus above and the bound below still hold.
        if (throttles && cpu.usedMs >= 0.45 * cpu.wallMs)
          expect(cpu.throttled, JSON.stringify(cpu)).toBe(true);
        expect(cpu.usedMs).toBeGreaterThan(0);
        expect(cpu.usedMs).toBeLessThan(0.5 * cpu.wallMs + 100);
      });

      it('holds the memory limit: a command that allocates past it does not get the memory', async () => {
        const sandbox = await make({ role: 'memory', resources: { memoryBytes: 128 * 1024 * 1024 } });
        const r = await sandbox
          .exec(
            `node -e "const a=[];for(let i=0;i<512;i++)a.push(Buffer.alloc(1<<20,1));console.log('allocated',a.length)"`,
            { timeoutMs: 60_000 },
          )
          .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
        // runc: the kernel's OOM killer ends the command (exit 137) and the sandbox lives on.
        // gVisor: its sentry holds the sandbox's memory in the same cgroup, so the OOM kill may
        // take the whole sandbox (a dead sandbox, never the host). Either way: no 512 MiB.
        if (r instanceof Error) expect(r).toMatchObject({ code: 'SANDBOX_DEAD' });
        else {
          expect(r.stdout).not.toContain('allocated');
          expect(r.exitCode).not.toBe(0);
        }
      });

      it('holds the disk budget: a sandbox that writes past it is stopped and says why', async () => {
        // Where the layer is read on this host, so is its size: never the engine's size
        // inspection every second (on Podman a walk of the whole root file system per call).
        const asked = vi.spyOn(EngineContainers.prototype, 'diskUsage');
        try {
          const sandbox = await make({ role: 'disk', resources: { diskBytes: 40 * 1024 * 1024 } });
          // The writer dies with its sandbox: the command itself may already say why.
          await sandbox
            .exec('i=0; while [ $i -lt 12 ]; do head -c 8M /dev/zero > big$i; i=$((i+1)); done', {
              timeoutMs: 60_000,
            })
            .catch((error: unknown) => expect(error).toMatchObject({ code: 'DISK_BUDGET' }));
          expect(await until(async () => !(await sandbox.isAlive()), 20_000)).toBe(true);
          await expect(sandbox.exec('true')).rejects.toMatchObject({ code: 'DISK_BUDGET' });
          if (target.layerReads === 'layers') expect(asked).not.toHaveBeenCalled();
        } finally {
          asked.mockRestore();
        }
      });

      it('the freeze stops every process the agent left behind (setsid and double fork) and the sandbox still works', async () => {
        const sandbox = await make({ role: 'freeze' });
        await sandbox.exec(
          '(while :; do date >> ticks.txt; sleep 0.05; done) > /dev/null 2>&1 & setsid sh -c "while :; do sleep 1; done" > /dev/null 2>&1 & (sh -c "sleep 501 &" &) ',
        );
        await new Promise((r) => setTimeout(r, 300));
        await sandbox.freeze();
        const size = async () => (await sandbox.readFile('ticks.txt')).length;
        const first = await size();
        await new Promise((r) => setTimeout(r, 600));
        expect(await size()).toBe(first);
        const procs = await sandbox.exec(
          "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c -E '[s]leep 501|[w]hile :' || true",
        );
        expect(procs.stdout.trim()).toBe('0');
        expect((await sandbox.exec('echo alive')).stdout).toBe('alive\n');
        expect((await sandbox.changes()).changes.map((c) => c.path)).toEqual(['ticks.txt']);
      });

      it('over the command channel, the freeze stops the channel and all the agent left, with no exec to wait for and no restart', async () => {
        const sandbox = await make({ role: 'freeze-channel' });
        await sandbox.exec(
          '(while :; do date >> ticks.txt; sleep 0.05; done) > /dev/null 2>&1 & setsid sh -c "while :; do sleep 1; done" > /dev/null 2>&1 & (sh -c "sleep 502 &" &) ',
          { fast: true },
        );
        await new Promise((r) => setTimeout(r, 300));
        const execs = vi.spyOn(EngineExec.prototype, 'start');
        const restarts = vi.spyOn(EngineContainers.prototype, 'restart');
        try {
          await sandbox.freeze();
          // The freeze went over the channel and root's look was started with it: neither
          // needed an exec now, and nothing was left for the hard freeze (a restart).
          expect(execs).not.toHaveBeenCalled();
          expect(restarts).not.toHaveBeenCalled();
        } finally {
          execs.mockRestore();
          restarts.mockRestore();
        }
        const size = async () => (await sandbox.readFile('ticks.txt')).length;
        const first = await size();
        await new Promise((r) => setTimeout(r, 600));
        expect(await size()).toBe(first);
        // Nothing the agent left runs, nor the channel's own processes.
        const procs = await sandbox.exec(
          "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c -E '[s]leep 502|[w]hile :|[s]andbox-channel' || true",
        );
        expect(procs.stdout.trim()).toBe('0');
        expect((await sandbox.exec('echo alive', { fast: true })).stdout).toBe('alive\n');
        expect((await sandbox.changes()).changes.map((c) => c.path)).toEqual(['ticks.txt']);
      });

      it('with a command still running on the channel, the freeze takes its own exec, stops it too, and needs no restart', async () => {
        const sandbox = await make({ role: 'freeze-busy' });
        const running = sandbox
          .exec('sleep 503', { fast: true, timeoutMs: 120_000 })
          .catch((error: unknown) => error);
        const count = async () =>
          (
            await sandbox.exec(
              "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '[s]leep 503' || true",
            )
          ).stdout.trim();
        expect(await until(async () => (await count()) !== '0', 10_000)).toBe(true);
        const restarts = vi.spyOn(EngineContainers.prototype, 'restart');
        try {
          await sandbox.freeze();
          expect(restarts).not.toHaveBeenCalled();
        } finally {
          restarts.mockRestore();
        }
        await running;
        expect(await count()).toBe('0');
      });

      it(`reads the change list ${target.layerReads === 'layers' ? 'from the writable layer on this host' : 'by the scan inside the sandbox'}, as detected`, async () => {
        const sandbox = await make({ role: 'layer-reads' });
        await sandbox.exec(
          'printf fresh > src/greeting.txt && mkdir -p added && printf new > added/file.txt && rm README.md',
        );
        const execs = vi.spyOn(EngineExec.prototype, 'start');
        try {
          const changes = (await sandbox.changes()).changes.map((c) => `${c.kind} ${c.path}`).sort();
          expect(changes).toEqual([
            'added added',
            'added added/file.txt',
            'deleted README.md',
            'modified src/greeting.txt',
          ]);
          const exported = await sandbox.exportFiles(['src/greeting.txt', 'added/file.txt']);
          expect(exported.files.map((f) => [f.path, f.content.toString()])).toEqual([
            ['src/greeting.txt', 'fresh'],
            ['added/file.txt', 'new'],
          ]);
          // Read on the host, no exec was needed; by the scan, the sandbox ran the scripts.
          if (target.layerReads === 'layers') expect(execs).not.toHaveBeenCalled();
          else expect(execs).toHaveBeenCalled();
        } finally {
          execs.mockRestore();
        }
      });

      it('keeps a container when asked, stopped and renamed, and attaches to it again', async () => {
        const sandbox = await make({
          role: 'kept',
          runId: `conformance-kept-${randomBytes(3).toString('hex')}`,
        });
        const runId = sandbox.labels[LABEL.run]!;
        await sandbox.dispose({ keep: true });
        const details = await ready().engine.containers.inspect(sandbox.id);
        expect(details?.running).toBe(false);
        expect(details?.name).toMatch(/^sandbox-harness-kept-/);
        const again = await backend().attach({ id: sandbox.id, runId });
        expect((await again.exec('cat src/greeting.txt')).stdout).toBe('hello\n');
        await again.dispose();
        expect(await ready().engine.containers.inspect(sandbox.id)).toBeUndefined();
      });

      it('an engine stream that breaks off while the pristine tree is read is the engine failing, not the run', async () => {
        const engine = ready().engine;
        const real = engine.containers.getArchive.bind(engine.containers);
        const containers = Object.create(engine.containers) as EngineContainers;
        const cut = Object.assign(Object.create(engine) as DockerEngine, { containers });
        // The archive starts to arrive, then the connection dies (an engine killed mid-read).
        containers.getArchive = async (id, path) => {
          const stream = await real(id, path);
          const broken = new PassThrough();
          stream?.once('data', (chunk: Buffer) => {
            broken.write(chunk.subarray(0, 700));
            broken.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
            stream.destroy();
          });
          return broken;
        };
        const reading = new DockerBackend(cut);
        // A tree remembered from an earlier read would spare the engine: this one is read.
        reading.treeCache = { get: async () => undefined, put: async () => undefined };
        const failure = await reading.workspaceTree(ready().image).catch((error: unknown) => error);
        expect(failure).toMatchObject({ code: 'SANDBOX_UNAVAILABLE', category: 'infrastructure' });
        expect(String(failure)).toMatch(/broke off: socket hang up/);
        expect((await new DockerBackend(engine).workspaceTree(ready().image)).size).toBeGreaterThan(0);
      });
    });
  });
}

/** A container labelled as made by a harness process that no longer exists. */
async function orphanContainer(engine: DockerEngine, image: string, name: string): Promise<string> {
  const deadPid = await new Promise<number>((resolve) => {
    const child = spawn('true');
    child.on('exit', () => resolve(child.pid!));
  });
  return engine.containers.create(
    hardenedContainer({
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
    }),
  );
}

/**
 * What only the local engine needs checking once: the orphan reaper, an unreachable daemon.
 * Run by orphans.test.ts, alone (vitest.config.ts): any other file starting sandboxes meanwhile
 * would reap the orphans planted here.
 */
export function describeLocalEngineSpecifics(ready: () => Pick<PreparedTarget, 'engine' | 'image'>): void {
  it('reaps containers whose owning harness process is gone, but not kept ones', async () => {
    const { engine, image } = ready();
    const suffix = randomBytes(3).toString('hex');
    const orphan = await orphanContainer(engine, image, `sandbox-harness-orphan-${suffix}`);
    const kept = await orphanContainer(engine, image, `${KEPT_NAME_PREFIX}orphan-${suffix}`);
    try {
      const removed = await reapOrphans(engine);
      expect(removed).toContain(orphan);
      expect(removed).not.toContain(kept);
      expect(await engine.containers.inspect(orphan)).toBeUndefined();
      expect(await engine.containers.inspect(kept)).toBeDefined();
    } finally {
      await engine.containers.remove(orphan);
      await engine.containers.remove(kept);
    }
  });

  it('reaps orphans when a backend creates its first sandbox, and only then', async () => {
    const { engine, image } = ready();
    const suffix = randomBytes(3).toString('hex');
    const before = await orphanContainer(engine, image, `sandbox-harness-orphan-startup-${suffix}`);
    const backend = new DockerBackend(new DockerEngine());
    const made: string[] = [];
    let after: string | undefined;
    try {
      const first = await backend.create({ image, role: 'startup' });
      made.push(first.id);
      expect(await engine.containers.inspect(before)).toBeUndefined();
      // The reaper runs once per backend: an orphan that appears later waits for the next start-up.
      after = await orphanContainer(engine, image, `sandbox-harness-orphan-later-${suffix}`);
      const second = await backend.create({ image, role: 'startup' });
      made.push(second.id);
      expect(await engine.containers.inspect(after)).toBeDefined();
    } finally {
      for (const id of [before, ...(after ? [after] : []), ...made]) await engine.containers.remove(id);
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
}
