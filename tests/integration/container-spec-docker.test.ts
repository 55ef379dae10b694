/**
 * The one hardened container, made twice on the real engine: once from the Docker API
 * rendering (what the Docker backend does) and once with the engine's own CLI from the flag
 * rendering (what a backend that runs `docker create` on a node does). What a process in each
 * sees (its user, capabilities, limits, cgroup, names, resolver, interfaces, /tmp) and what
 * the engine says each is must be the same: the renderings say one thing.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { containerCliArgs } from '../../src/sandbox/container/cli-args.js';
import { hardenedContainer, type ContainerSpec } from '../../src/sandbox/container/container-spec.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { containerLabels, LABEL } from '../../src/sandbox/docker/labels.js';
import { engineGet } from '../helpers/engine-api.js';

const run = promisify(execFile);
const RUN_ID = `container-spec-${randomBytes(3).toString('hex')}`;

/** What a process inside sees; lines that name the container itself (ids) are left out. */
const PROBE = [
  'echo "user=$(id -u):$(id -g)"',
  "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
  'echo "pid1=$(tr "\\0" " " < /proc/1/cmdline)"',
  "grep -E '^Max (open files|file size|processes) ' /proc/self/limits",
  'echo "hostname=$(hostname)"',
  // Which addresses each name resolves to (a CLI-made container's engine-written hosts file may list one twice).
  `node -e 'const d = require("dns"); (async () => { for (const n of ["localhost", "ip6-localhost", "ip6-loopback", "sandbox", "nowhere.example"]) console.log(n + "=" + (await d.promises.lookup(n, { all: true }).then((a) => [...new Set(a.map((x) => x.address))].sort().join(" "), (e) => e.code))); })()'`,
  "grep -E '^(nameserver|search|options)' /etc/resolv.conf",
  'echo "lo-ipv6-disabled=$(cat /proc/sys/net/ipv6/conf/lo/disable_ipv6)"',
  'echo "interfaces=$(ls /sys/class/net | tr "\\n" " ")"',
  'awk \'$2=="/tmp" {print "tmp=" $3 " " $4}\' /proc/mounts',
  'echo "tmp-mode=$(stat -c %a /tmp)"',
  'for f in pids/pids.max memory/memory.limit_in_bytes memory/memory.memsw.limit_in_bytes cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us pids.max memory.max memory.swap.max cpu.max; do [ -r /sys/fs/cgroup/$f ] && echo "$f=$(cat /sys/fs/cgroup/$f)"; done',
  // Engine-managed files (the hosts and resolver files a CLI-made container gets) aside,
  // the same mounts: no bind mount of anything else.
  "awk '{print $2}' /proc/mounts | grep -vE '^/etc/(hosts|hostname|resolv.conf)$' | sort | tr '\\n' ' '; echo",
  // pid 1 (the init and the keep-alive) runs as root without capabilities; is it writable to the sandbox user?
  'echo "signal-pid1=$(kill -0 1 2>/dev/null && echo yes || echo no)"',
].join('; ');

const made: string[] = [];

beforeAll(async () => {
  await dockerEngine().ping(5000);
  await ensureBaseImage('node', { onLine: () => undefined });
}, 600_000);

afterAll(async () => {
  for (const id of made) await dockerEngine().containers.remove(id);
});

async function viaApi(spec: ContainerSpec): Promise<string> {
  const id = await dockerEngine().containers.create(spec);
  made.push(id);
  await dockerEngine().containers.start(id);
  return id;
}

async function viaCli(spec: ContainerSpec): Promise<string> {
  const { stdout } = await run('docker', ['create', ...containerCliArgs(spec)]);
  const id = stdout.trim();
  made.push(id);
  await run('docker', ['start', id]);
  return id;
}

async function probe(id: string): Promise<string> {
  const { stdout } = await run('docker', ['exec', '-u', '1000:1000', '-w', '/', id, 'sh', '-c', PROBE]);
  return stdout;
}

interface Inspected {
  Config: Record<string, unknown>;
  HostConfig: Record<string, unknown>;
}

/** What the engine says a container is, for the fields the spec decides. */
async function described(id: string) {
  const c = (await engineGet<Inspected>(`/containers/${id}/json`))!;
  const h = c.HostConfig;
  const sorted = (v: unknown) => [...((v as unknown[] | null) ?? [])].map((x) => JSON.stringify(x)).sort();
  return {
    config: {
      User: c.Config.User,
      // The same variables; the CLI may list them in another order.
      Env: [...((c.Config.Env as string[] | null) ?? [])].sort(),
      Labels: c.Config.Labels,
      Entrypoint: c.Config.Entrypoint,
      Cmd: c.Config.Cmd,
      WorkingDir: c.Config.WorkingDir,
      Hostname: c.Config.Hostname,
      Healthcheck: c.Config.Healthcheck,
    },
    host: {
      NetworkMode: h.NetworkMode,
      CapDrop: h.CapDrop,
      CapAdd: h.CapAdd ?? null,
      SecurityOpt: h.SecurityOpt,
      Privileged: h.Privileged,
      Init: h.Init,
      IpcMode: h.IpcMode,
      PidsLimit: h.PidsLimit,
      Memory: h.Memory,
      MemorySwap: h.MemorySwap,
      NanoCpus: h.NanoCpus,
      Tmpfs: h.Tmpfs,
      Ulimits: sorted(h.Ulimits),
      Binds: sorted(h.Binds),
      Mounts: sorted(h.Mounts),
      PublishAllPorts: h.PublishAllPorts,
      AutoRemove: h.AutoRemove,
      RestartPolicy: (h.RestartPolicy as { Name: string }).Name,
      LogConfig: (h.LogConfig as { Type: string }).Type,
      ExtraHosts: h.ExtraHosts,
      Runtime: h.Runtime,
      ReadonlyRootfs: h.ReadonlyRootfs,
    },
  };
}

function spec(role: string): ContainerSpec {
  return hardenedContainer({
    name: `sandbox-harness-${RUN_ID}-${role}-${randomBytes(3).toString('hex')}`,
    image: DEFAULT_BASE_IMAGE,
    entrypoint: ['sleep'],
    cmd: ['infinity'],
    user: '0:0',
    workingDir: '/workspace',
    env: ['HOME=/home/sandbox', 'LANG=C.UTF-8', 'GREETING=hello world'],
    labels: containerLabels({ runId: RUN_ID, role: 'spec' }),
    memoryBytes: 256 * 1024 ** 2,
    nanoCpus: 500_000_000,
    pids: 128,
    maxFileBytes: 8 * 1024 ** 2,
    tmpfsBytes: 16 * 1024 ** 2,
    nofile: 1024,
  });
}

describe('the hardened container from the API rendering and from the CLI rendering', () => {
  it('is the same container to a process inside and to the engine', async () => {
    const api = spec('api');
    const cli = spec('cli');
    const [a, c] = [await viaApi(api), await viaCli(cli)];
    const [seenA, seenC] = [await probe(a), await probe(c)];
    expect(seenC).toBe(seenA);
    // What is seen is the baseline, not two containers equally without it.
    expect(seenA).toMatch(/^user=1000:1000$/m);
    expect(seenA).toMatch(/^CapEff:\s+0+$/m);
    expect(seenA).toMatch(/^CapBnd:\s+0+$/m);
    expect(seenA).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(seenA).toMatch(/^pid1=\/sbin\/docker-init -- sleep infinity $/m);
    expect(seenA).toMatch(/^Max open files\s+1024\s+1024/m);
    expect(seenA).toMatch(/^localhost=127\.0\.0\.1 ::1$/m);
    expect(seenA).toMatch(/^ip6-loopback=::1$/m);
    expect(seenA).toMatch(/^sandbox=127\.0\.0\.1 ::1$/m);
    expect(seenA).toMatch(/^nowhere\.example=E[A-Z_]+$/m);
    expect(seenA).toMatch(/^nameserver 127\.0\.0\.1$/m);
    expect(seenA).not.toMatch(/^search /m);
    expect(seenA).toMatch(/^lo-ipv6-disabled=0$/m);
    expect(seenA).toMatch(/^interfaces=lo $/m);
    expect(seenA).toMatch(/^tmp=tmpfs rw,nosuid,nodev,\S*size=16384k/m);
    expect(seenA).toMatch(/^tmp-mode=1777$/m);
    expect(seenA).toMatch(/^pids\/pids\.max=128$|^pids\.max=128$/m);
    expect(seenA).toMatch(/^signal-pid1=no$/m);

    const [engineA, engineC] = [await described(a), await described(c)];
    const { Labels: _labelsA, ...configA } = engineA.config;
    const { Labels: _labelsC, ...configC } = engineC.config;
    expect(configC).toEqual(configA);
    // The resolver and lo's IPv6 are not compared here: the CLI says them with --dns and
    // --sysctl, the API backend with the files it writes; what the process saw above is the same.
    expect(engineC.host).toEqual(engineA.host);
    expect(engineA.host).toMatchObject({
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Privileged: false,
      Init: true,
      IpcMode: 'private',
      Memory: 256 * 1024 ** 2,
      MemorySwap: 256 * 1024 ** 2,
      Binds: [],
      Mounts: [],
      LogConfig: 'none',
      RestartPolicy: 'no',
    });
    expect(Object.keys(engineA.config.Labels as object)).toContain(LABEL.marker);
  });
});
