/**
 * Operator commands of the `slurm` backend: `doctor` (the controller, partitions, nodes, and on
 * every node a probe that a hardened container there has only lo, no capabilities and nothing
 * of the host mounted: a node that fails is named, never trusted) and `gc` / the fence (this
 * tool's jobs by name, and on every node its containers whose job no longer runs there).
 */
import { containerCliArgs } from '../container/cli-args.js';
import { hardenedContainer, IDLE_CONTAINER_LIMITS } from '../container/container-spec.js';
import type { DoctorCheck, DoctorReport, GcReport, GcScope } from '../types.js';
import { jobName, SLURM_LABEL } from './job-script.js';
import { nodeStep, type StepPlace } from './node-step.js';
import type { SlurmClient } from './slurm-client.js';

/** The image the node probe runs (any image with a POSIX shell; the harness's node base by default). */
export const PROBE_IMAGE = 'sandbox-harness/base-node:20';

/** Inside the probe container: its interfaces, its capabilities, its disk-backed mounts. */
const PROBE_INSIDE = [
  'echo "net $(ls /sys/class/net | tr "\\n" " ")"',
  'echo "cap $(grep CapEff /proc/self/status | tr -d "[:space:]" | cut -d: -f2)"',
  // Mounts whose file system is on a disk (not proc, sysfs, tmpfs, cgroups, the overlay root).
  'while read -r _ _ _ root point opts rest; do fs=${rest#*- }; fs=${fs%% *}; case "$fs" in overlay|proc|tmpfs|devpts|sysfs|cgroup|cgroup2|mqueue) ;; *) echo "mount $point ${opts%%,*}";; esac; done < /proc/self/mountinfo',
].join('; ');

/** On a node: the engine answers, then the probe container runs once and is removed. */
const NODE_PROBE = `cli=$1; img=$2; shift 2
"$cli" version --format '{{.Server.Version}}' 2>&1 | sed 's/^/engine /' || exit 50
"$cli" image inspect "$img" >/dev/null 2>&1 || { echo "image $img is not on node \${SLURMD_NODENAME:-$(hostname)}" >&2; exit 40; }
"$cli" run --rm "$@" 2>&1
`;

/**
 * What every container gets from its engine: its three files, and the engine's own init
 * (`--init`) read-only. Nothing else of a disk may be mounted.
 */
const ENGINE_MOUNTS = new Set([
  '/etc/hostname rw',
  '/etc/hosts rw',
  '/etc/resolv.conf rw',
  '/usr/sbin/docker-init ro',
  '/sbin/docker-init ro',
  '/run/podman-init ro',
]);

export interface NodeProbe {
  node: string;
  ok: boolean;
  detail: string;
  /** The probe's image is not on the node: nothing was learnt of its engine. */
  missingImage?: boolean;
}

/** Runs the probe on one node: a job of its own there, or a step of a job that holds it (`place`). */
export async function probeNode(
  client: SlurmClient,
  node: string,
  image = PROBE_IMAGE,
  place: StepPlace = { node },
): Promise<NodeProbe> {
  const spec = hardenedContainer({
    image,
    entrypoint: ['/bin/sh'],
    cmd: ['-c', PROBE_INSIDE],
    user: '1000:1000',
    workingDir: '/',
    env: [],
    labels: { [SLURM_LABEL.marker]: '1', [SLURM_LABEL.role]: 'probe' },
    ...IDLE_CONTAINER_LIMITS,
  });
  const result = await nodeStep(
    client,
    place,
    NODE_PROBE,
    [client.engineCli, image, ...containerCliArgs(spec)],
    {
      timeoutMs: 120_000,
    },
  ).catch((error: unknown) => ({ code: -1, stdout: Buffer.from(''), stderr: String(error) }));
  const lines = result.stdout.toString().split('\n');
  const engine = lines.find((l) => l.startsWith('engine '))?.slice(7) ?? '';
  const net = lines
    .find((l) => l.startsWith('net '))
    ?.slice(4)
    .trim();
  const cap = lines
    .find((l) => l.startsWith('cap '))
    ?.slice(4)
    .trim();
  const mounts = lines.filter((l) => l.startsWith('mount ')).map((l) => l.slice(6));
  // Said as a sandbox's create says it: stderr's last line may be srun's own ("task 0: Exited").
  if (result.code === 40)
    return { node, ok: false, detail: `image ${image} does not exist on node ${node}`, missingImage: true };
  const problems: string[] = [];
  if (result.code !== 0)
    problems.push(
      `probe failed (exit ${result.code}): ${(result.stderr || lines.join(' ')).trim().slice(-200)}`,
    );
  else {
    if (net !== 'lo') problems.push(`network interfaces: ${net ?? 'unknown'}`);
    if (!cap || !/^0+$/.test(cap)) problems.push(`capabilities: ${cap ?? 'unknown'}`);
    const foreign = mounts.filter((m) => !ENGINE_MOUNTS.has(m));
    if (foreign.length) problems.push(`host mounts: ${foreign.join(', ')}`);
  }
  return problems.length
    ? { node, ok: false, detail: problems.join('; ') }
    : { node, ok: true, detail: `engine ${engine}: only lo, no capabilities, no host mounts` };
}

export async function slurmDoctor(
  client: SlurmClient,
  options: { image?: string } = {},
): Promise<DoctorReport> {
  const checks: DoctorCheck[] = [];
  const endpoint = `slurm (${client.conf})`;
  const ping = await client
    .run('scontrol', ['ping'])
    .catch((error: unknown) => ({ code: -1, stdout: '', stderr: String(error) }));
  const up = ping.code === 0 && /\bUP\b/.test(ping.stdout);
  checks.push({
    name: 'controller',
    ok: up,
    detail: up
      ? (ping.stdout.trim().split('\n')[0] ?? 'UP')
      : `the controller does not answer: ${(ping.stderr || ping.stdout).trim().slice(-200)}`,
    ...(up
      ? {}
      : { fix: `check slurmctld and SLURM_CONF (${client.conf}): \`scontrol ping\``, fatal: true as const }),
  });
  if (!up) return { ok: false, usable: false, endpoint, checks };
  const partitions = await client.ok('sinfo', ['-h', '-o', '%P %a %D', ...partitionArgs(client)]);
  checks.push({
    name: 'partitions',
    ok: partitions.trim() !== '',
    detail: partitions.trim().split('\n').join(', '),
  });
  const nodesOut = await client.ok('sinfo', ['-h', '-N', '-o', '%N %t', ...partitionArgs(client)]);
  const nodes = [...new Set(nodesOut.trim().split('\n').filter(Boolean))].map(
    (l) => l.split(' ') as [string, string],
  );
  const usable = nodes.filter(([, state]) => /^(idle|mix|alloc)/.test(state));
  checks.push({
    name: 'nodes',
    ok: usable.length > 0,
    detail: nodes.map(([n, s]) => `${n} ${s}`).join(', ') || 'none',
    ...(usable.length
      ? {}
      : { fatal: true as const, fix: 'resume or add nodes (`scontrol update nodename=... state=resume`)' }),
  });
  const probes = await Promise.all(usable.map(([node]) => probeNode(client, node, options.image)));
  for (const probe of probes) {
    checks.push({
      name: `node ${probe.node}`,
      ok: probe.ok,
      detail: probe.detail,
      ...(probe.ok
        ? {}
        : {
            fix: `exclude or drain ${probe.node} until its engine is fixed: \`scontrol update nodename=${probe.node} state=drain reason=sandbox-probe\``,
          }),
    });
  }
  const good = probes.filter((p) => p.ok).length;
  return {
    ok: checks.every((c) => c.ok),
    usable: good > 0,
    endpoint,
    checks,
  };
}

function partitionArgs(client: SlurmClient): string[] {
  return client.settings.partition ? [`--partition=${client.settings.partition}`] : [];
}

/** On a node: every container of this backend, `name job` per line. */
const LIST_CONTAINERS = `"$1" ps -a --filter "label=${SLURM_LABEL.marker}=1" --filter "label=${SLURM_LABEL.job}" --format '{{.Names}} {{.Label "${SLURM_LABEL.job}"}}'`;
/** On a node: remove the named containers. */
const REMOVE_CONTAINERS = `cli=$1; shift; [ $# -eq 0 ] || "$cli" rm -f "$@" >/dev/null 2>&1; exit 0`;

/** This tool's jobs (by their name) as `id name state node`. */
async function ownJobs(
  client: SlurmClient,
  runId?: string,
): Promise<{ id: string; name: string; state: string; node: string }[]> {
  const out = await client.ok('squeue', [
    '-h',
    '-o',
    '%i|%j|%T|%N',
    ...(runId ? [`--name=${jobName(runId)}`] : []),
  ]);
  return out
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [id = '', name = '', state = '', node = ''] = l.split('|');
      return { id, name, state, node };
    })
    .filter((j) => j.name.startsWith('sandbox-harness.'));
}

/**
 * The fence on one node: every container of this backend there whose job is not RUNNING on that
 * node is removed; nothing of it is read. Returns the names removed.
 */
export async function fenceNode(client: SlurmClient, node: string, dryRun = false): Promise<string[]> {
  const listed = await nodeStep(client, { node }, LIST_CONTAINERS, [client.engineCli], { timeoutMs: 60_000 });
  if (listed.code !== 0) throw client.unavailable(`listing containers on ${node} failed`, listed.stderr);
  const running = new Set(
    (await ownJobs(client)).filter((j) => j.state === 'RUNNING' && j.node === node).map((j) => j.id),
  );
  const stale = listed.stdout
    .toString()
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ') as [string, string])
    .filter(([, job]) => !running.has(job))
    .map(([name]) => name);
  if (!dryRun && stale.length)
    await nodeStep(client, { node }, REMOVE_CONTAINERS, [client.engineCli, ...stale]);
  return stale;
}

/** This tool's jobs (of one run, or all) cancelled, then every node fenced. */
export async function collectSlurmGarbage(client: SlurmClient, scope: GcScope): Promise<GcReport> {
  const jobs = await ownJobs(client, scope.runId);
  const old = jobs.filter((j) => j.state === 'PENDING' || j.state === 'RUNNING' || j.state === 'SUSPENDED');
  if (!scope.dryRun && old.length)
    await client.ok(
      'scancel',
      old.map((j) => j.id),
    );
  const nodesOut = await client.ok('sinfo', ['-h', '-N', '-o', '%N %t']);
  const nodes = [
    ...new Set(
      nodesOut
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ') as [string, string]),
    ),
  ]
    .filter(([, state]) => !/down|drain|fail/.test(state))
    .map(([n]) => n);
  const removed: GcReport['containers'] = [];
  for (const node of [...new Set(nodes)]) {
    for (const name of await fenceNode(client, node, scope.dryRun)) {
      removed.push({ id: `${node}/${name}`, name, run: scope.runId ?? '', kept: false });
    }
  }
  return {
    containers: [
      ...old.map((j) => ({
        id: `job ${j.id}`,
        name: j.name,
        run: j.name.slice('sandbox-harness.'.length),
        kept: false,
      })),
      ...removed,
    ],
    images: [],
  };
}
