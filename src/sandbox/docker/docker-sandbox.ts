/**
 * The Docker implementation of the sandbox contract: one hardened container per sandbox,
 * the repo baked into its image at /workspace, every command a `docker exec` as the sandbox
 * user. Files, the change scan and the freeze come from the POSIX layer; this file adds the
 * container's lifecycle, the disk budget, kept containers, the pristine tree and, on a local
 * overlay2 engine, the change list read from the container's writable layer.
 */
import { createHash, randomBytes } from 'node:crypto';
import { join, posix } from 'node:path';
import {
  DiskBudgetExceeded,
  errorMessage,
  HarnessError,
  ImageError,
  SandboxDead,
  SandboxUnavailable,
  UsageError,
} from '../../errors.js';
import { runScript } from '../posix/exec.js';
import { workspaceRelative } from '../posix/paths.js';
import { PosixSandbox, type PosixSandboxOptions } from '../posix/posix-sandbox.js';
import { GIT_INIT_SCRIPT, START_MARKER } from '../posix/scripts.js';
import type { ParsedScan } from '../posix/scan.js';
import type { ProcessSpec, StartedProcess, Transport } from '../posix/transport.js';
import { readTarTree } from '../tar.js';
import { fileTreeCache, type TreeCache } from '../tree-cache.js';
import { cacheDir } from '../../image-context/cache-dir.js';
import { injectedFiles } from '../container/injected-files.js';
import {
  DEFAULT_RESOURCES,
  SANDBOX_GID,
  SANDBOX_UID,
  WORKSPACE,
  type AttachRequest,
  type ForkedImage,
  type ExportResult,
  type Sandbox,
  type SandboxBackend,
  type SandboxSpec,
  type SandboxState,
  type TreeEntry,
  type LayeredImage,
  type WorkspaceGit,
  type WorkspaceTree,
} from '../types.js';
import type { ImageLayer } from '../../image-context/image-layer.js';
import { layeredImage } from './images/layered-image.js';
import { hardenedContainer, IDLE_CONTAINER_LIMITS, withoutDiskQuota } from '../container/container-spec.js';
import { dockerEngine, StorageQuotaUnsupported, type DockerEngine, type EngineInfo } from './engine/index.js';
import { isGvisor, processLimits } from './runtimes.js';
import { BUILT_FROM_LABEL, KEPT_NAME_PREFIX, LABEL, containerLabels, containerName } from './labels.js';
import { reapOrphans } from './operator/collect-garbage.js';
import { forkImage, removeForkImage } from './fork-image.js';
import { exportOverlay, layerMarker, scanOverlay, upperDirBytes, type OverlayLayers } from './upper-dir.js';
import { egressProblem, openEgress, type EgressHandle } from './network/egress-network.js';
import type { EgressLogEntry } from '../egress/proxy.js';

const USER = `${SANDBOX_UID}:${SANDBOX_GID}`;
const ROOT = '0:0';
const BASE_ENV = ['HOME=/home/sandbox', 'LANG=C.UTF-8', 'SANDBOX_HARNESS=1'];
/** Workspace-git images: `<repo>:<hash of what made them>`, the hash also in this label. */
const GIT_IMAGE_REPO = 'sandbox-harness/workspace-git';
const GIT_IMAGE_LABEL = 'sandbox-harness.workspace-git';
/** Bumped when what the git step makes changes, so old images are not reused. */
const GIT_IMAGE_VERSION = 1;
/** The git step reads the whole workspace once: more than an idle container, far less than a sandbox. */
const DEFAULT_GIT_STEP_LIMITS = {
  memoryBytes: 1024 * 1024 * 1024,
  nanoCpus: 1e9,
  pids: 64,
  maxFileBytes: 4 * 1024 * 1024 * 1024,
  tmpfsBytes: 64 * 1024 * 1024,
  nofile: 1024,
};
/** How often the writable layer is measured when the engine cannot enforce the disk budget. */
const DISK_WATCH_MS = 1_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function envList(env: Record<string, string> | undefined): string[] {
  return Object.entries(env ?? {}).map(([k, v]) => `${k}=${v}`);
}

/** `docker exec` as a transport: the daemon's exec state, polled gently, says when it ended. */
export class ExecTransport implements Transport {
  constructor(
    private readonly engine: DockerEngine,
    private readonly containerId: string,
  ) {}

  async start(spec: ProcessSpec): Promise<StartedProcess> {
    const running = await this.engine.exec.start(this.containerId, {
      cmd: spec.argv,
      user: spec.user === 'root' ? ROOT : USER,
      workingDir: spec.cwd,
      env: spec.env,
      ...(spec.stdin ? { stdin: spec.stdin } : {}),
      stdout: spec.stdout,
      stderr: spec.stderr,
    });
    let following = true;
    let streamDone = false;
    void running.streamEnded.then(() => {
      streamDone = true;
    });
    // The stream alone cannot tell that the command ended: a background child holding
    // stdout keeps it open. So the daemon's exec state decides.
    const exited = (async () => {
      let interval = 10;
      while (following) {
        const state = await running.inspect();
        // Right after the start, under load, the daemon can report an exec as not running
        // with no exit code: it has not started yet. Only an exit code means it ended.
        if (!state.running && state.exitCode !== null) return state.exitCode;
        await (streamDone ? sleep(interval) : Promise.race([sleep(interval), running.streamEnded]));
        interval = Math.min(interval * 2, 250);
      }
      return new Promise<number>(() => undefined);
    })();
    exited.catch(() => undefined);
    return {
      exited,
      streamEnded: running.streamEnded,
      ...(running.input ? { input: running.input } : {}),
      detach: () => {
        following = false;
        running.detach();
      },
    };
  }
}

export class DockerSandbox extends PosixSandbox {
  private disposed = false;
  private watchdog: NodeJS.Timeout | undefined;
  private diskExceeded: DiskBudgetExceeded | undefined;
  /** What this sandbox's start marker holds: proof that layers found on this host are its own. */
  private readonly marker: string | undefined;

  private layers: Promise<OverlayLayers | undefined> | undefined;
  private readonly egress: EgressHandle | undefined;

  egressLog(): EgressLogEntry[] {
    return this.egress?.log() ?? [];
  }

  constructor(
    private readonly engine: DockerEngine,
    options: PosixSandboxOptions & { diskBudget?: number; marker?: string; egress?: EgressHandle },
  ) {
    super(options);
    this.marker = options.marker;
    this.egress = options.egress;
    if (options.diskBudget !== undefined) this.watchDisk(options.diskBudget);
  }

  /**
   * On an overlay2 engine of this host whose folders this process may read, the change list
   * comes from the container's writable layer (see upper-dir.ts); anywhere else (an engine on
   * another machine, another storage driver, no access) from the scan inside the sandbox.
   */
  protected override async hostScan(maxRecords: number): Promise<ParsedScan | undefined> {
    const layers = await this.ownLayers();
    return layers ? scanOverlay(layers, WORKSPACE.slice(1), maxRecords) : undefined;
  }

  /** The changed files' bytes from the same layers, read on the host; elsewhere from inside. */
  protected override async hostExport(
    paths: readonly string[],
    caps: { maxFileBytes: number; maxTotalBytes: number },
  ): Promise<ExportResult | undefined> {
    const layers = await this.ownLayers();
    return layers ? exportOverlay(layers, WORKSPACE.slice(1), paths, caps) : undefined;
  }

  /** This container's layers on this host, found once; undefined without the marker's proof. */
  private ownLayers(): Promise<OverlayLayers | undefined> {
    if (this.marker === undefined) return Promise.resolve(undefined);
    this.layers ??= this.findLayers();
    return this.layers;
  }

  private async findLayers(): Promise<OverlayLayers | undefined> {
    const driver = (await this.engine.containers.inspect(this.id).catch(() => undefined))?.graphDriver;
    // Docker names it overlay2, Podman overlay: the same upper and merged folders; the marker proves them.
    if ((driver?.name !== 'overlay2' && driver?.name !== 'overlay') || !driver.upperDir || !driver.mergedDir)
      return undefined;
    if (!posix.isAbsolute(driver.upperDir) || !posix.isAbsolute(driver.mergedDir)) return undefined;
    const layers = { upperDir: driver.upperDir, mergedDir: driver.mergedDir };
    return (await layerMarker(layers, START_MARKER)) === this.marker ? layers : undefined;
  }

  /**
   * The engine cannot bound the writable layer here, so it is measured every second; past
   * the budget the sandbox is killed and every later call says why.
   */
  private watchDisk(budget: number): void {
    let busy = false;
    this.watchdog = setInterval(() => {
      if (busy) return;
      busy = true;
      void this.diskUsed()
        .then(async (used) => {
          if (used <= budget || this.diskExceeded) return;
          this.diskExceeded = new DiskBudgetExceeded(used, budget);
          this.stopWatching();
          await this.engine.containers.stop(this.id, 0);
        })
        .catch(() => this.stopWatching())
        .finally(() => {
          busy = false;
        });
    }, DISK_WATCH_MS);
    this.watchdog.unref();
  }

  /** Bytes written: read from this sandbox's own layer when it is on this host, else as the engine counts them. */
  private async diskUsed(): Promise<number> {
    const layers = await this.ownLayers();
    const onHost = layers ? await upperDirBytes(layers.upperDir) : undefined;
    return onHost ?? this.engine.containers.diskUsage(this.id);
  }

  private stopWatching(): void {
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  protected override async checkUsable(): Promise<void> {
    if (this.diskExceeded) throw this.diskExceeded;
  }

  protected override async hardFreeze(reason: string): Promise<void> {
    // A restart kills every process of the container at once; the writable layer stays.
    await this.engine.containers.restart(this.id).catch((error: unknown) => {
      throw new SandboxDead(`${reason}; restarting the sandbox failed too`, { cause: error });
    });
  }

  async isAlive(): Promise<boolean> {
    if (this.diskExceeded) return false;
    const details = await this.engine.containers.inspect(this.id).catch(() => undefined);
    return details?.running ?? false;
  }

  async dispose(options: { keep?: boolean } = {}): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    this.stopWatching();
    await this.closeChannel();
    if (!options.keep) {
      await this.engine.containers.remove(this.id);
      await this.egress?.close();
      return;
    }
    // A kept sandbox keeps its network (it cannot start without it) but never its way out:
    // the proxy stops and the firewall drops everything from that network. gc removes it.
    await this.egress?.close({ keepNetwork: true });
    // Kept for `inspect` and `shell`: stopped to free its memory and pids, renamed so the
    // orphan reaper leaves it alone (labels cannot change after creation).
    await this.engine.containers.stop(this.id);
    const details = await this.engine.containers.inspect(this.id);
    if (details && !details.name.startsWith(KEPT_NAME_PREFIX)) {
      await this.engine.containers.rename(
        this.id,
        `${KEPT_NAME_PREFIX}${details.name.replace(/^sandbox-harness-/, '')}`,
      );
    }
  }
}

export class DockerBackend implements SandboxBackend {
  readonly name = 'docker';
  private reaped = false;
  /** Unknown until the first create that asks the engine for a quota. */
  private quotaSupported: boolean | undefined;
  private readonly trees = new Map<string, Promise<WorkspaceTree>>();

  constructor(
    private readonly dockerEngineRef: DockerEngine = dockerEngine(),
    readonly engine = 'local',
    /**
     * Whether sandboxes may list and read their changes from their layers on this host
     * (when the engine's storage allows it); off, they use the scripts inside the sandbox,
     * as on a remote engine (the conformance suite runs both ways).
     */
    private readonly hostReads = true,
  ) {}

  private info: Promise<EngineInfo> | undefined;

  /** Whether sandboxes of `runtime` run under gVisor here (the engine is asked once). */
  private async underGvisor(runtime: string | undefined): Promise<boolean> {
    this.info ??= this.dockerEngineRef.info();
    this.info.catch(() => (this.info = undefined));
    return isGvisor(await this.info, runtime);
  }

  /** How the disk budget is enforced on this engine: by the engine's quota, or by a watchdog. */
  diskBudgetMode(): 'engine' | 'watchdog' | 'unknown' {
    return this.quotaSupported === undefined ? 'unknown' : this.quotaSupported ? 'engine' : 'watchdog';
  }

  async imageId(image: string): Promise<string | undefined> {
    return (await this.dockerEngineRef.images.inspect(image))?.id;
  }

  egressProblem(): Promise<string | undefined> {
    return egressProblem(this.dockerEngineRef);
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    const engine = this.dockerEngineRef;
    if (!this.reaped) {
      this.reaped = true;
      await reapOrphans(engine);
    }
    const resources = { ...DEFAULT_RESOURCES, ...spec.resources };
    const labels = containerLabels({
      runId: spec.runId,
      role: spec.role,
      keep: spec.keep ?? 'never',
      runtime: spec.runtime ?? 'default',
    });
    const image = await engine.images.inspect(spec.image);
    if (!image) {
      throw new ImageError(`image ${spec.image} does not exist`, {
        hint: "Build it first (`sandbox-harness images ensure node` for the base image) or check the catalog's sandbox.image.",
      });
    }
    if (image.volumes.length > 0) {
      throw new ImageError(
        `image ${spec.image} declares volumes (${image.volumes.join(', ')}); their writes would escape the sandbox's disk budget and change detection`,
        { hint: 'Remove the VOLUME instructions from the sandbox Dockerfile.' },
      );
    }
    // Placed by the engine with the container's hosts file, before it starts.
    const marker = randomBytes(16).toString('hex');
    const files = injectedFiles(spec, marker);
    const processes = processLimits(resources.pids, await this.underGvisor(spec.runtime));
    // Before the container, so the container never exists without its way out closed off.
    const name = containerName(spec.runId, spec.role);
    const egress = spec.egress ? await openEgress(engine, spec.egress, labels, name) : undefined;
    const env = [...BASE_ENV, ...envList(spec.env), ...envList(egress?.env)];
    const container = hardenedContainer({
      files,
      name,
      image: spec.image,
      entrypoint: ['sleep'],
      cmd: ['infinity'],
      // The init and the keep-alive run as root (without capabilities: CapDrop ALL), so no
      // process of the sandbox user can trace, signal or write them and outlive the freeze.
      // Every exec names its user (ExecTransport, the shell): none inherits this one.
      user: ROOT,
      workingDir: WORKSPACE,
      env,
      labels,
      memoryBytes: resources.memoryBytes,
      nanoCpus: Math.round(resources.cpus * 1e9),
      pids: processes.pids,
      nproc: processes.nproc,
      maxFileBytes: resources.maxFileBytes,
      tmpfsBytes: resources.tmpfsBytes,
      nofile: 4096,
      runtime: spec.runtime,
      network: egress ? { name: egress.networkName, dns: egress.dns } : undefined,
      diskBytes: resources.diskBytes,
    });
    let id: string;
    try {
      if (this.quotaSupported !== false) {
        try {
          id = await engine.containers.create(container);
          this.quotaSupported = true;
        } catch (error) {
          if (!(error instanceof StorageQuotaUnsupported)) throw error;
          this.quotaSupported = false;
          id = await engine.containers.create(withoutDiskQuota(container));
        }
      } else {
        id = await engine.containers.create(withoutDiskQuota(container));
      }
    } catch (error) {
      await egress?.close().catch(() => undefined);
      throw error;
    }
    const sandbox = new DockerSandbox(engine, {
      id,
      image: spec.image,
      labels,
      env: [],
      ...(this.hostReads ? { marker } : {}),
      transport: new ExecTransport(engine, id),
      tree: () => this.workspaceTree(spec.scanAgainst ?? spec.image),
      ...(spec.hidden ? { hidden: spec.hidden.map((p) => workspaceRelative(p)) } : {}),
      ...(this.quotaSupported ? {} : { diskBudget: resources.diskBytes }),
      ...(egress ? { egress } : {}),
    });
    try {
      await engine.containers.start(id);
      // An agent's sandbox starts its channel now: the held-out files go over it, as its
      // first command, else its start-up would come on the agent's first call.
      if (spec.channel) sandbox.startChannel();
      await sandbox.removeHidden(spec.channel === true);
    } catch (error) {
      // Never leave a half-made container behind.
      await sandbox.dispose().catch(() => undefined);
      throw error;
    }
    return sandbox;
  }

  private readonly gitImages = new Map<string, Promise<WorkspaceGit>>();

  /**
   * `image` plus a git repository of its workspace without `hidden` (see `GIT_INIT_SCRIPT`),
   * made once per (image, hidden, exclude) and tagged by their hash, so a later run reuses it.
   * The repository is made by the image's own git, as the sandbox user, with no network, in
   * a container that nothing else runs in; only its writable layer (`.git`) is committed.
   */
  workspaceGitImage(
    image: string,
    options: { hidden: readonly string[]; exclude: readonly string[]; signal?: AbortSignal },
  ): Promise<WorkspaceGit> {
    const key = JSON.stringify([image, [...options.hidden].sort(), options.exclude]);
    let pending = this.gitImages.get(key);
    if (!pending) {
      pending = this.makeGitImage(image, options);
      this.gitImages.set(key, pending);
      pending.catch(() => this.gitImages.delete(key));
    }
    return pending;
  }

  private async makeGitImage(
    image: string,
    options: { hidden: readonly string[]; exclude: readonly string[]; signal?: AbortSignal },
  ): Promise<WorkspaceGit> {
    const engine = this.dockerEngineRef;
    const started = Date.now();
    const source = await engine.images.inspect(image);
    if (!source) throw new ImageError(`image ${image} does not exist`);
    const hidden = [...options.hidden].map((p) => workspaceRelative(p)).sort();
    const hash = createHash('sha256')
      .update(JSON.stringify([GIT_IMAGE_VERSION, GIT_INIT_SCRIPT, source.id, hidden, options.exclude]))
      .digest('hex')
      .slice(0, 16);
    const tag = `${GIT_IMAGE_REPO}:${hash}`;
    const existing = await engine.images.inspect(tag);
    if (existing && existing.labels[GIT_IMAGE_LABEL] === hash) {
      return { state: 'created', image: tag, reused: true, durationMs: Date.now() - started };
    }
    const id = await engine.containers.create(
      hardenedContainer({
        name: containerName(undefined, 'workspace-git'),
        image,
        entrypoint: ['sleep'],
        cmd: ['infinity'],
        user: USER,
        workingDir: WORKSPACE,
        env: [...BASE_ENV],
        labels: containerLabels({ role: 'workspace-git' }),
        ...DEFAULT_GIT_STEP_LIMITS,
      }),
    );
    try {
      await engine.containers.start(id);
      // Pathspecs on stdin: the workspace, minus each held-out path taken literally.
      const pathspecs = ['.', ...hidden.map((p) => `:(exclude,literal)${p}`)].join('\0') + '\0';
      const made = await runScript(new ExecTransport(engine, id), GIT_INIT_SCRIPT, options.exclude, {
        maxStdoutBytes: 4096,
        timeoutMs: 600_000,
        stdin: Buffer.from(pathspecs),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      if (made.exitCode === 3)
        return {
          state: 'no-git',
          note: 'the sandbox image has no git, so the workspace is not a git repository',
        };
      if (made.exitCode === 4)
        return {
          state: 'exists',
          note: 'the image already has a /workspace/.git of its own, so the harness made none',
        };
      if (made.exitCode !== 0) {
        return {
          state: 'failed',
          note: `making the workspace a git repository failed (exit ${made.exitCode}): ${made.stderr.toString().trim().slice(0, 300)}`,
        };
      }
      await engine.containers.stop(id);
      await engine.containers.commit(id, {
        repo: GIT_IMAGE_REPO,
        tag: hash,
        labels: {
          [LABEL.marker]: '1',
          [LABEL.kind]: 'repo',
          [GIT_IMAGE_LABEL]: hash,
          [BUILT_FROM_LABEL]: source.id,
        },
      });
      return { state: 'created', image: tag, reused: false, durationMs: Date.now() - started };
    } finally {
      await engine.containers.remove(id).catch(() => undefined);
    }
  }

  private readonly layers = new Map<string, Promise<LayeredImage>>();

  /** See `layered-image.ts`; trials of one process asking for the same layer share one making of it. */
  layerImage(
    image: string,
    layer: ImageLayer,
    options: { signal?: AbortSignal } = {},
  ): Promise<LayeredImage> {
    const key = JSON.stringify([image, layer.key]);
    let pending = this.layers.get(key);
    if (!pending) {
      pending = layeredImage(this.dockerEngineRef, image, layer, options);
      this.layers.set(key, pending);
      pending.catch(() => this.layers.delete(key));
    }
    return pending;
  }

  workspaceTree(image: string): Promise<WorkspaceTree> {
    let pending = this.trees.get(image);
    if (!pending) {
      pending = this.readTree(image);
      this.trees.set(image, pending);
      pending.catch(() => this.trees.delete(image));
    }
    return pending;
  }

  /**
   * Where trees read before are remembered, by engine and image id (`sandbox/tree-cache.ts`);
   * the user's cache folder unless set.
   */
  treeCache: TreeCache | undefined;

  /**
   * The tree of the image `image` names now: remembered by its id, else read from a container
   * made from that very id (a tag moved meanwhile cannot mix two images' trees).
   */
  private async readTree(image: string): Promise<WorkspaceTree> {
    const imageId = await this.imageId(image).catch(() => undefined);
    if (!imageId) return this.readTreeOf(image);
    this.treeCache ??= fileTreeCache(join(cacheDir(), 'trees'));
    const known = await this.treeCache.get(this.engine, imageId).catch(() => undefined);
    if (known) return known;
    const tree = await this.readTreeOf(imageId);
    await this.treeCache.put(this.engine, imageId, tree).catch(() => undefined);
    return tree;
  }

  /** The engine's own archive of /workspace from a container that is never started. */
  private async readTreeOf(image: string): Promise<WorkspaceTree> {
    const engine = this.dockerEngineRef;
    const id = await engine.containers.create(
      hardenedContainer({
        name: containerName(undefined, 'tree'),
        image,
        entrypoint: ['true'],
        cmd: [],
        user: USER,
        workingDir: '/',
        env: [],
        labels: containerLabels({ role: 'tree' }),
        ...IDLE_CONTAINER_LIMITS,
      }),
    );
    try {
      const stream = await engine.containers.getArchive(id, WORKSPACE);
      if (!stream) throw new ImageError(`image ${image} has no ${WORKSPACE} folder`);
      try {
        return (await readTarTree(stream, posix.basename(WORKSPACE))) as Map<string, TreeEntry>;
      } catch (error) {
        if (error instanceof HarnessError) throw error;
        // The engine's stream broke off (an engine that went away mid-read, a cut
        // connection): the engine failed, like any call to it, not the run.
        throw new SandboxUnavailable(
          `reading the pristine tree of ${image} from ${engine.where ?? 'the local engine'} broke off: ${errorMessage(error)}`,
          { cause: error },
        );
      }
    } finally {
      await engine.containers.remove(id).catch(() => undefined);
    }
  }

  /** The container, if it carries this tool's marks and the run id asked about. */
  private async owned(request: AttachRequest) {
    const details = await this.dockerEngineRef.containers.inspect(request.id);
    if (!details) return undefined;
    if (details.labels[LABEL.marker] !== '1' || details.labels[LABEL.run] !== request.runId) {
      throw new UsageError(
        `container ${request.id.slice(0, 12)} is not a sandbox of run ${request.runId}; refusing to use it`,
        {
          hint: 'The run record names a container that this tool did not create for that run. Do not trust that record.',
        },
      );
    }
    return details;
  }

  async attach(request: AttachRequest): Promise<Sandbox> {
    const details = await this.owned(request);
    if (!details) throw new SandboxDead(`container ${request.id.slice(0, 12)} no longer exists`);
    if (!details.running) await this.dockerEngineRef.containers.start(details.id);
    return new DockerSandbox(this.dockerEngineRef, {
      id: details.id,
      image: details.image,
      labels: details.labels,
      env: [],
      transport: new ExecTransport(this.dockerEngineRef, details.id),
      tree: () => this.workspaceTree(details.imageId),
    });
  }

  forkImage(request: AttachRequest, options: { owner: string; signal?: AbortSignal }): Promise<ForkedImage> {
    return forkImage(this.dockerEngineRef, (r) => this.owned(r), request, options);
  }

  removeForkImage(image: string): Promise<boolean> {
    return removeForkImage(this.dockerEngineRef, image);
  }

  async release(request: AttachRequest): Promise<void> {
    if (await this.owned(request)) await this.dockerEngineRef.containers.stop(request.id);
  }

  async state(request: AttachRequest): Promise<SandboxState> {
    const details = await this.owned(request);
    if (!details) return { exists: false, running: false, status: 'removed' };
    return { exists: true, running: details.running, status: details.status, name: details.name };
  }

  async interactiveShell(
    request: AttachRequest,
    io: { stdin: NodeJS.ReadStream; stdout: NodeJS.WriteStream },
  ): Promise<number> {
    const sandbox = await this.attach(request);
    const bash = (await sandbox.exec('command -v bash', { timeoutMs: 10_000 })).exitCode === 0;
    return this.dockerEngineRef.exec.attachInteractive(
      sandbox.id,
      {
        cmd: bash ? ['/bin/bash', '-l'] : ['/bin/sh'],
        user: USER,
        workingDir: WORKSPACE,
        env: ['TERM=xterm-256color'],
      },
      io,
    );
  }
}

let backend: DockerBackend | undefined;

export function dockerBackend(): DockerBackend {
  backend ??= new DockerBackend();
  return backend;
}
