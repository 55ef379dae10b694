/**
 * The hardened container is written once (`hardenedContainer`) and rendered twice: as the
 * Docker API's create body (what the Docker backend sends) and as a container CLI's flags
 * (what a backend that runs `docker`/`podman` on a node would run). Each rendering is read
 * back here, strictly (a key or a flag the reader does not know fails the test), into the
 * neutral fields, and both must give back the spec they came from: every field, the fixed
 * hardening included. tests/integration/container-spec-docker.test.ts then runs both on a
 * real engine and compares what a process inside each sees.
 */
import { describe, expect, it } from 'vitest';
import { containerCliArgs } from '../../../src/sandbox/container/cli-args.js';
import {
  HARDENING,
  hardenedContainer,
  IDLE_CONTAINER_LIMITS,
  withoutDiskQuota,
  type ContainerSpec,
  type Hardening,
} from '../../../src/sandbox/container/container-spec.js';
import { createBody } from '../../../src/sandbox/docker/engine/create-body.js';
import { containerLabels } from '../../../src/sandbox/docker/labels.js';

/** Takes keys off an object as they are read; what is left at the end was not understood. */
function reader(value: unknown, where: string) {
  const rest = { ...(value as Record<string, unknown>) };
  return {
    take<T>(key: string): T {
      if (!(key in rest)) throw new Error(`${where}: no ${key}`);
      const v = rest[key] as T;
      delete rest[key];
      return v;
    },
    takeOptional<T>(key: string): T | undefined {
      const v = rest[key] as T | undefined;
      delete rest[key];
      return v;
    },
    done() {
      const left = Object.keys(rest).filter((k) => rest[k] !== undefined);
      if (left.length > 0) throw new Error(`${where}: not understood: ${left.join(', ')}`);
    },
  };
}

function tmpfsOf(path: string, text: string) {
  const parts = text.split(',');
  const size = parts.find((p) => p.startsWith('size='));
  const mode = parts.find((p) => p.startsWith('mode='));
  return {
    path,
    sizeBytes: Number(size!.slice('size='.length)),
    mode: parseInt(mode!.slice('mode='.length), 8),
    flags: parts.filter((p) => p !== size && p !== mode),
  };
}

/** The Docker API create body, read back into the neutral fields. */
function specOfCreateBody(body: unknown): ContainerSpec {
  const top = reader(JSON.parse(JSON.stringify(body)), 'create body');
  const host = reader(top.take('HostConfig'), 'HostConfig');
  const name = top.takeOptional<string>('name');
  expect([
    top.take('AttachStdin'),
    top.take('AttachStdout'),
    top.take('AttachStderr'),
    top.take('Tty'),
  ]).toEqual([false, false, false, false]);
  const disabled = top.take<boolean>('NetworkDisabled');
  const mode = host.take<string>('NetworkMode');
  const dns = host.takeOptional<string[]>('Dns');
  const search = host.takeOptional<string[]>('DnsSearch');
  const options = host.takeOptional<string[]>('DnsOptions');
  // No network stack: the resolver is the one the engine client writes into the container.
  const network: ContainerSpec['network'] = disabled
    ? (expect(mode).toBe('none'),
      expect(dns).toBeUndefined(),
      {
        mode: 'none',
        resolver: { nameServers: ['127.0.0.1'], search: [], options: ['timeout:1', 'attempts:1'] },
      })
    : { mode: 'named', name: mode, resolver: { nameServers: dns!, search: search!, options: options! } };
  const memory = host.take<number>('Memory');
  const ulimits = Object.fromEntries(
    host.take<{ Name: string; Soft: number; Hard: number }[]>('Ulimits').map((u) => {
      expect(u.Soft).toBe(u.Hard);
      return [u.Name, u.Soft];
    }),
  );
  const binds = host.take<unknown[]>('Binds');
  const mounts = host.take<unknown[]>('Mounts');
  const healthcheck = top.take<{ Test: string[] }>('Healthcheck');
  const log = host.take<{ Type: string; Config: object }>('LogConfig');
  expect(log.Config).toEqual({});
  const storage = host.takeOptional<{ size: string }>('StorageOpt');
  const runtime = host.takeOptional<string>('Runtime');
  const hardening: Hardening = {
    capDrop: host.take('CapDrop'),
    noNewPrivileges: host.take<string[]>('SecurityOpt').includes('no-new-privileges') as true,
    privileged: host.take('Privileged'),
    init: host.take('Init'),
    ipc: host.take('IpcMode'),
    noSwap: (host.take<number>('MemorySwap') === memory) as true,
    logDriver: log.Type as 'none',
    restart: host.take<{ Name: 'no' }>('RestartPolicy').Name,
    healthcheck: (healthcheck.Test.join() === 'NONE' ? 'none' : healthcheck.Test.join()) as 'none',
    mounts: (binds.length === 0 && mounts.length === 0 ? 'none' : 'some') as 'none',
    publishPorts: host.take('PublishAllPorts'),
    autoRemove: host.take('AutoRemove'),
  };
  const spec: ContainerSpec = {
    ...(name !== undefined ? { name } : {}),
    image: top.take('Image'),
    hostname: top.take('Hostname'),
    entrypoint: top.take('Entrypoint'),
    cmd: top.take('Cmd'),
    user: top.take('User'),
    workingDir: top.take('WorkingDir'),
    env: top.take('Env'),
    labels: top.take('Labels'),
    network,
    extraHosts: host.take('ExtraHosts'),
    memoryBytes: memory,
    nanoCpus: host.take('NanoCpus'),
    pids: host.take('PidsLimit'),
    ulimits: { nofile: ulimits.nofile!, fsize: ulimits.fsize!, nproc: ulimits.nproc! },
    tmpfs: Object.entries(host.take<Record<string, string>>('Tmpfs')).map(([path, text]) =>
      tmpfsOf(path, text),
    ),
    ...(storage ? { diskBytes: Number(storage.size) } : {}),
    ...(runtime ? { runtime } : {}),
    // Files are not in the body: the engine client places them in one archive before the start.
    files: [],
    hardening,
  };
  top.done();
  host.done();
  return spec;
}

/** `docker create`/`podman create` arguments, read back into the neutral fields. */
function specOfCliArgs(args: string[]): ContainerSpec {
  const flags = new Map<string, string[]>();
  const switches = new Set<string>();
  const SWITCHES = ['--privileged', '--init', '--rm', '--no-healthcheck'];
  let i = 0;
  for (; i < args.length && args[i]!.startsWith('--'); i++) {
    const name = args[i]!;
    if (SWITCHES.includes(name)) switches.add(name);
    else flags.set(name, [...(flags.get(name) ?? []), args[++i]!]);
  }
  const f = reader(Object.fromEntries(flags), 'cli flags');
  const one = (name: string) => {
    const values = f.take<string[]>(name);
    expect(values, name).toHaveLength(1);
    return values[0]!;
  };
  const many = (name: string) => f.takeOptional<string[]>(name) ?? [];
  const optional = (name: string) => f.takeOptional<string[]>(name)?.[0];
  const mode = one('--network');
  const sysctls = many('--sysctl');
  const search = many('--dns-search');
  const resolver = {
    nameServers: many('--dns'),
    search: search.filter((s) => s !== '.'),
    options: many('--dns-option'),
  };
  if (mode === 'none') {
    // What makes `--network none` the same as no network stack at all (see cli-args.ts).
    expect(sysctls).toEqual(['net.ipv6.conf.lo.disable_ipv6=0']);
    expect(search).toEqual(['.']);
  } else expect(sysctls).toEqual([]);
  const memory = Number(one('--memory'));
  const ulimits = Object.fromEntries(
    many('--ulimit').map((u) => {
      const [name, soft, hard] = u.split(/[=:]/);
      expect(soft).toBe(hard);
      return [name, Number(soft)];
    }),
  );
  const storage = optional('--storage-opt');
  const runtime = optional('--runtime');
  const name = optional('--name');
  const hardening: Hardening = {
    capDrop: many('--cap-drop') as unknown as Hardening['capDrop'],
    noNewPrivileges: many('--security-opt').includes('no-new-privileges') as true,
    privileged: switches.has('--privileged') as false,
    init: switches.has('--init') as true,
    ipc: one('--ipc') as 'private',
    noSwap: (Number(one('--memory-swap')) === memory) as true,
    logDriver: one('--log-driver') as 'none',
    restart: one('--restart') as 'no',
    healthcheck: (switches.has('--no-healthcheck') ? 'none' : 'image') as 'none',
    // The reader refuses --volume, --mount and --publish: they are flags it does not know.
    mounts: 'none',
    publishPorts: false,
    autoRemove: switches.has('--rm') as false,
  };
  const [image, ...cmd] = args.slice(i);
  const spec: ContainerSpec = {
    ...(name !== undefined ? { name } : {}),
    image: image!,
    hostname: one('--hostname'),
    entrypoint: [one('--entrypoint')],
    cmd,
    user: one('--user'),
    workingDir: one('--workdir'),
    env: many('--env'),
    labels: Object.fromEntries(
      many('--label').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    ),
    network: mode === 'none' ? { mode: 'none', resolver } : { mode: 'named', name: mode, resolver },
    extraHosts: many('--add-host'),
    memoryBytes: memory,
    nanoCpus: Math.round(Number(one('--cpus')) * 1e9),
    pids: Number(one('--pids-limit')),
    ulimits: { nofile: ulimits.nofile!, fsize: ulimits.fsize!, nproc: ulimits.nproc! },
    tmpfs: many('--tmpfs').map((t) => tmpfsOf(t.slice(0, t.indexOf(':')), t.slice(t.indexOf(':') + 1))),
    ...(storage ? { diskBytes: Number(storage.replace(/^size=/, '')) } : {}),
    ...(runtime ? { runtime } : {}),
    // Not flags: the caller copies them into the created container before starting it.
    files: [],
    hardening,
  };
  f.done();
  return spec;
}

const SPECS: Record<string, ContainerSpec> = {
  'an attempt sandbox (quota, files, variables with spaces and `=`)': hardenedContainer({
    name: 'sandbox-harness-run-1-attempt-1-abcdef',
    image: 'sandbox-harness/repo-shipping:0123456789abcdef',
    entrypoint: ['sleep'],
    cmd: ['infinity'],
    user: '0:0',
    workingDir: '/workspace',
    env: ['HOME=/home/sandbox', 'LANG=C.UTF-8', 'GREETING=hello world', 'EQ=a=b'],
    labels: containerLabels({ runId: 'run-1', role: 'attempt-1', keep: 'on-failure', runtime: 'default' }),
    memoryBytes: 1024 ** 3,
    nanoCpus: 1e9,
    pids: 256,
    maxFileBytes: 64 * 1024 ** 2,
    tmpfsBytes: 256 * 1024 ** 2,
    nofile: 4096,
    diskBytes: 1024 ** 3,
    files: [
      {
        name: 'etc/sandbox-harness/catalog.yaml',
        type: 'file',
        content: Buffer.from('x'),
        mode: 0o444,
        owner: 'root',
      },
    ],
  }),
  'a gVisor sandbox (its own nproc, half a CPU and a bit)': hardenedContainer({
    image: 'repo:1',
    entrypoint: ['sleep'],
    cmd: ['infinity'],
    user: '0:0',
    workingDir: '/workspace',
    env: [],
    labels: containerLabels({ runtime: 'runsc' }),
    memoryBytes: 512 * 1024 ** 2,
    nanoCpus: 1_500_000_001,
    pids: 1280,
    nproc: 64,
    maxFileBytes: 1024 ** 2,
    tmpfsBytes: 8 * 1024 ** 2,
    nofile: 4096,
    runtime: 'runsc',
  }),
  'a sandbox with egress (its own internal network and name server)': hardenedContainer({
    name: 'sandbox-harness-adhoc-sandbox-abcdef',
    image: 'localhost:5000/team/repo@sha256:' + 'a'.repeat(64),
    entrypoint: ['sleep'],
    cmd: ['infinity'],
    user: '0:0',
    workingDir: '/workspace',
    env: ['HTTP_PROXY=http://10.213.0.1:3128'],
    labels: containerLabels({ runId: 'run-2' }),
    memoryBytes: 1024 ** 3,
    nanoCpus: 1e9,
    pids: 256,
    maxFileBytes: 64 * 1024 ** 2,
    tmpfsBytes: 256 * 1024 ** 2,
    nofile: 4096,
    network: { name: 'sandbox-harness-adhoc-sandbox-abcdef-shbr0123456789ab', dns: ['10.213.0.1'] },
  }),
  'an idle container (a tree read)': hardenedContainer({
    image: 'repo:1',
    entrypoint: ['true'],
    cmd: [],
    user: '1000:1000',
    workingDir: '/',
    env: [],
    labels: containerLabels({ role: 'tree' }),
    ...IDLE_CONTAINER_LIMITS,
  }),
};

describe('the one hardened container, rendered for the Docker API and for a container CLI', () => {
  it.each(Object.entries(SPECS))('%s: both renderings read back to the same spec, every field', (_, spec) => {
    const withoutFiles = { ...spec, files: [] };
    const fromApi = specOfCreateBody(createBody(spec));
    const fromCli = specOfCliArgs(containerCliArgs(spec));
    expect(fromApi).toEqual(withoutFiles);
    expect(fromCli).toEqual(withoutFiles);
    expect(fromCli).toEqual(fromApi);
  });

  it('the spec says the whole baseline: no capability, no new privileges, an init, no swap, no mounts, no logs', () => {
    const spec = SPECS['an idle container (a tree read)']!;
    expect(spec.hardening).toBe(HARDENING);
    expect(HARDENING).toEqual({
      capDrop: ['ALL'],
      noNewPrivileges: true,
      privileged: false,
      init: true,
      ipc: 'private',
      noSwap: true,
      logDriver: 'none',
      restart: 'no',
      healthcheck: 'none',
      mounts: 'none',
      publishPorts: false,
      autoRemove: false,
    });
    expect(spec.network.mode).toBe('none');
    expect(spec.tmpfs).toEqual([
      { path: '/tmp', sizeBytes: 1024 * 1024, mode: 0o1777, flags: ['rw', 'nosuid', 'nodev'] },
    ]);
  });

  it('a weaker container reads back weaker from both renderings (the readers see each field, not a constant)', () => {
    const base = SPECS['an idle container (a tree read)']!;
    const weaker: ContainerSpec = {
      ...base,
      hardening: { ...HARDENING, privileged: true, init: false, autoRemove: true } as unknown as Hardening,
    };
    expect(specOfCreateBody(createBody(weaker)).hardening).toEqual(weaker.hardening);
    expect(specOfCliArgs(containerCliArgs(weaker)).hardening).toEqual(weaker.hardening);
  });

  it('the readers refuse what they do not know: a mount in either rendering fails', () => {
    const spec = SPECS['an idle container (a tree read)']!;
    const args = containerCliArgs(spec);
    expect(() => specOfCliArgs(['--volume', '/:/host', ...args])).toThrow(/not understood: --volume/);
    const body = createBody(spec) as { HostConfig: Record<string, unknown> };
    expect(() =>
      specOfCreateBody({ ...body, HostConfig: { ...body.HostConfig, VolumeDriver: 'x' } }),
    ).toThrow(/not understood: VolumeDriver/);
  });

  it('without a disk quota, neither rendering asks for one', () => {
    const spec = withoutDiskQuota(SPECS['an attempt sandbox (quota, files, variables with spaces and `=`)']!);
    expect(JSON.stringify(createBody(spec))).not.toContain('StorageOpt');
    expect(containerCliArgs(spec)).not.toContain('--storage-opt');
  });
});
