/**
 * The Slurm implementation of the sandbox contract: a sandbox is a batch job (`job-script.ts`)
 * holding one node, and on that node one container made by the node's own engine CLI from the
 * same hardened spec as a local sandbox (`hardenedContainer` + `containerCliArgs`). Every
 * command, file call, scan, export and the freeze is the POSIX layer's, over job steps
 * (`SrunTransport`). The agent loop and the model keys stay on the submitting host; jobs and
 * steps get none of its variables (`--export=NONE`).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import {
  errorMessage,
  HarnessError,
  ImageError,
  SandboxDead,
  NodeFailure,
  SandboxUnavailable,
  UsageError,
} from '../../errors.js';
import { containerCliArgs } from '../container/cli-args.js';
import { hardenedContainer, IDLE_CONTAINER_LIMITS, withoutDiskQuota } from '../container/container-spec.js';
import { injectedFiles } from '../container/injected-files.js';
import { workspaceRelative } from '../posix/paths.js';
import { PosixSandbox, type PosixSandboxOptions } from '../posix/posix-sandbox.js';
import { packTar, readTarTree } from '../tar.js';
import {
  DEFAULT_RESOURCES,
  SANDBOX_GID,
  SANDBOX_UID,
  WORKSPACE,
  type AttachRequest,
  type QueueEvent,
  type Sandbox,
  type SandboxBackend,
  type SandboxSpec,
  type SandboxState,
  type TreeEntry,
  type WorkspaceTree,
} from '../types.js';
import {
  containerNameOf,
  AWAIT_TRAP_SCRIPT,
  CREATE_SCRIPT,
  jobName,
  jobScript,
  REMOVE_SCRIPT,
  RESTART_SCRIPT,
  RUNNING_SCRIPT,
  SLURM_LABEL,
  TREE_SCRIPT,
} from './job-script.js';
import { NodeHealth } from './node-health.js';
import { NodeImages } from './node-images.js';
import { RunJobs, type RunJobLease } from './run-jobs.js';
import { nodeStep, type StepPlace } from './node-step.js';
import { EXPORT_NONE, jobState, SlurmClient, type SlurmSettings } from './slurm-client.js';
import { nodeName, SrunTransport, type SandboxAddress } from './srun-transport.js';

const USER = `${SANDBOX_UID}:${SANDBOX_GID}`;
const ROOT = '0:0';
const BASE_ENV = ['HOME=/home/sandbox', 'LANG=C.UTF-8', 'SANDBOX_HARNESS=1'];
const MIB = 1024 * 1024;
/** The loopback names the docker CLI writes into every hosts file itself. */
const DOCKER_OWN_HOSTS = new Set(['localhost:::1', 'ip6-localhost:::1', 'ip6-loopback:::1']);

export type { QueueEvent };

export interface SlurmBackendOptions extends SlurmSettings {
  /** Slurm's outer bound on a sandbox (`--time`), minutes; the harness keeps its own deadlines inside it. */
  timeLimitMinutes?: number;
  /** How long a job may wait in the queue before create gives up (default: no limit). */
  queueTimeoutMs?: number;
  onQueued?: ((event: QueueEvent) => void) | undefined;
  /** Notes for a person: a node excluded (probe failed, lost), fenced, back. */
  onNote?: ((line: string) => void) | undefined;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class SlurmSandbox extends PosixSandbox {
  private disposed = false;

  /** A node lost under the sandbox is infrastructure (retried elsewhere), never "the sandbox stopped". */
  protected override async checkUsable(): Promise<void> {
    if (this.srun && (await this.srun.nodeLost())) throw this.srun.lostError();
  }

  private get srun(): SrunTransport | undefined {
    return this.transport instanceof SrunTransport ? this.transport : undefined;
  }

  /** Its node, named in run records and eval results where a local sandbox names its engine. */
  get where(): string | undefined {
    return nodeName(this.address.node);
  }

  constructor(
    private readonly client: SlurmClient,
    readonly address: SandboxAddress,
    options: PosixSandboxOptions,
    /** Hands the run's job back (`RunJobs`): it ends once no sandbox of the run holds it. */
    private readonly releaseJob: () => Promise<void> = async () => undefined,
  ) {
    super(options);
  }

  protected override async hardFreeze(reason: string): Promise<void> {
    const result = await nodeStep(this.client, this.address, RESTART_SCRIPT, [
      this.client.engineCli,
      this.address.container,
    ]).catch(() => undefined);
    if (result?.code !== 0) throw new SandboxDead(`${reason}; restarting the sandbox failed too`);
  }

  async isAlive(): Promise<boolean> {
    if (this.disposed) return false;
    const state = await jobState(this.client, this.address.job).catch(() => undefined);
    if (state?.state !== 'RUNNING' || state.node !== this.address.node) return false;
    const result = await nodeStep(this.client, this.address, RUNNING_SCRIPT, [
      this.client.engineCli,
      this.address.container,
    ]).catch(() => undefined);
    return result?.code === 0 && result.stdout.toString().trim() === 'true';
  }

  /** Removes the container, then hands the run's job back (whose trap removes what is left when it ends). Kept sandboxes do not exist on Slurm. */
  async dispose(_options: { keep?: boolean } = {}): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.closeChannel();
    await removeContainer(this.client, this.address);
    await this.releaseJob();
  }
}

/** The container removed over a step; a job or container already gone is fine. */
async function removeContainer(client: SlurmClient, address: SandboxAddress): Promise<void> {
  await nodeStep(client, address, REMOVE_SCRIPT, [client.engineCli, address.container], {
    timeoutMs: 60_000,
  }).catch(() => undefined);
}

/** A job ended (a job already gone is fine), and no longer cancelled on exit. */
async function cancelJob(client: SlurmClient, job: string): Promise<void> {
  await client.run('scancel', [job]).catch(() => undefined);
  liveJobs.get(client)?.delete(job);
}

/** How many jobs one sandbox may go through while nodes fail their probe. */
const MAX_PLACEMENTS = 4;

/**
 * Jobs this process submitted and has not cancelled yet, per client. A harness that exits
 * before it disposed them (a second Ctrl-C, a crash) cancels them on its way out, in one
 * synchronous scancel: their batch scripts' traps then remove the containers. Only SIGKILL
 * leaves them to their `--time` and `gc`.
 */
const liveJobs = new Map<SlurmClient, Set<string>>();
let exitHook = false;

function trackJob(client: SlurmClient, job: string): void {
  let jobs = liveJobs.get(client);
  if (!jobs) liveJobs.set(client, (jobs = new Set()));
  jobs.add(job);
  if (!exitHook) {
    exitHook = true;
    process.once('exit', cancelLiveJobsSync);
  }
}

/** Cancels every job still live, synchronously (an 'exit' handler cannot wait). */
export function cancelLiveJobsSync(): void {
  for (const [client, jobs] of liveJobs) {
    if (jobs.size === 0) continue;
    spawnSync('scancel', [...jobs], { env: client.env, stdio: 'ignore', timeout: 5000 });
    jobs.clear();
  }
}

export class SlurmBackend implements SandboxBackend {
  readonly name = 'slurm';
  readonly client: SlurmClient;
  /** Repo images this process builds on the nodes (`repoImage` of the provider registers them). */
  readonly images: NodeImages;
  /** Nodes probed before use, and those left out (failed the probe, or lost until fenced). */
  readonly health: NodeHealth;
  private readonly runJobs: RunJobs;
  private readonly trees = new Map<string, Promise<WorkspaceTree>>();

  constructor(
    private readonly options: SlurmBackendOptions = {},
    readonly engine = 'slurm',
  ) {
    this.client = new SlurmClient(options);
    this.images = new NodeImages(this.client);
    this.health = new NodeHealth(this.client, options.onNote);
    this.runJobs = new RunJobs((job) => cancelJob(this.client, job));
  }

  /** Why egress cannot be had here: a node's container has no network, and no proxy reaches it. */
  async egressProblem(): Promise<string | undefined> {
    return 'the slurm backend runs every sandbox without network; egress by name needs the docker backend';
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    if (spec.egress) {
      throw new UsageError('the slurm backend cannot give a sandbox egress', {
        hint: 'Run egress sandboxes with --backend docker, or drop sandbox.egress from the catalog.',
      });
    }
    if (spec.runtime && spec.runtime !== 'default') {
      throw new UsageError(`the slurm backend has no runtime choice (asked: ${spec.runtime})`, {
        hint: "The node's engine runs every sandbox under its default runtime.",
      });
    }
    const resources = { ...DEFAULT_RESOURCES, ...spec.resources };
    // Every sandbox of a run in the run's one job (run-jobs.ts: no run waits for a second allocation).
    // The baseline is the eval's, shared by every trial of its image: it joins any job held.
    const shared = spec.role === 'baseline';
    for (let tries = 1; ; tries++) {
      const lease = await this.runJobs.acquire(spec.runId, () => this.placeJob(spec, resources), {
        shared,
        usable: (placed) => !this.health.isExcluded(placed.node),
      });
      try {
        return await this.startIn(lease, spec, resources);
      } catch (error) {
        // A shared sandbox joined another run's job: lost with its node, it goes elsewhere, once.
        if (!(shared && tries === 1 && this.health.isExcluded(lease.node))) throw error;
      }
    }
  }

  /** The sandbox's container in the job of `lease`, on its node; the lease handed back when it fails. */
  private async startIn(
    lease: RunJobLease,
    spec: SandboxSpec,
    resources: Required<NonNullable<SandboxSpec['resources']>>,
  ): Promise<Sandbox> {
    const { job, node } = lease;
    let address: SandboxAddress | undefined;
    try {
      if (lease.seq > 0) await this.images.ensure({ job, node }, spec.image);
      address = {
        job,
        node,
        container: lease.seq === 0 ? containerNameOf(job) : `${containerNameOf(job)}-s${lease.seq}`,
      };
      const marker = randomBytes(16).toString('hex');
      const labels = {
        [SLURM_LABEL.marker]: '1',
        [SLURM_LABEL.run]: spec.runId ?? 'adhoc',
        [SLURM_LABEL.role]: spec.role ?? 'sandbox',
        [SLURM_LABEL.keep]: spec.keep ?? 'never',
        [SLURM_LABEL.created]: new Date().toISOString(),
        [SLURM_LABEL.job]: job,
        [SLURM_LABEL.restart]: '0',
      };
      const container = withoutDiskQuota(
        hardenedContainer({
          name: address.container,
          image: spec.image,
          entrypoint: ['sleep'],
          cmd: ['infinity'],
          // As on Docker: the init and keep-alive run as root without capabilities, every
          // exec names its user (SrunTransport).
          user: ROOT,
          workingDir: WORKSPACE,
          env: [...BASE_ENV, ...Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`)],
          labels,
          memoryBytes: resources.memoryBytes,
          nanoCpus: Math.round(resources.cpus * 1e9),
          pids: resources.pids,
          maxFileBytes: resources.maxFileBytes,
          tmpfsBytes: resources.tmpfsBytes,
          nofile: 4096,
        }),
      );
      if (this.client.engineCli === 'docker') {
        // docker 20.10's own hosts file already has `::1 localhost ip6-localhost ip6-loopback`
        // under --network none: the same names again would be listed twice.
        container.extraHosts = container.extraHosts.filter((entry) => !DOCKER_OWN_HOSTS.has(entry));
      }
      const tar = await packTar(injectedFiles(spec, marker));
      if (spec.scanAgainst) await this.images.ensure(address, spec.scanAgainst);
      const create = () =>
        nodeStep(
          this.client,
          address!,
          // The job's first container waits for the job's trap; later ones find it set.
          lease.seq === 0 ? AWAIT_TRAP_SCRIPT + CREATE_SCRIPT : CREATE_SCRIPT,
          [this.client.engineCli, spec.image, address!.container, ...containerCliArgs(container)],
          { stdin: tar, timeoutMs: 300_000 },
        );
      let made = await create();
      if (made.code === 40 && this.images.knows(spec.image)) {
        // Removed from the node since it was made sure of (a gc there): once more, from the context.
        this.images.forget(node, spec.image);
        await this.images.ensure(address, spec.image);
        made = await create();
      }
      if (made.code === 40) {
        throw new ImageError(`image ${spec.image} does not exist on node ${node}`, {
          hint: "Build it first (the eval and fix commands build repo images on the node), or check the catalog's sandbox.image.",
        });
      }
      if (made.code === 44) {
        throw new ImageError(
          `image ${spec.image} declares volumes; their writes would escape the sandbox's disk budget and change detection`,
          { hint: 'Remove the VOLUME instructions from the sandbox Dockerfile.' },
        );
      }
      if (made.code !== 0 || made.stdout.toString().trim() !== 'ready') {
        throw new NodeFailure(
          nodeName(node),
          `could not start the sandbox container on node ${node} (step exit ${made.code}): ${made.stderr.trim().slice(-500)}`,
        );
      }
      const transport = new SrunTransport(this.client, address, (lost) => this.nodeLost(lost));
      const sandbox = new SlurmSandbox(
        this.client,
        address,
        {
          id: address.container,
          image: spec.image,
          labels,
          env: [],
          transport,
          tree: () => this.workspaceTree(spec.scanAgainst ?? spec.image, { place: address }),
          ...(spec.hidden ? { hidden: spec.hidden.map((p) => workspaceRelative(p)) } : {}),
        } satisfies PosixSandboxOptions,
        () => lease.release(),
      );
      // As on Docker: an agent's sandbox starts its channel now, and the held-out files go over it.
      if (spec.channel) sandbox.startChannel();
      await sandbox.removeHidden(spec.channel === true);
      return sandbox;
    } catch (error) {
      // A step here may be the first to meet a node Slurm has not found dead yet: asked before
      // the job is handed back (a cancelled job says nothing about its node).
      const lost = await this.lostWith(error, lease);
      // Never leave a half-made sandbox behind: its container (on a lost node: the fence's), and
      // its job when no other holds it.
      if (address && !lost) await removeContainer(this.client, address);
      await lease.release();
      throw error;
    }
  }

  /**
   * A job for the sandbox on a node this process trusts: submitted (trusted-out nodes excluded),
   * waited for, the image made sure of there, and the node probed before its first sandbox
   * (fail closed: a node that fails is excluded and the sandbox goes elsewhere).
   */
  private async placeJob(
    spec: SandboxSpec,
    resources: Required<NonNullable<SandboxSpec['resources']>>,
  ): Promise<{ job: string; node: string }> {
    for (let tries = 1; ; tries++) {
      const job = await this.submit(spec, resources);
      trackJob(this.client, job);
      let node: string | undefined;
      try {
        node = await this.waitRunning(job);
        // A repo image of this process is built on the node from its context, once per node.
        await this.images.ensure({ job, node }, spec.image);
        if ((await this.health.check({ job, node }, spec.image)).ok) return { job, node };
      } catch (error) {
        // A node Slurm has not found dead yet takes the job and fails its first step: it is
        // left out, and the sandbox goes elsewhere like after a failed probe.
        const lost = node !== undefined && (await this.lostWith(error, { job, node }));
        if (!lost) {
          await cancelJob(this.client, job);
          throw error;
        }
      }
      await cancelJob(this.client, job);
      if (tries >= MAX_PLACEMENTS) {
        throw new SandboxUnavailable(
          `no node of the cluster could take the sandbox: ${this.health.describeExcluded()}`,
          {
            hint: 'See `sandbox-harness doctor --backend slurm` for each node.',
          },
        );
      }
    }
  }

  /**
   * A step in `place` failed (ended without its end record, or a node step of `create` did not
   * run): lost when Slurm says its job failed with its node, the node no longer answers, or,
   * while Slurm still calls both fine, a no-op step cannot run there. Then no new sandbox goes
   * there until it is fenced. A job that ended for another reason is joined by no one again.
   */
  private async nodeLost(place: { job: string; node: string }): Promise<boolean> {
    if (this.health.isExcluded(place.node)) {
      // Already out: asked again, a dead node would hold the no-op step for a MessageTimeout.
      this.runJobs.forget(place.job);
      return true;
    }
    let asked = true;
    const job = await jobState(this.client, place.job).catch(() => {
      asked = false;
      return undefined;
    });
    const node = await this.client
      .run('sinfo', ['-h', '-n', place.node, '-o', '%t'])
      .then((r) => r.stdout.trim())
      .catch(() => '');
    const running = job?.state === 'RUNNING' && job.node === place.node;
    const lost =
      job?.state === 'NODE_FAIL' ||
      /\*$|down|fail/m.test(node) ||
      (running && !(await this.health.takesSteps(place)));
    if (lost) this.health.lost(place.node);
    const ended = asked && !running && !['PENDING', 'CONFIGURING'].includes(job?.state ?? '');
    if (lost || ended) {
      this.runJobs.forget(place.job);
    }
    return lost;
  }

  /** Whether `error` (an infrastructure failure of a step in `place`) was its node being lost. */
  private async lostWith(error: unknown, place: { job: string; node: string }): Promise<boolean> {
    return error instanceof HarnessError && error.category === 'infrastructure' && this.nodeLost(place);
  }

  /** sbatch of the keeper script; the job id. */
  private async submit(
    spec: SandboxSpec,
    resources: Required<NonNullable<SandboxSpec['resources']>>,
  ): Promise<string> {
    const minutes = this.options.timeLimitMinutes ?? 120;
    const args = [
      '--parsable',
      // A lost node's job is not run again by Slurm: the harness retries with a new job and
      // knows which copy is which (a requeued job restarts under the same id, empty).
      '--no-requeue',
      EXPORT_NONE,
      `--job-name=${jobName(spec.runId)}`,
      `--comment=sandbox-harness role=${(spec.role ?? 'sandbox').replace(/[^a-zA-Z0-9_.-]/g, '-')}`,
      '--nodes=1',
      '--ntasks=1',
      `--cpus-per-task=${Math.max(1, Math.ceil(resources.cpus))}`,
      `--mem=${Math.ceil(resources.memoryBytes / MIB)}M`,
      `--time=${Math.max(1, Math.ceil(minutes))}`,
      '--output=/dev/null',
      '--error=/dev/null',
      ...this.client.placementArgs(),
      ...this.health.excludeArgs(),
    ];
    const stdout = await this.client.ok('sbatch', args, { input: jobScript(this.client.engineCli) });
    const job = stdout.trim().split(';')[0] ?? '';
    if (!/^\d+$/.test(job)) throw this.client.unavailable(`sbatch answered no job id (${stdout.trim()})`, '');
    return job;
  }

  /**
   * Polls the job until it runs; its node. Throws `SandboxUnavailable` when it ends first. While
   * it waits, `onQueued` hears each new reason Slurm gives, and once more when it leaves the queue.
   */
  private async waitRunning(job: string): Promise<string> {
    const started = Date.now();
    let interval = 100;
    let lastReason: string | undefined;
    const left = (state: string) => {
      if (lastReason !== undefined) this.options.onQueued?.({ job, state, reason: '' });
    };
    for (;;) {
      const state = await jobState(this.client, job).catch((error: unknown) => {
        left('UNKNOWN');
        throw error;
      });
      if (state?.state === 'RUNNING' && state.node) {
        left('RUNNING');
        return state.node;
      }
      if (!state || !['PENDING', 'CONFIGURING'].includes(state.state)) {
        left(state?.state ?? 'GONE');
        throw new SandboxUnavailable(
          `the sandbox's Slurm job ${job} ended before it ran (${state ? `${state.state}, ${state.reason}` : 'gone'})`,
          { hint: 'See `scontrol show job ' + job + '` and the nodes in `sinfo -R`.' },
        );
      }
      // `None`: not looked at by the scheduler yet (every job, for up to a tick): no wait to report.
      if (state.reason !== lastReason && (state.reason !== 'None' || Date.now() - started > 2000)) {
        lastReason = state.reason;
        this.options.onQueued?.({ job, state: state.state, reason: state.reason });
      }
      if (this.options.queueTimeoutMs !== undefined && Date.now() - started > this.options.queueTimeoutMs) {
        left('TIMEOUT');
        throw new SandboxUnavailable(
          `the sandbox's Slurm job ${job} waited in the queue too long (${state.reason})`,
        );
      }
      await sleep(interval);
      interval = Math.min(interval * 2, 1000);
    }
  }

  workspaceTree(
    image: string,
    options: { place?: StepPlace | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<WorkspaceTree> {
    let pending = this.trees.get(image);
    if (!pending) {
      pending = this.readTree(image, options.place ?? {});
      this.trees.set(image, pending);
      pending.catch(() => this.trees.delete(image));
    }
    return pending;
  }

  /**
   * The node engine's own archive of /workspace from a container that is never started. With no
   * sandbox's job named to read it in, it is read in a job this process holds (any run's), else
   * in a job queued for it like a sandbox's (a step asking for its own allocation would give up
   * while a full cluster kept it waiting); the image made sure of on that node first.
   */
  private async readTree(image: string, place: StepPlace): Promise<WorkspaceTree> {
    if (place.node) {
      await this.images.ensure({ ...place, node: place.node }, image);
      return this.readTreeOn(image, place);
    }
    // Shared like the baseline: the runs that wait for this tree may hold every node there is.
    const lease = await this.runJobs.acquire(
      undefined,
      () => this.placeJob({ image, role: 'tree' }, { ...DEFAULT_RESOURCES, cpus: 1 }),
      { shared: true, usable: (placed) => !this.health.isExcluded(placed.node) },
    );
    try {
      await this.images.ensure({ job: lease.job, node: lease.node }, image);
      return await this.readTreeOn(image, { job: lease.job, node: lease.node });
    } catch (error) {
      await this.lostWith(error, lease);
      throw error;
    } finally {
      await lease.release();
    }
  }

  private async readTreeOn(image: string, place: StepPlace): Promise<WorkspaceTree> {
    const read = await this.readTreeOnce(image, place);
    if ('tree' in read) return read.tree;
    throw new ImageError(
      `image ${image} does not exist on node ${read.missingOn ?? place.node ?? '(unknown)'}`,
    );
  }

  private async readTreeOnce(
    image: string,
    place: StepPlace,
  ): Promise<{ tree: WorkspaceTree } | { missingOn: string | undefined }> {
    const idle = hardenedContainer({
      image,
      entrypoint: ['true'],
      cmd: [],
      user: USER,
      workingDir: '/',
      env: [],
      labels: { [SLURM_LABEL.marker]: '1', [SLURM_LABEL.role]: 'tree' },
      ...IDLE_CONTAINER_LIMITS,
    });
    const stream = new PassThrough();
    const tree = readTarTree(stream, 'workspace');
    tree.catch(() => undefined);
    const result = await nodeStep(
      this.client,
      place,
      TREE_SCRIPT,
      [this.client.engineCli, image, ...containerCliArgs(idle)],
      {
        stdout: stream,
        timeoutMs: 600_000,
      },
    );
    stream.end();
    if (result.code === 40) return { missingOn: / is not on node (\S+)/.exec(result.stderr)?.[1] };
    if (result.code !== 0) {
      throw new SandboxUnavailable(
        `reading the pristine tree of ${image} failed (exit ${result.code}): ${result.stderr.trim().slice(-300)}`,
      );
    }
    try {
      return { tree: (await tree) as Map<string, TreeEntry> };
    } catch (error) {
      if (error instanceof HarnessError) throw error;
      throw new SandboxUnavailable(
        `reading the pristine tree of ${image} broke off: ${errorMessage(error)}`,
        { cause: error },
      );
    }
  }

  /** A Slurm sandbox is never kept: its job ends with it. */
  async attach(request: AttachRequest): Promise<Sandbox> {
    throw new SandboxDead(
      `sandbox ${request.id} ran as a Slurm job, which ended with its run; Slurm sandboxes are not kept`,
    );
  }

  async release(_request: AttachRequest): Promise<void> {}

  async state(request: AttachRequest): Promise<SandboxState> {
    const job = /^sandbox-harness-slurm-(\d+)-r\d+(?:-s\d+)?$/.exec(request.id)?.[1];
    const state = job ? await jobState(this.client, job) : undefined;
    if (!state) return { exists: false, running: false, status: 'removed' };
    return {
      exists: true,
      running: state.state === 'RUNNING',
      status: state.state.toLowerCase(),
      name: request.id,
    };
  }

  async interactiveShell(request: AttachRequest): Promise<number> {
    throw new UsageError(
      `sandbox ${request.id} ran as a Slurm job; Slurm sandboxes are not kept for a shell`,
    );
  }
}
