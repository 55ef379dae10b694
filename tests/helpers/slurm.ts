/**
 * A real Slurm cluster for tests, on this one machine: `munged` on a socket and key of its own,
 * `slurmctld` on the host, and N nodes, each a `slurmd` in the network namespace of its own
 * Docker engine (tests/helpers/engines.ts) with a hostname of its own. Nothing of the machine's
 * own munge or Slurm set-up is read or touched: every path, the key, the ports and the cluster
 * name are the cluster's, under `SLURM_ROOT/shlab<slot>/`.
 *
 * How the pieces reach each other without touching the host's interfaces:
 * - node K's namespace has a veth pair to the host (10.231.<slot>.2 there, .1 on the host);
 * - slurmctld listens on every host address; its address in slurm.conf is the host end of the
 *   first node's pair, and every other node gets a /32 route to it through its own pair (a
 *   host-local address is answered on any interface), so no node can reach anything else;
 * - srun on the host listens on every address too, and a node's slurmstepd connects back to
 *   the address srun's launch came from (the host end of that node's pair).
 * - slurmctld runs in a UTS namespace named `<cluster>ctl` (it refuses to start unless its
 *   hostname is the controller's name); each slurmd in one named after its node, plus a mount
 *   namespace whose /run is a private tmpfs holding the node's engine socket as
 *   /run/docker.sock: on a node, a plain `docker` is that node's own engine, as on a real one.
 *
 * `ProctrackType=proctrack/linuxproc` and `TaskPlugin=task/none`: no cgroup plugin (this
 * machine's cgroups belong to its Docker). `SlurmdParameters=config_overrides`: each node claims
 * `cpusPerNode` CPUs and `memoryMbPerNode` MB whatever the machine has (2 cores here), so three
 * nodes run several jobs each. Memory is not a consumable (`CR_Core`). Accounting is off
 * (`sacct` needs slurmdbd and a MariaDB server); finished jobs stay visible to `squeue` and
 * `scontrol` for `MinJobAge`.
 *
 * Root only. `stopSlurm` leaves nothing (processes, namespaces, mounts, folders); `reapSlurm`
 * takes down clusters whose owner process died; `slurmTraces` lists what is left of one.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import {
  claimedByAnother,
  claimFolder,
  ENGINE_PREFIX,
  ENGINES_ROOT,
  ownerAlive,
  ownerOf,
  readOwner,
  requireEngineTools,
  signal,
  startEngines,
  stillClaimed,
  stopEngines,
  traces as engineTraces,
  waitGone,
  withLabLock,
  type TestEngine,
} from './engines.js';

const run = promisify(execFile);

export const SLURM_ROOT = '/var/tmp/sandbox-harness-test-slurm';
const CLUSTER_PREFIX = 'shlab';
const SLURM_LOCK = 'slots';
const MAX_CLUSTERS = 50;
/** slurmctld of cluster slot K listens on BASE_PORT + K (below the ephemeral port range). */
const BASE_PORT = 17_100;
/** slurmd listens in its node's own namespace, so every node can use the same port. */
const SLURMD_PORT = 6818;
const SLURM_CLIENTS = new Set([
  'srun',
  'sbatch',
  'salloc',
  'sattach',
  'scancel',
  'scontrol',
  'squeue',
  'sinfo',
]);

export interface SlurmPartition {
  name: string;
  /** Node names (default: all). */
  nodes?: string[];
  default?: boolean;
  /** More `key=value` options for its PartitionName line, e.g. `PriorityTier=2`. */
  options?: string;
}

export interface StartSlurmOptions {
  /** How many nodes (default 3). */
  nodes?: number;
  /** CPUs each node offers Slurm (default 8: more than this machine has, on purpose). */
  cpusPerNode?: number;
  /** Memory each node offers Slurm, in MB (default 8192). */
  memoryMbPerNode?: number;
  /** Default: `main` (every node, the default) and `solo` (the last node). */
  partitions?: SlurmPartition[];
  /** Images on every node's engine (default: the node base image); `[]` for none. */
  images?: string[];
  /** Seconds without an answer before slurmctld sets a node DOWN (default 4: DOWN ~11 s after a slurmd dies). */
  slurmdTimeoutSec?: number;
  /** More slurm.conf lines (a later line overrides an earlier one: Epilog=..., PreemptType=...). */
  extraConfig?: string[];
  /** The process whose death makes this cluster a leftover (default: this one). */
  ownerPid?: number;
  /** How long the controller and the nodes may take to come up (default 60 s). */
  readyTimeoutMs?: number;
}

export interface SlurmNode {
  /** The node's Slurm name and hostname: node1, node2, ... */
  name: string;
  /** Its network namespace (/run/netns/<netns>), shared with its engine. */
  netns: string;
  /** Where slurmctld and srun reach its slurmd. */
  address: string;
  /** The node's own Docker engine; on the node a plain `docker` reaches it. */
  engine: TestEngine;
  /** That engine from the host (the test process): `unix://...`. */
  dockerHost: string;
  logFile: string;
}

export interface SlurmCluster {
  name: string;
  dir: string;
  /** This start's claim on the folder (see `claimFolder`): a later cluster may take the name. */
  claim: string;
  confFile: string;
  controller: { host: string; address: string; port: number };
  /**
   * The environment for Slurm commands run from the host: this process's environment less every
   * Slurm and Docker variable (a job inherits the submitter's environment, and a DOCKER_HOST
   * there would send a node's `docker` elsewhere), plus SLURM_CONF.
   */
  env: NodeJS.ProcessEnv;
  nodes: SlurmNode[];
}

/** Per node: the slurmd this process started (killNode/restartNode). */
const slurmdPids = new Map<string, number>();

/** Fails (never skips) when the machine cannot run the lab, saying what to do. */
export async function requireSlurmTools(): Promise<void> {
  await requireEngineTools();
  const missing: string[] = [];
  for (const [tool, pkg] of [
    ['munged', 'munge'],
    ['slurmctld', 'slurmctld'],
    ['slurmd', 'slurmd'],
    ['srun', 'slurm-client'],
    ['unshare', 'util-linux'],
  ] as const) {
    const found = await run('sh', ['-c', `command -v ${tool} || test -x /usr/sbin/${tool}`]).then(
      () => true,
      () => false,
    );
    if (!found) missing.push(`${tool} (${pkg})`);
  }
  if (missing.length) {
    throw new Error(
      `the Slurm tests need ${missing.join(', ')}: run \`bash scripts/setup.sh\` (installs slurm-wlm and munge on Debian as root)`,
    );
  }
}

/**
 * Starts a cluster: its nodes' engines in parallel (images seeded from the engines' image
 * cache), munged, slurmctld, then every slurmd; resolves once every node is idle. Either all of
 * it starts or nothing is left behind.
 */
export async function startSlurm(options: StartSlurmOptions = {}): Promise<SlurmCluster> {
  await requireSlurmTools();
  const owner = await ownerOf(options.ownerPid);
  const count = options.nodes ?? 3;
  if (!Number.isInteger(count) || count < 1 || count > 8)
    throw new Error(`nodes: expected 1 to 8, got ${count}`);
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  // Reaping and claiming under one lock: a reaper must not take a folder claimed meanwhile.
  const { slot, name, dir, claim } = await withLabLock(SLURM_ROOT, SLURM_LOCK, async () => {
    await reapUnlocked();
    return claimFolder({
      root: SLURM_ROOT,
      prefix: CLUSTER_PREFIX,
      owner,
      max: MAX_CLUSTERS,
      usable: (s) => portFree(BASE_PORT + s),
    });
  });
  const confFile = join(dir, 'slurm.conf');
  let engines: TestEngine[] = [];
  let cluster: SlurmCluster | undefined;
  try {
    engines = await startEngines({
      count,
      ownerPid: owner.pid,
      images: options.images ?? [DEFAULT_BASE_IMAGE],
      readyTimeoutMs,
    });
    // What a later `reapSlurm` or `stopSlurmByName` needs to take the nodes down too.
    await writeFile(
      join(dir, 'engines.json'),
      JSON.stringify(engines.map((e) => ({ name: e.name, dir: e.dir, claim: e.claim }))),
    );
    const first = engines[0] as TestEngine;
    const nodes = engines.map((engine, i): SlurmNode => ({
      name: `node${i + 1}`,
      netns: engine.name,
      address: engine.address,
      engine,
      dockerHost: `unix://${engine.socketPath}`,
      logFile: join(dir, 'log', `node${i + 1}.log`),
    }));
    cluster = {
      name,
      dir,
      claim,
      confFile,
      controller: { host: `${name}ctl`, address: first.hostAddress, port: BASE_PORT + slot },
      env: slurmEnv(confFile),
      nodes,
    };
    for (const sub of ['state', 'log', 'run', 'munge', ...nodes.map((n) => join('spool', n.name))]) {
      await mkdir(join(dir, sub), { recursive: true });
    }
    // munged insists that everyone can reach its socket (execute on every folder above it) and
    // that no one else can read its key.
    await chmod(dir, 0o711);
    await chmod(join(dir, 'munge'), 0o711);
    await writeFile(join(dir, 'munge', 'munge.key'), randomBytes(1024), { mode: 0o400 });
    await writeFile(join(dir, 'plugstack.conf'), '');
    await writeFile(confFile, slurmConf(cluster, options));
    // Every node but the first reaches the controller's address through its own pair.
    for (const engine of engines.slice(1)) {
      await run('ip', [
        '-n',
        engine.name,
        'route',
        'add',
        `${first.hostAddress}/32`,
        'via',
        engine.hostAddress,
      ]);
    }
    await startMunge(dir);
    await startController(cluster, readyTimeoutMs);
    await Promise.all(nodes.map((node) => startSlurmd(cluster as SlurmCluster, node)));
    await waitFor(
      async () => {
        const states = await nodeStates(cluster as SlurmCluster);
        return nodes.every((n) => states.get(n.name) === 'IDLE');
      },
      readyTimeoutMs,
      async () =>
        `nodes not idle: ${JSON.stringify(Object.fromEntries(await nodeStates(cluster as SlurmCluster)))}`,
    );
    return cluster;
  } catch (error) {
    await teardown(dir, engines);
    throw error;
  }
}

function slurmEnv(confFile: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(SLURM|SBATCH|SALLOC|SRUN|SQUEUE|SINFO|SCONTROL|SCANCEL|DOCKER)_/.test(key)) continue;
    env[key] = value;
  }
  env.SLURM_CONF = confFile;
  return env;
}

function slurmConf(cluster: SlurmCluster, options: StartSlurmOptions): string {
  const { dir, nodes } = cluster;
  const cpus = options.cpusPerNode ?? 8;
  const memory = options.memoryMbPerNode ?? 8192;
  const all = nodes.map((n) => n.name);
  const partitions = options.partitions ?? [
    { name: 'main', default: true },
    { name: 'solo', nodes: all.slice(-1) },
  ];
  return [
    `ClusterName=${cluster.name}`,
    `SlurmctldHost=${cluster.controller.host}(${cluster.controller.address})`,
    `SlurmctldPort=${cluster.controller.port}`,
    `SlurmdPort=${SLURMD_PORT}`,
    'SlurmUser=root',
    'SlurmdUser=root',
    'AuthType=auth/munge',
    'CredType=cred/munge',
    // cred_expire is also how long a requeued job waits before it may start again (default 120 s).
    `AuthInfo=socket=${join(dir, 'munge', 'munge.sock')},cred_expire=10`,
    `StateSaveLocation=${join(dir, 'state')}`,
    `SlurmdSpoolDir=${join(dir, 'spool', '%n')}`,
    `SlurmctldPidFile=${join(dir, 'run', 'slurmctld.pid')}`,
    `SlurmdPidFile=${join(dir, 'run', '%n.pid')}`,
    `SlurmctldLogFile=${join(dir, 'log', 'slurmctld.log')}`,
    `SlurmdLogFile=${join(dir, 'log', '%n.log')}`,
    `PlugStackConfig=${join(dir, 'plugstack.conf')}`,
    'SlurmctldDebug=info',
    'SlurmdDebug=info',
    'MailProg=/bin/true',
    'ProctrackType=proctrack/linuxproc',
    'TaskPlugin=task/none',
    'SelectType=select/cons_tres',
    // Scheduling that tests need not wait for: a batch job starts at the next tick (1 s), not up
    // to 3 s later; a pending one (a requeued job once eligible) within 2 s, not 60.
    'SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=2',
    'SelectTypeParameters=CR_Core',
    'SlurmdParameters=config_overrides',
    'MpiDefault=none',
    'JobAcctGatherType=jobacct_gather/none',
    'AccountingStorageType=accounting_storage/none',
    'JobCompType=jobcomp/none',
    // A node lost for lack of answers comes back by itself once its slurmd registers again.
    'ReturnToService=2',
    `SlurmdTimeout=${options.slurmdTimeoutSec ?? 4}`,
    'MessageTimeout=5',
    'KillWait=5',
    'InactiveLimit=0',
    'MinJobAge=600',
    'JobRequeue=1',
    ...nodes.map(
      (n) =>
        `NodeName=${n.name} NodeAddr=${n.address} NodeHostname=${n.name} CPUs=${cpus} RealMemory=${memory} State=UNKNOWN`,
    ),
    ...partitions.map((p) =>
      [
        `PartitionName=${p.name}`,
        `Nodes=${(p.nodes ?? all).join(',')}`,
        `Default=${p.default ? 'YES' : 'NO'}`,
        'MaxTime=INFINITE',
        'State=UP',
        p.options ?? '',
      ]
        .join(' ')
        .trim(),
    ),
    ...(options.extraConfig ?? []),
    '',
  ].join('\n');
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

/** A daemon in the foreground, detached from this process, its output appended to `logFile`. */
function daemon(
  command: string,
  args: string[],
  logFile: string,
): { pid: number; exited: () => string | undefined } {
  const log = openSync(logFile, 'a');
  const child = spawn(command, args, { detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  let exited: string | undefined;
  child.once('exit', (code, sig) => (exited = `exited with ${code ?? sig}`));
  child.once('error', (error) => (exited = error.message));
  child.unref();
  if (child.pid === undefined) throw new Error(`${command} did not start`);
  return { pid: child.pid, exited: () => exited };
}

async function startMunge(dir: string): Promise<void> {
  const m = join(dir, 'munge');
  const munged = daemon(
    'munged',
    [
      '--foreground',
      `--socket=${join(m, 'munge.sock')}`,
      `--key-file=${join(m, 'munge.key')}`,
      `--pid-file=${join(m, 'munged.pid')}`,
      `--log-file=${join(m, 'munged.log')}`,
      `--seed-file=${join(m, 'munged.seed')}`,
      '--num-threads=4',
    ],
    join(dir, 'log', 'munged.out'),
  );
  await waitFor(
    async () => {
      if (munged.exited()) {
        throw new Error(`munged ${munged.exited()}: ${await tail(join(dir, 'log', 'munged.out'))}`);
      }
      return existsSync(join(m, 'munge.sock'));
    },
    10_000,
    async () => `munged did not make its socket: ${await tail(join(m, 'munged.log'))}`,
  );
}

async function startController(cluster: SlurmCluster, readyTimeoutMs: number): Promise<void> {
  const ctld = daemon(
    'unshare',
    [
      '--uts',
      'sh',
      '-c',
      'hostname "$1" && exec slurmctld -D -i -f "$2"',
      'sh',
      cluster.controller.host,
      cluster.confFile,
    ],
    join(cluster.dir, 'log', 'slurmctld.out'),
  );
  const log = join(cluster.dir, 'log', 'slurmctld.log');
  await waitFor(
    async () => {
      if (ctld.exited()) throw new Error(`slurmctld ${ctld.exited()}: ${await tail(log)}`);
      return slurm(cluster, 'scontrol', ['ping']).then(
        (out) => out.includes('UP'),
        () => false,
      );
    },
    readyTimeoutMs,
    async () => `slurmctld did not answer: ${await tail(log)}`,
  );
}

async function startSlurmd(cluster: SlurmCluster, node: SlurmNode): Promise<void> {
  const script = [
    'hostname "$1"',
    // A private /run (this mount namespace only) holding the node engine's socket.
    'mount -t tmpfs -o mode=0755,size=1m shlab-run /run',
    'touch /run/docker.sock',
    'mount --bind "$2" /run/docker.sock',
    'exec slurmd -D -f "$3" -N "$1"',
  ].join(' && ');
  const slurmd = daemon(
    'nsenter',
    [
      `--net=/run/netns/${node.netns}`,
      'unshare',
      '--uts',
      '--mount',
      '--propagation',
      'slave',
      'sh',
      '-c',
      script,
      'sh',
      node.name,
      node.engine.socketPath,
      cluster.confFile,
    ],
    join(cluster.dir, 'log', `${node.name}.out`),
  );
  slurmdPids.set(`${cluster.dir}:${node.name}`, slurmd.pid);
  await waitFor(
    async () => {
      if (slurmd.exited())
        throw new Error(`slurmd of ${node.name} ${slurmd.exited()}: ${await tail(node.logFile)}`);
      return isSlurmdOf(slurmd.pid, cluster, node.name);
    },
    10_000,
    async () => `slurmd of ${node.name} did not start: ${await tail(node.logFile)}`,
  );
}

async function isSlurmdOf(pid: number, cluster: SlurmCluster, node: string): Promise<boolean> {
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
  return args[0] === 'slurmd' && args.includes(cluster.confFile) && args.includes(node);
}

function findNode(cluster: SlurmCluster, name: string): SlurmNode {
  const node = cluster.nodes.find((n) => n.name === name);
  if (!node)
    throw new Error(`no node ${name} in ${cluster.name} (${cluster.nodes.map((n) => n.name).join(', ')})`);
  return node;
}

async function slurmdPid(cluster: SlurmCluster, name: string): Promise<number | undefined> {
  const pid = slurmdPids.get(`${cluster.dir}:${name}`);
  return pid !== undefined && (await isSlurmdOf(pid, cluster, name)) ? pid : undefined;
}

/**
 * The node's slurmd dies as a crashed daemon would (SIGKILL): no goodbye to the controller,
 * which sets the node DOWN once `slurmdTimeoutSec` passes without an answer. Its slurmstepds,
 * their job processes and its engine's containers live on.
 */
export async function killNode(cluster: SlurmCluster, name: string): Promise<void> {
  findNode(cluster, name);
  const pid = await slurmdPid(cluster, name);
  if (pid === undefined) throw new Error(`no slurmd of ${name} to kill`);
  signal(pid, 'SIGKILL');
  await waitGone([pid], 10_000);
}

/** The node's slurmd stops the ordinary way (SIGTERM); running steps are left alone. */
export async function stopNode(cluster: SlurmCluster, name: string): Promise<void> {
  findNode(cluster, name);
  const pid = await slurmdPid(cluster, name);
  if (pid === undefined) return;
  signal(pid, 'SIGTERM');
  await waitGone([pid], 10_000);
  signal(pid, 'SIGKILL');
}

/**
 * slurmd of a killed or stopped node started again; resolves once the controller hears from it
 * again (a node DOWN for lack of answers then returns by ReturnToService=2; a drained one stays
 * drained).
 */
export async function restartNode(cluster: SlurmCluster, name: string, timeoutMs = 30_000): Promise<void> {
  const node = findNode(cluster, name);
  if ((await slurmdPid(cluster, name)) !== undefined) throw new Error(`slurmd of ${name} is running`);
  await startSlurmd(cluster, node);
  await waitForNode(
    cluster,
    name,
    (state) => !state.includes('NOT_RESPONDING') && !state.startsWith('DOWN'),
    timeoutMs,
  );
}

export async function drainNode(
  cluster: SlurmCluster,
  name: string,
  reason = 'drained by a test',
): Promise<void> {
  findNode(cluster, name);
  await slurm(cluster, 'scontrol', ['update', `NodeName=${name}`, 'State=DRAIN', `Reason=${reason}`]);
}

export async function resumeNode(cluster: SlurmCluster, name: string): Promise<void> {
  findNode(cluster, name);
  await slurm(cluster, 'scontrol', ['update', `NodeName=${name}`, 'State=RESUME']);
}

/** Node name -> the controller's `State=` (e.g. `IDLE`, `MIXED`, `DOWN+NOT_RESPONDING`, `IDLE+DRAIN`). */
export async function nodeStates(cluster: SlurmCluster): Promise<Map<string, string>> {
  const out = await slurm(cluster, 'scontrol', ['-o', 'show', 'nodes']).catch(() => '');
  const states = new Map<string, string>();
  for (const line of out.split('\n')) {
    const name = /(?:^|\s)NodeName=(\S+)/.exec(line)?.[1];
    const state = /(?:^|\s)State=(\S+)/.exec(line)?.[1];
    if (name && state) states.set(name, state);
  }
  return states;
}

/** Waits until the node's `State=` passes `accept`; returns it. */
export async function waitForNode(
  cluster: SlurmCluster,
  name: string,
  accept: (state: string) => boolean,
  timeoutMs = 30_000,
): Promise<string> {
  let state = '';
  await waitFor(
    async () => {
      state = (await nodeStates(cluster)).get(name) ?? '';
      return accept(state);
    },
    timeoutMs,
    async () => `node ${name} stayed ${state || 'unknown'}`,
  );
  return state;
}

/** A Slurm command against the cluster; its stdout, or an error with its stderr. */
export async function slurm(
  cluster: Pick<SlurmCluster, 'env'>,
  command: string,
  args: string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<string> {
  const pending = run(command, args, {
    env: cluster.env,
    timeout: options.timeoutMs ?? 30_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  // A command that exits before reading its input closes the pipe: not an error of ours.
  pending.child.stdin?.on('error', () => undefined);
  pending.child.stdin?.end(options.input ?? '');
  return (await pending).stdout;
}

/** Polls `check` every 100 ms until it holds; the error says what `describe` saw last. */
export async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  describe: () => Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${await describe()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function tail(file: string, lines = 20): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.split('\n').slice(-lines).join('\n');
}

/**
 * Takes the cluster down and removes every trace; safe to call again: once its folder is gone
 * or another cluster's, there is nothing of this one left to stop (and that one is not ours).
 */
export async function stopSlurm(cluster: Pick<SlurmCluster, 'dir' | 'nodes' | 'claim'>): Promise<void> {
  if (!(await stillClaimed(cluster.dir, cluster.claim))) return;
  await teardown(
    cluster.dir,
    cluster.nodes.map((n) => n.engine),
  );
}

async function teardown(
  dir: string,
  engines: Array<Pick<TestEngine, 'name' | 'dir'> & { claim?: string | undefined }>,
): Promise<void> {
  // 1. Clients on the host (srun, sbatch, ...) still talking to this cluster.
  await killProcesses(await processesOf(dir));
  // 2. The nodes: each engine's teardown kills everything in its namespace (slurmd, its
  //    slurmstepds and their job processes, dockerd, containerd) and its containers.
  await stopEngines(engines);
  // 3. slurmctld, munged and anything else still naming the folder.
  await killProcesses(await processesOf(dir));
  await rm(dir, { recursive: true, force: true });
  for (const [key] of slurmdPids) if (key.startsWith(`${dir}:`)) slurmdPids.delete(key);
}

/**
 * Processes of the cluster in `dir`: those whose command line names it (munged, slurmctld,
 * slurmd) and Slurm clients whose environment points at its slurm.conf.
 */
async function processesOf(dir: string): Promise<Array<{ pid: number; command: string }>> {
  const found: Array<{ pid: number; command: string }> = [];
  const conf = `SLURM_CONF=${join(dir, 'slurm.conf')}`;
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    const args = cmdline.split('\0');
    const base = (args[0] ?? '').split('/').pop() ?? '';
    let ours = args.some((a) => a === dir || a.startsWith(`${dir}/`) || a.includes(`=${dir}/`));
    if (!ours && SLURM_CLIENTS.has(base)) {
      const environ = await readFile(`/proc/${entry}/environ`, 'utf8').catch(() => '');
      ours = environ.split('\0').includes(conf);
    }
    if (ours) found.push({ pid: Number(entry), command: args.join(' ').trim().slice(0, 100) });
  }
  return found;
}

async function killProcesses(processes: Array<{ pid: number }>): Promise<void> {
  const pids = processes.map((p) => p.pid);
  for (const pid of pids) signal(pid, 'SIGKILL');
  await waitGone(pids, 10_000);
}

/** Takes down clusters whose owner process is gone (their engines go with reapEngines); returns their names. */
export async function reapSlurm(): Promise<string[]> {
  return withLabLock(SLURM_ROOT, SLURM_LOCK, reapUnlocked);
}

async function reapUnlocked(): Promise<string[]> {
  const reaped: string[] = [];
  for (const entry of await readdir(SLURM_ROOT).catch(() => [] as string[])) {
    const dir = join(SLURM_ROOT, entry);
    if (!entry.startsWith(CLUSTER_PREFIX) && !entry.startsWith('.claim-')) continue;
    if (await ownerAlive(await readOwner(dir))) continue;
    await teardown(dir, await enginesOf(dir));
    if (entry.startsWith(CLUSTER_PREFIX)) reaped.push(entry);
  }
  return reaped;
}

async function enginesOf(dir: string): Promise<Array<{ name: string; dir: string; claim?: string }>> {
  const text = await readFile(join(dir, 'engines.json'), 'utf8').catch(() => '[]');
  const parsed = JSON.parse(text) as Array<{ name: string; dir: string; claim?: string }>;
  // Only engines of the test-engine layout: this file is data, not a list of things to remove.
  return parsed.filter((e) => e.name.startsWith(ENGINE_PREFIX) && e.dir === join(ENGINES_ROOT, e.name));
}

/** Takes down the cluster `name` (shlab<N>) started by another process, e.g. by scripts/test-slurm.ts. */
export async function stopSlurmByName(name: string): Promise<void> {
  if (!new RegExp(`^${CLUSTER_PREFIX}\\d+$`).test(name))
    throw new Error(`expected a cluster name like ${CLUSTER_PREFIX}1, got ${name}`);
  const dir = join(SLURM_ROOT, name);
  await teardown(dir, await enginesOf(dir));
}

/** What is left of the cluster on this machine: its folder, its processes, its nodes' engines. */
export async function slurmTraces(cluster: Pick<SlurmCluster, 'dir' | 'nodes' | 'claim'>): Promise<string[]> {
  const found: string[] = [];
  // A folder of another claim, and what names it, is a cluster started since under this name.
  if (!(await claimedByAnother(cluster.dir, cluster.claim))) {
    if (existsSync(cluster.dir)) found.push(`folder ${cluster.dir}`);
    for (const p of await processesOf(cluster.dir)) found.push(`process ${p.pid} (${p.command})`);
  }
  for (const node of cluster.nodes) {
    for (const trace of await engineTraces(node.engine.name, node.engine.claim))
      found.push(`${node.name}: ${trace}`);
  }
  return found;
}
