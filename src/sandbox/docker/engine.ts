/**
 * The only file that imports dockerode. Everything else in the harness talks to the Docker
 * daemon through `DockerEngine`, whose methods use our own small types, translate daemon
 * failures into the harness's error family, and never leak dockerode objects.
 */
import Docker from 'dockerode';
import type { Readable, Writable } from 'node:stream';
import {
  ConfigError,
  ImageError,
  Interrupted,
  SandboxDead,
  SandboxUnavailable,
  HarnessError,
} from '../../errors.js';
import { describeEndpoint, type EngineEndpoint } from './endpoint.js';
import { hostKeyAccepted } from './known-hosts.js';
import { loopbackExtraHosts, loopbackNameEntries, SANDBOX_HOSTNAME } from './loopback-names.js';
import { packTar, type TarInput } from '../tar.js';
import { formatDuration } from '../../format.js';

export interface EngineInfo {
  serverVersion: string;
  apiVersion: string;
  storageDriver: string;
  cgroupVersion: string;
  operatingSystem: string;
  initBinary: string;
  /** Kernel support the hardening relies on (false: the daemon silently ignores that limit). */
  memoryLimit: boolean;
  swapLimit: boolean;
  pidsLimit: boolean;
  /** CPUs and memory the engine's machine has (default trial capacity is derived from them). */
  cpus: number;
  memoryBytes: number;
  /** The engine's data root, where images and writable layers live. */
  dockerRootDir: string;
  /** The engine's host name and its unique id. */
  name: string;
  id: string;
  /** The OCI runtimes the engine lists by name (`runc`, `runsc`, `crun`, ...), and its default. */
  runtimes: string[];
  defaultRuntime: string;
  /** The program of each runtime, where the engine says (`runsc` -> `/usr/bin/runsc`). */
  runtimePaths: Record<string, string>;
  /** `name=...` entries of the engine's security options: `userns` (remapped), `rootless`, `seccomp`. */
  securityOptions: string[];
  /** Which engine answers the Docker API: Docker's dockerd, or Podman's API service. */
  product: 'docker' | 'podman';
  /** Podman's own version (its API version is the Docker API it emulates). */
  podmanVersion?: string;
}

/** What the engine stores (`GET /system/df`); sizes in bytes. It does not say how much disk is free. */
export interface EngineDiskUsage {
  layersBytes: number;
  images: number;
  containers: number;
  /** Writable layers of all containers. */
  containersBytes: number;
  volumes: number;
  buildCacheBytes: number;
}

/**
 * Limits for a container that runs nothing of a repo (a tree read, a probe): small enough
 * that it costs nothing, and still every limit set, as on every container this code makes.
 */
export const IDLE_CONTAINER_LIMITS = {
  memoryBytes: 64 * 1024 * 1024,
  nanoCpus: 1e8,
  pids: 16,
  maxFileBytes: 1024,
  tmpfsBytes: 1024 * 1024,
  nofile: 64,
} as const;

export interface ContainerCreateOptions {
  name?: string;
  image: string;
  /** Replaces the image's entrypoint: nothing of the image runs before the harness says so. */
  entrypoint: string[];
  cmd: string[];
  user: string;
  workingDir: string;
  env: string[];
  labels: Record<string, string>;
  memoryBytes: number;
  nanoCpus: number;
  pids: number;
  maxFileBytes: number;
  tmpfsBytes: number;
  nofile: number;
  /** Writable-layer quota; only where the storage driver supports it (see `storageQuota`). */
  diskBytes?: number;
  /**
   * Files placed before the container starts (ownership and modes as given), in the same
   * archive as its hosts file: one write into the container's filesystem, not two.
   */
  files?: TarInput[];
  /** The OCI runtime by the engine's name for it (`runsc`); absent: the engine's default. */
  runtime?: string;
  /** RLIMIT_NPROC; default `DEFAULT_NPROC`. */
  nproc?: number;
  /**
   * An egress sandbox: joins this (internal) network instead of network none, with this
   * name server (the proxy's logging one), never the engine's default.
   */
  network?: { name: string; dns: string[] };
}

export interface NetworkCreateOptions {
  name: string;
  labels: Record<string, string>;
  subnet: string;
  gateway: string;
  /** The host-side bridge interface's name (the firewall matches it). */
  bridgeName: string;
}

export interface NetworkSummary {
  id: string;
  name: string;
  labels: Record<string, string>;
  createdAt: Date;
  /** Containers attached now. */
  containers: number;
  bridgeName: string;
}

/**
 * RLIMIT_NPROC for every container. The pids cgroup (`PidsLimit`) is the sandbox's real bound
 * on processes: the kernel counts NPROC per uid across every container of the host that runs
 * as that uid, so a tight value here would let one sandbox's fork bomb starve the others. It
 * is set at all because an engine that sets none passes on its own default, and Podman's
 * exceeds this kind of machine's hard limit, so its containers fail to start ("error setting
 * rlimit"), like a missing nofile.
 */
export const DEFAULT_NPROC = 16_384;

export interface ContainerSummary {
  id: string;
  name: string;
  image: string;
  state: string;
  labels: Record<string, string>;
  createdAt: Date;
}

export interface ContainerDetails {
  id: string;
  name: string;
  image: string;
  imageId: string;
  running: boolean;
  status: string;
  exitCode: number;
  oomKilled: boolean;
  startedAt: string;
  finishedAt: string;
  env: string[];
  labels: Record<string, string>;
  hostConfig: Record<string, unknown>;
  /** The storage driver and, for overlay2, where the container's layers are on the engine's host. */
  graphDriver: { name: string; upperDir?: string; mergedDir?: string };
}

export interface ImageSummary {
  id: string;
  tags: string[];
  labels: Record<string, string>;
  createdAt: Date;
  sizeBytes: number;
}

export interface ImageDetails {
  id: string;
  tags: string[];
  labels: Record<string, string>;
  user: string;
  env: string[];
  /** Folders the image declares as volumes (they would escape the writable layer and its budget). */
  volumes: string[];
  /** Bytes, as the engine reports the image's size. */
  sizeBytes?: number;
}

export interface RawChange {
  path: string;
  kind: 'modified' | 'added' | 'deleted';
}

export interface ExecStartOptions {
  cmd: string[];
  user: string;
  workingDir: string;
  env: string[];
  /**
   * Written to the process's stdin, then end of file; or `stream` to keep stdin open and
   * write to it through `RunningExec.input` (a long-lived process serving requests).
   */
  stdin?: Buffer | 'stream';
  stdout: Writable;
  stderr: Writable;
}

export interface RunningExec {
  /** Resolves when the daemon closes the output stream. */
  streamEnded: Promise<void>;
  /** The process's stdin, when it was started with `stdin: 'stream'`. */
  input?: NodeJS.WritableStream;
  inspect(): Promise<{ running: boolean; exitCode: number | null }>;
  /** Stops reading output (the process keeps running unless killed separately). */
  detach(): void;
}

export interface BuildOptions {
  tag: string;
  dockerfile: string;
  buildArgs: Record<string, string>;
  labels: Record<string, string>;
  onLine?: (line: string) => void;
  /** Build-time network: allowed (unlike the sandboxes), so dependencies can be installed. */
  networkMode?: string;
  /** Ignore the layer cache (a forced rebuild must not just replay cached layers). */
  noCache?: boolean;
  /** Ctrl-C: the request to the daemon is cancelled, which stops the build. */
  signal?: AbortSignal;
}

type DaemonError = Error & {
  statusCode?: number;
  json?: { message?: string };
  reason?: string;
  code?: string;
};

function daemonMessage(error: unknown): string {
  const e = error as DaemonError;
  const fromJson = e.json && typeof e.json === 'object' ? e.json.message : undefined;
  return (fromJson ?? e.message ?? String(error)).toString().trim();
}

export function statusOf(error: unknown): number | undefined {
  return (error as DaemonError | undefined)?.statusCode;
}

function isConnectionError(error: unknown): boolean {
  const code = (error as DaemonError | undefined)?.code;
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOENT' ||
    code === 'EACCES' ||
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === 'ETIMEDOUT' ||
    code === 'EHOSTUNREACH'
  );
}

/**
 * What to do when DOCKER_HOST names an engine that does not answer: start that one, or drop
 * the variable. Never `setup`, which starts a local engine the variable would still hide.
 */
export function dockerHostHint(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!env.DOCKER_HOST) return undefined;
  return `Nothing answers at DOCKER_HOST=${env.DOCKER_HOST}: start that engine, or \`unset DOCKER_HOST\` to use the local socket.`;
}

function describeDaemon(where?: string): string {
  if (where) return `the Docker engine at ${where}`;
  return process.env.DOCKER_HOST
    ? `the Docker daemon at DOCKER_HOST=${process.env.DOCKER_HOST}`
    : 'the Docker daemon at /var/run/docker.sock';
}

/**
 * Translates a daemon failure into our error family; `context` says what we were doing,
 * `where` names an engine given by endpoint (default: the local one from the environment).
 */
export function translateDaemonError(error: unknown, context: string, where?: string): HarnessError {
  if (error instanceof HarnessError) return error;
  if (isConnectionError(error)) {
    return new SandboxUnavailable(
      `${context}: cannot reach ${describeDaemon(where)} (${(error as DaemonError).code})`,
      {
        hint: where
          ? `Check that the engine at ${where} runs and that this machine reaches it; \`sandbox-harness doctor --engine ...\` shows what is wrong.`
          : `${dockerHostHint() ?? 'Start the engine with `sandbox-harness setup` (Debian, root).'} \`sandbox-harness doctor\` shows what is wrong.`,
        cause: error,
      },
    );
  }
  return new SandboxUnavailable(`${context}: ${daemonMessage(error)}`, { cause: error });
}

function labelFilter(labels: Record<string, string | true>): string[] {
  return Object.entries(labels).map(([k, v]) => (v === true ? k : `${k}=${v}`));
}

export class DockerEngine {
  private readonly docker: Docker;
  /** Names the engine in messages; undefined for the local default (the environment decides). */
  readonly where: string | undefined;

  /**
   * Without an endpoint: the local engine, as DOCKER_HOST / DOCKER_TLS_VERIFY /
   * DOCKER_CERT_PATH say (docker-modem reads them). With one: exactly that engine, whatever
   * the environment says.
   */
  private readonly local: boolean;

  constructor(endpoint?: EngineEndpoint) {
    this.docker = endpoint
      ? withoutDockerEnvironment(() => new Docker(modemOptions(endpoint)))
      : new Docker();
    this.where = endpoint ? describeEndpoint(endpoint) : undefined;
    if (process.env.SANDBOX_HARNESS_DEBUG) logEveryCall(this.docker, this.where ?? 'local');
    const host = process.env.DOCKER_HOST;
    this.local = endpoint
      ? endpoint.transport === 'unix'
      : host === undefined || host.trim() === '' || host.startsWith('unix://');
  }

  /** Whether the engine runs on this machine (its data root can be measured from here). */
  isLocal(): boolean {
    return this.local;
  }

  async ping(timeoutMs = 3000): Promise<void> {
    try {
      await Promise.race([
        this.docker.ping(),
        new Promise((_, reject) =>
          setTimeout(
            () => reject(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })),
            timeoutMs,
          ).unref(),
        ),
      ]);
    } catch (error) {
      throw translateDaemonError(error, 'Docker engine check', this.where);
    }
  }

  async info(): Promise<EngineInfo> {
    try {
      const [info, version] = await Promise.all([this.docker.info(), this.docker.version()]);
      const i = info as Record<string, unknown>;
      return {
        serverVersion: String(version.Version ?? ''),
        apiVersion: String(version.ApiVersion ?? ''),
        storageDriver: String(i.Driver ?? ''),
        cgroupVersion: String(i.CgroupVersion ?? ''),
        operatingSystem: String(i.OperatingSystem ?? ''),
        initBinary: String(i.InitBinary ?? ''),
        memoryLimit: i.MemoryLimit === true,
        swapLimit: i.SwapLimit === true,
        pidsLimit: i.PidsLimit === true,
        cpus: Number(i.NCPU ?? 0),
        memoryBytes: Number(i.MemTotal ?? 0),
        dockerRootDir: String(i.DockerRootDir ?? ''),
        name: String(i.Name ?? ''),
        id: String(i.ID ?? ''),
        ...runtimeFacts(i, version as unknown as Record<string, unknown>),
      };
    } catch (error) {
      throw translateDaemonError(error, 'reading Docker engine info', this.where);
    }
  }

  // ---- containers -------------------------------------------------------------------

  async createContainer(options: ContainerCreateOptions): Promise<string> {
    const id = await this.createBareContainer(options);
    await this.placeFiles(id, options);
    return id;
  }

  /**
   * `localhost` and the sandbox's own name for every container this code makes, and the
   * caller's files, before it starts (see loopback-names.ts for why the engine's own hosts
   * file is not used). A container that cannot get them is removed: none runs without them.
   */
  private async placeFiles(id: string, options: ContainerCreateOptions): Promise<void> {
    try {
      loopbackTar ??= packTar(loopbackNameEntries());
      const tar = options.files?.length
        ? await packTar([...loopbackNameEntries(), ...options.files])
        : await loopbackTar;
      await this.putArchive(id, '/', tar);
    } catch (error) {
      await this.removeContainer(id).catch(() => undefined);
      if (error instanceof HarnessError && error.code === 'SANDBOX_FILE') {
        const names = ['/etc/hosts', '/etc/resolv.conf', ...(options.files ?? []).map((f) => `/${f.name}`)];
        throw new ImageError(
          `image ${options.image}: cannot place ${names.join(', ')} (${error.message}); does the image have a folder or a file where one of them goes?`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  private async createBareContainer(options: ContainerCreateOptions): Promise<string> {
    try {
      const container = await this.docker.createContainer({
        name: options.name,
        Hostname: SANDBOX_HOSTNAME,
        Image: options.image,
        Entrypoint: options.entrypoint,
        Cmd: options.cmd,
        User: options.user,
        WorkingDir: options.workingDir,
        Env: options.env,
        Labels: options.labels,
        // No network stack at all (a fresh namespace with lo only) unless the sandbox has
        // egress; the engine then writes no hosts file, so giveLoopbackNames does.
        NetworkDisabled: options.network === undefined,
        AttachStdin: false,
        AttachStdout: false,
        AttachStderr: false,
        Tty: false,
        // An image's HEALTHCHECK would run its own commands inside the sandbox.
        Healthcheck: { Test: ['NONE'] },
        HostConfig: {
          NetworkMode: options.network?.name ?? 'none',
          ...(options.network ? { Dns: options.network.dns, DnsSearch: [], DnsOptions: [] } : {}),
          ExtraHosts: loopbackExtraHosts(),
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          Privileged: false,
          Init: true,
          IpcMode: 'private',
          PidsLimit: options.pids,
          Memory: options.memoryBytes,
          MemorySwap: options.memoryBytes,
          NanoCpus: options.nanoCpus,
          Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${options.tmpfsBytes},mode=1777` },
          Ulimits: [
            { Name: 'nofile', Soft: options.nofile, Hard: options.nofile },
            { Name: 'fsize', Soft: options.maxFileBytes, Hard: options.maxFileBytes },
            { Name: 'nproc', Soft: options.nproc ?? DEFAULT_NPROC, Hard: options.nproc ?? DEFAULT_NPROC },
          ],
          Binds: [],
          Mounts: [],
          PublishAllPorts: false,
          AutoRemove: false,
          RestartPolicy: { Name: 'no' },
          // Nothing reads container logs, and pid 1's stdout is reachable from inside.
          LogConfig: { Type: 'none', Config: {} },
          ...(options.diskBytes ? { StorageOpt: { size: String(options.diskBytes) } } : {}),
          ...(options.runtime ? { Runtime: options.runtime } : {}),
        },
      });
      return container.id;
    } catch (error) {
      if (options.diskBytes && /storage-?opt|quota|xfs/i.test(daemonMessage(error))) {
        throw new StorageQuotaUnsupported(daemonMessage(error));
      }
      if (
        options.runtime &&
        /unknown or invalid runtime|runtime .*not (found|available)/i.test(daemonMessage(error))
      ) {
        throw new ConfigError(
          `runtime "${options.runtime}" is not available on ${this.where ?? 'the local engine'}: ${daemonMessage(error)}`,
          [],
          {
            hint: 'sandbox-harness doctor lists the runtimes the engine has (and how to add gVisor).',
            cause: error,
          },
        );
      }
      if (statusOf(error) === 404) {
        throw new ImageError(`image ${options.image} does not exist`, {
          hint: "Build it first (`sandbox-harness images bootstrap` for the base image) or check the catalog's sandbox.image.",
          cause: error,
        });
      }
      throw translateDaemonError(error, `creating a container from ${options.image}`, this.where);
    }
  }

  async startContainer(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).start();
    } catch (error) {
      if (statusOf(error) === 304) return;
      throw this.containerError(error, id, 'starting');
    }
  }

  async stopContainer(id: string, timeoutSec = 2): Promise<void> {
    try {
      await this.docker.getContainer(id).stop({ t: timeoutSec });
    } catch (error) {
      const status = statusOf(error);
      if (status === 304 || status === 404) return;
      throw translateDaemonError(error, `stopping container ${id.slice(0, 12)}`, this.where);
    }
  }

  async removeContainer(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).remove({ force: true, v: true });
    } catch (error) {
      const status = statusOf(error);
      if (status === 404) return;
      // 409: removal already in progress.
      if (status === 409 && /already in progress/i.test(daemonMessage(error))) return;
      throw translateDaemonError(error, `removing container ${id.slice(0, 12)}`, this.where);
    }
  }

  /** Stops a container at once (SIGKILL to everything in it) and starts it again. */
  async restartContainer(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).restart({ t: 0 });
    } catch (error) {
      throw this.containerError(error, id, 'restarting');
    }
  }

  /** Bytes in the container's writable layer, as the engine counts them. */
  async containerDiskUsage(id: string): Promise<number> {
    try {
      // The typings omit `size`; the Engine API takes it and then reports SizeRw.
      const options = { size: true } as Docker.ContainerInspectOptions;
      const c = (await this.docker.getContainer(id).inspect(options)) as { SizeRw?: number };
      return c.SizeRw ?? 0;
    } catch (error) {
      throw this.containerError(error, id, 'measuring the disk use of');
    }
  }

  async renameContainer(id: string, name: string): Promise<void> {
    try {
      await this.docker.getContainer(id).rename({ name });
    } catch (error) {
      throw this.containerError(error, id, 'renaming');
    }
  }

  async inspectContainer(id: string): Promise<ContainerDetails | undefined> {
    try {
      const c = await this.docker.getContainer(id).inspect();
      return {
        id: c.Id,
        name: c.Name.replace(/^\//, ''),
        image: c.Config.Image,
        imageId: c.Image,
        running: c.State.Running,
        status: c.State.Status,
        exitCode: c.State.ExitCode,
        oomKilled: c.State.OOMKilled,
        startedAt: c.State.StartedAt,
        finishedAt: c.State.FinishedAt,
        env: c.Config.Env ?? [],
        labels: c.Config.Labels ?? {},
        hostConfig: c.HostConfig as unknown as Record<string, unknown>,
        graphDriver: graphDriverOf(c.GraphDriver),
      };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw translateDaemonError(error, `inspecting container ${id.slice(0, 12)}`, this.where);
    }
  }

  async listContainers(labels: Record<string, string | true>): Promise<ContainerSummary[]> {
    try {
      const list = await this.docker.listContainers({ all: true, filters: { label: labelFilter(labels) } });
      return list.map((c) => ({
        id: c.Id,
        name: (c.Names[0] ?? '').replace(/^\//, ''),
        image: c.Image,
        state: c.State,
        labels: c.Labels ?? {},
        createdAt: new Date(c.Created * 1000),
      }));
    } catch (error) {
      throw translateDaemonError(error, 'listing containers', this.where);
    }
  }

  async containerChanges(id: string): Promise<RawChange[]> {
    try {
      const changes = (await this.docker.getContainer(id).changes()) as
        Array<{ Path: string; Kind: number }> | null | undefined;
      return (changes ?? []).map((c) => ({
        path: c.Path,
        kind: c.Kind === 1 ? 'added' : c.Kind === 2 ? 'deleted' : 'modified',
      }));
    } catch (error) {
      throw this.containerError(error, id, 'reading the changes of');
    }
  }

  /** Returns the tar stream of `path`, or undefined when it does not exist. */
  async getArchive(id: string, path: string): Promise<Readable | undefined> {
    try {
      return (await this.docker.getContainer(id).getArchive({ path })) as unknown as Readable;
    } catch (error) {
      if (statusOf(error) === 404) {
        const details = await this.inspectContainer(id);
        if (!details) throw new SandboxDead(`sandbox ${id.slice(0, 12)} no longer exists`, { cause: error });
        return undefined;
      }
      throw this.containerError(error, id, 'reading files from');
    }
  }

  /** Extracts a tar archive into `path`; returns false when `path` does not exist in the container. */
  async putArchive(id: string, path: string, tar: Buffer): Promise<boolean> {
    try {
      await this.docker.getContainer(id).putArchive(tar, { path, noOverwriteDirNonDir: '1' });
      return true;
    } catch (error) {
      if (statusOf(error) === 404) {
        const details = await this.inspectContainer(id);
        if (!details) throw new SandboxDead(`sandbox ${id.slice(0, 12)} no longer exists`, { cause: error });
        return false;
      }
      if (statusOf(error) === 403 || statusOf(error) === 400) {
        throw new HarnessError(
          'SANDBOX_FILE',
          'usage',
          `cannot write into ${path}: ${daemonMessage(error)}`,
          {
            cause: error,
          },
        );
      }
      throw this.containerError(error, id, 'writing files into');
    }
  }

  async startExec(id: string, options: ExecStartOptions): Promise<RunningExec> {
    const container = this.docker.getContainer(id);
    let exec: Docker.Exec;
    let stream: NodeJS.ReadWriteStream;
    try {
      exec = await container.exec({
        Cmd: options.cmd,
        User: options.user,
        WorkingDir: options.workingDir,
        Env: options.env,
        AttachStdin: options.stdin !== undefined,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
      });
      stream = (await exec.start({
        hijack: true,
        stdin: options.stdin !== undefined,
      })) as NodeJS.ReadWriteStream;
    } catch (error) {
      throw this.containerError(error, id, 'running a command in');
    }
    // Half-closes the connection after the bytes: the process reads them, then end of file.
    if (Buffer.isBuffer(options.stdin)) stream.end(options.stdin);
    this.docker.modem.demuxStream(stream, options.stdout, options.stderr);
    const readable = stream as unknown as Readable;
    const streamEnded = new Promise<void>((resolve) => {
      readable.once('end', () => resolve());
      readable.once('close', () => resolve());
      readable.once('error', () => resolve());
    });
    return {
      streamEnded,
      ...(options.stdin === 'stream' ? { input: stream } : {}),
      inspect: async () => {
        try {
          const data = await exec.inspect();
          return { running: data.Running, exitCode: data.ExitCode };
        } catch (error) {
          throw this.containerError(error, id, 'inspecting a command in');
        }
      },
      detach: () => {
        readable.destroy();
      },
    };
  }

  /** Interactive exec with a TTY bound to the caller's terminal (for `shell`). */
  async attachInteractive(
    id: string,
    options: { cmd: string[]; user: string; workingDir: string; env: string[] },
    io: { stdin: NodeJS.ReadStream; stdout: NodeJS.WriteStream },
  ): Promise<number> {
    const container = this.docker.getContainer(id);
    try {
      const exec = await container.exec({
        Cmd: options.cmd,
        User: options.user,
        WorkingDir: options.workingDir,
        Env: options.env,
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: true,
      });
      const stream = (await exec.start({ hijack: true, stdin: true, Tty: true })) as NodeJS.ReadWriteStream;
      const resize = async () => {
        if (io.stdout.columns && io.stdout.rows) {
          await exec.resize({ h: io.stdout.rows, w: io.stdout.columns }).catch(() => undefined);
        }
      };
      const wasRaw = io.stdin.isTTY ? io.stdin.isRaw : false;
      if (io.stdin.isTTY) io.stdin.setRawMode(true);
      io.stdin.resume();
      io.stdin.pipe(stream);
      stream.pipe(io.stdout);
      await resize();
      io.stdout.on('resize', resize);
      await new Promise<void>((resolve) => {
        stream.once('end', () => resolve());
        stream.once('close', () => resolve());
      });
      io.stdout.off('resize', resize);
      io.stdin.unpipe(stream);
      if (io.stdin.isTTY) io.stdin.setRawMode(wasRaw);
      io.stdin.pause();
      const result = await exec.inspect();
      return result.ExitCode ?? 0;
    } catch (error) {
      throw this.containerError(error, id, 'opening a shell in');
    }
  }

  private containerError(error: unknown, id: string, doing: string): HarnessError {
    if (error instanceof HarnessError) return error;
    const status = statusOf(error);
    const message = daemonMessage(error);
    // 409 when the exec is made on a stopped sandbox; 500 "container not running" when it
    // stopped between the exec's creation and its start (a fork bomb ending a gVisor sandbox).
    if (
      status === 404 ||
      (status === 409 && /is not running|is paused|restarting/i.test(message)) ||
      (status === 500 && /container not running|is not running/i.test(message))
    ) {
      return new SandboxDead(`sandbox ${id.slice(0, 12)} is gone or not running (${doing} it): ${message}`, {
        cause: error,
      });
    }
    return translateDaemonError(error, `${doing} sandbox ${id.slice(0, 12)}`, this.where);
  }

  // ---- networks (egress) -------------------------------------------------------------

  /** An `internal` bridge network (no route out) with an explicit subnet, so no address pool is used. */
  async createNetwork(options: NetworkCreateOptions): Promise<string> {
    try {
      const network = await this.docker.createNetwork({
        Name: options.name,
        Driver: 'bridge',
        Internal: true,
        CheckDuplicate: true,
        EnableIPv6: false,
        Attachable: false,
        Labels: options.labels,
        IPAM: { Driver: 'default', Config: [{ Subnet: options.subnet, Gateway: options.gateway }] },
        Options: {
          'com.docker.network.bridge.name': options.bridgeName,
          'com.docker.network.bridge.enable_ip_masquerade': 'false',
          'com.docker.network.bridge.enable_icc': 'true',
        },
      });
      return network.id;
    } catch (error) {
      if (/overlap|in use|already exists/i.test(daemonMessage(error))) {
        throw new NetworkConflict(daemonMessage(error));
      }
      throw translateDaemonError(error, `creating network ${options.name}`, this.where);
    }
  }

  async removeNetwork(id: string): Promise<void> {
    try {
      await this.docker.getNetwork(id).remove();
    } catch (error) {
      if (statusOf(error) === 404) return;
      throw translateDaemonError(error, `removing network ${id.slice(0, 12)}`, this.where);
    }
  }

  async listNetworks(labels: Record<string, string | true>): Promise<NetworkSummary[]> {
    try {
      const list = (await this.docker.listNetworks({ filters: { label: labelFilter(labels) } })) as Array<{
        Id: string;
        Name: string;
        Labels?: Record<string, string>;
        Created?: string;
        Containers?: Record<string, unknown>;
        Options?: Record<string, string>;
      }>;
      return list.map((n) => ({
        id: n.Id,
        name: n.Name,
        labels: n.Labels ?? {},
        createdAt: new Date(n.Created ?? 0),
        containers: Object.keys(n.Containers ?? {}).length,
        bridgeName: n.Options?.['com.docker.network.bridge.name'] ?? '',
      }));
    } catch (error) {
      throw translateDaemonError(error, 'listing networks', this.where);
    }
  }

  // ---- images -----------------------------------------------------------------------

  async inspectImage(ref: string): Promise<ImageDetails | undefined> {
    try {
      const image = await this.docker.getImage(ref).inspect();
      return {
        id: image.Id,
        tags: image.RepoTags ?? [],
        labels: image.Config?.Labels ?? {},
        user: image.Config?.User ?? '',
        env: image.Config?.Env ?? [],
        volumes: Object.keys((image.Config?.Volumes as Record<string, unknown> | null | undefined) ?? {}),
        ...(typeof image.Size === 'number' ? { sizeBytes: image.Size } : {}),
      };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw translateDaemonError(error, `inspecting image ${ref}`, this.where);
    }
  }

  async listImages(labels: Record<string, string | true>): Promise<ImageSummary[]> {
    try {
      const list = await this.docker.listImages({ filters: { label: labelFilter(labels) } });
      return list.map((i) => ({
        id: i.Id,
        tags: i.RepoTags ?? [],
        labels: i.Labels ?? {},
        createdAt: new Date(i.Created * 1000),
        sizeBytes: i.Size,
      }));
    } catch (error) {
      throw translateDaemonError(error, 'listing images', this.where);
    }
  }

  async removeImage(ref: string): Promise<boolean> {
    try {
      await this.docker.getImage(ref).remove({ force: false, noprune: false });
      return true;
    } catch (error) {
      const status = statusOf(error);
      // 409: still used by a (kept) container; leave it for a later gc.
      if (status === 404 || status === 409) return false;
      throw translateDaemonError(error, `removing image ${ref}`, this.where);
    }
  }

  /**
   * `docker commit` of a stopped container: its writable layer on top of its image, as
   * `repo:tag` with the given labels (the image's own config otherwise). Returns the image id.
   */
  async commitContainer(
    id: string,
    options: { repo: string; tag: string; labels: Record<string, string> },
  ): Promise<string> {
    try {
      const container = await this.docker.getContainer(id).inspect();
      const source = await this.docker.getImage(container.Image).inspect();
      const result = (await this.docker.getContainer(id).commit({
        repo: options.repo,
        tag: options.tag,
        pause: false,
        // The new image's config: the container's, with its image's entry point and command back.
        _body: {
          Entrypoint: source.Config?.Entrypoint ?? [],
          Cmd: source.Config?.Cmd ?? [],
          Labels: { ...source.Config?.Labels, ...options.labels },
        },
      })) as { Id?: string };
      if (!result.Id) throw new Error('the engine returned no image id');
      return result.Id;
    } catch (error) {
      throw translateDaemonError(error, `committing container ${id.slice(0, 12)}`, this.where);
    }
  }

  async tagImage(ref: string, repo: string, tag: string): Promise<void> {
    try {
      await this.docker.getImage(ref).tag({ repo, tag });
    } catch (error) {
      throw translateDaemonError(error, `tagging ${ref} as ${repo}:${tag}`, this.where);
    }
  }

  /**
   * `docker save` of one or more images as one tar stream (shared layers once). The caller
   * must consume or destroy it. 404 (an image is missing) is an ImageError.
   */
  async saveImages(refs: string[], options: { signal?: AbortSignal } = {}): Promise<Readable> {
    try {
      // dockerode has `getImages` (GET /images/get?names=...); its type definitions do not.
      const docker = this.docker as unknown as {
        getImages(options: { names: string[]; abortSignal?: AbortSignal }): Promise<unknown>;
      };
      return (await docker.getImages({
        names: refs,
        ...(options.signal ? { abortSignal: options.signal } : {}),
      })) as unknown as Readable;
    } catch (error) {
      if (options.signal?.aborted) throw new Interrupted(`saving ${refs.join(', ')}: interrupted`);
      if (statusOf(error) === 404) {
        throw new ImageError(
          `cannot save ${refs.join(', ')} from ${this.where ?? 'the local engine'}: ${daemonMessage(error)}`,
          {
            cause: error,
          },
        );
      }
      throw translateDaemonError(error, `saving ${refs.join(', ')}`, this.where);
    }
  }

  /**
   * `docker load` from a tar stream (as `saveImages` makes it); resolves with the references
   * the engine reports loaded. A stream that breaks off fails the load: the engine keeps no
   * half-loaded image under a tag.
   */
  async loadImages(tar: Readable, options: { signal?: AbortSignal } = {}): Promise<string[]> {
    const loaded: string[] = [];
    let response: Readable | undefined;
    try {
      response = (await this.docker.loadImage(tar, {
        quiet: true,
        ...(options.signal ? { abortSignal: options.signal } : {}),
      })) as unknown as Readable;
      await this.followJson(response, (line) => {
        const match = /^Loaded image(?: ID)?: (\S+)/.exec(line.trim());
        if (match?.[1]) loaded.push(match[1]);
      });
    } catch (error) {
      if (options.signal?.aborted) throw new Interrupted('loading images: interrupted', { cause: error });
      if (response && error instanceof ImageError) {
        throw new ImageError(
          `loading images into ${this.where ?? 'the local engine'} failed: ${error.message}`,
          {
            cause: error,
          },
        );
      }
      throw translateDaemonError(error, 'loading images', this.where);
    }
    return loaded;
  }

  async diskUsage(): Promise<EngineDiskUsage> {
    try {
      const df = (await this.docker.df()) as {
        LayersSize?: number;
        Images?: unknown[] | null;
        Containers?: Array<{ SizeRw?: number }> | null;
        Volumes?: unknown[] | null;
        BuildCache?: Array<{ Size?: number }> | null;
      };
      return {
        layersBytes: Number(df.LayersSize ?? 0),
        images: (df.Images ?? []).length,
        containers: (df.Containers ?? []).length,
        containersBytes: (df.Containers ?? []).reduce((sum, c) => sum + Number(c.SizeRw ?? 0), 0),
        volumes: (df.Volumes ?? []).length,
        buildCacheBytes: (df.BuildCache ?? []).reduce((sum, b) => sum + Number(b.Size ?? 0), 0),
      };
    } catch (error) {
      throw translateDaemonError(error, 'reading disk usage', this.where);
    }
  }

  /** What a (finished) container wrote to stdout, at most `maxBytes`. Hostile data, like all output. */
  async containerOutput(id: string, maxBytes = 64 * 1024): Promise<string> {
    let raw: Buffer;
    try {
      raw = (await this.docker
        .getContainer(id)
        .logs({ stdout: true, stderr: false, follow: false })) as unknown as Buffer;
    } catch (error) {
      throw this.containerError(error, id, 'reading the output of');
    }
    // Without a TTY the log is framed: 8-byte headers (stream, 3 zero bytes, length).
    const parts: Buffer[] = [];
    let size = 0;
    for (let offset = 0; offset + 8 <= raw.length && size < maxBytes;) {
      const length = raw.readUInt32BE(offset + 4);
      const chunk = raw.subarray(offset + 8, Math.min(offset + 8 + length, raw.length));
      if (raw[offset] === 1) {
        parts.push(chunk.subarray(0, maxBytes - size));
        size += chunk.length;
      }
      offset += 8 + length;
    }
    return Buffer.concat(parts).toString('utf8');
  }

  /** Pulls an image; rejects quickly with ImageError when no registry answers. */
  async pullImage(
    ref: string,
    onLine?: (line: string) => void,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    try {
      const stream = await this.docker.pull(ref, options.signal ? { abortSignal: options.signal } : {});
      await this.followJson(stream as unknown as Readable, onLine);
    } catch (error) {
      if (error instanceof HarnessError) throw error;
      if (isConnectionError(error)) throw translateDaemonError(error, `pulling ${ref}`, this.where);
      throw new ImageError(`cannot pull ${ref}: ${daemonMessage(error)}`, { cause: error });
    }
  }

  /** `docker import`: turns a root filesystem tarball into an image. */
  async importImage(tar: Readable, repo: string, tag: string, changes: string[] = []): Promise<void> {
    try {
      const stream = await this.docker.importImage(tar, { repo, tag, changes });
      await this.followJson(stream as unknown as Readable);
    } catch (error) {
      if (error instanceof HarnessError) throw error;
      throw new ImageError(`cannot import ${repo}:${tag}: ${daemonMessage(error)}`, { cause: error });
    }
  }

  /** Builds an image from a tar build context; every output line goes to `onLine`. */
  async buildImage(context: Readable, options: BuildOptions): Promise<string> {
    // Ctrl-C cancels the request, which the daemon takes as the end of the build.
    const interrupted = (cause?: unknown) =>
      new Interrupted(`building ${options.tag}: interrupted`, cause === undefined ? {} : { cause });
    const stop = () => stream?.destroy(interrupted());
    let stream: Readable | undefined;
    options.signal?.addEventListener('abort', stop, { once: true });
    try {
      stream = (await this.docker.buildImage(context, {
        t: options.tag,
        dockerfile: options.dockerfile,
        buildargs: options.buildArgs,
        labels: options.labels,
        rm: true,
        forcerm: true,
        networkmode: options.networkMode,
        nocache: options.noCache === true,
        ...(options.signal ? { abortSignal: options.signal } : {}),
      })) as unknown as Readable;
      await this.followJson(stream, options.onLine);
    } catch (error) {
      if (options.signal?.aborted) throw interrupted(error);
      // Before a stream, the daemon refused the request; after, followJson already said why.
      throw stream ? error : translateDaemonError(error, `building ${options.tag}`, this.where);
    } finally {
      options.signal?.removeEventListener('abort', stop);
    }
    const image = await this.inspectImage(options.tag);
    if (!image) throw new ImageError(`the build of ${options.tag} finished but the image is missing`);
    return image.id;
  }

  /** Follows a daemon JSON-lines progress stream; an `error` message rejects with ImageError. */
  private followJson(stream: Readable, onLine?: (line: string) => void): Promise<void> {
    return new Promise((resolve, reject) => {
      // followProgress reports a failed build or pull as an ordinary event and then finishes
      // without an error, so the first `error` event is remembered and decides the outcome.
      let streamError: string | undefined;
      // Build output arrives in arbitrary chunks (a line can span events) and the legacy
      // builder wraps each stderr chunk in colour codes; lines are reassembled per stream
      // (so stdout and stderr fragments do not run together) and cleaned here.
      const partial = { out: '', err: '' };
      const flush = () => {
        for (const key of ['out', 'err'] as const) {
          if (partial[key] !== '') emit(partial[key]);
          partial[key] = '';
        }
      };
      const emit = (text: string) => {
        // eslint-disable-next-line no-control-regex
        const line = text.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');
        if (onLine && line.trim() !== '') onLine(line);
      };
      this.docker.modem.followProgress(
        stream,
        (error: Error | null) => {
          flush();
          if (error) reject(new ImageError(daemonMessage(error), { cause: error }));
          else if (streamError !== undefined) reject(new ImageError(streamError.trim()));
          else resolve();
        },
        (event: { stream?: string; status?: string; progress?: string; error?: string; id?: string }) => {
          if (event.error !== undefined) streamError ??= event.error;
          if (!onLine) return;
          if (event.stream !== undefined && event.error === undefined) {
            const key = event.stream.startsWith('\x1b[91m') ? 'err' : 'out';
            const lines = (partial[key] + event.stream).split('\n');
            partial[key] = lines.pop() ?? '';
            for (const line of lines) emit(line);
            return;
          }
          flush();
          const text = event.error ?? [event.id, event.status, event.progress].filter(Boolean).join(' ');
          for (const line of text.split('\n')) emit(line);
        },
      );
    });
  }
}

const DOCKER_ENV = [
  'DOCKER_HOST',
  'DOCKER_TLS_VERIFY',
  'DOCKER_CERT_PATH',
  'DOCKER_CLIENT_TIMEOUT',
  'DOCKER_PATH_PREFIX',
];

/**
 * docker-modem reads (and validates, and reads the certificates of) the DOCKER_* variables
 * in its constructor even when given an endpoint; a broken local setting must not break a
 * remote engine. The constructor is synchronous, so nothing else sees the variables gone.
 */
function withoutDockerEnvironment<T>(make: () => T): T {
  const saved = DOCKER_ENV.map((name) => [name, process.env[name]] as const);
  for (const name of DOCKER_ENV) delete process.env[name];
  try {
    return make();
  } finally {
    for (const [name, value] of saved) if (value !== undefined) process.env[name] = value;
  }
}

/**
 * dockerode options for exactly this endpoint. docker-modem merges its options over what it
 * reads from DOCKER_HOST and DOCKER_CERT_PATH, so every field the environment could set is
 * given here, if only as undefined: a remote engine must never get the local TLS files.
 */
function modemOptions(endpoint: EngineEndpoint): Docker.DockerOptions {
  const none = {
    socketPath: undefined,
    host: undefined,
    port: undefined,
    protocol: undefined,
    ca: undefined,
    cert: undefined,
    key: undefined,
    username: undefined,
    timeout: undefined,
    pathPrefix: '/',
  };
  switch (endpoint.transport) {
    case 'unix':
      return { ...none, socketPath: endpoint.socketPath, protocol: 'http' };
    case 'tcp':
      return endpoint.tls
        ? {
            ...none,
            host: endpoint.host,
            port: endpoint.port,
            protocol: 'https',
            ca: endpoint.tls.ca,
            cert: endpoint.tls.cert,
            key: endpoint.tls.key,
          }
        : { ...none, host: endpoint.host, port: endpoint.port, protocol: 'http' };
    case 'ssh': {
      const keys = endpoint.ssh.hostKeys;
      return {
        ...none,
        host: endpoint.host,
        port: endpoint.port,
        protocol: 'ssh',
        username: endpoint.username,
        sshOptions: {
          ...(endpoint.ssh.agent ? { agent: endpoint.ssh.agent } : {}),
          ...(endpoint.ssh.privateKey ? { privateKey: endpoint.ssh.privateKey } : {}),
          // Only a key known_hosts lists for this host: the ssh library accepts any otherwise.
          hostVerifier: (key: Buffer) => hostKeyAccepted(keys, key),
          readyTimeout: 10_000,
        },
      };
    }
  }
}

let shared: DockerEngine | undefined;
/** The same two files for every container: packed once. */
let loopbackTar: Promise<Buffer> | undefined;

/** One engine per process: dockerode keeps an HTTP agent, so reuse it. */
export function dockerEngine(): DockerEngine {
  shared ??= new DockerEngine();
  return shared;
}

/**
 * With SANDBOX_HARNESS_DEBUG set: one stderr line per Engine API request, with its method,
 * path and how long the engine took to answer (every daemon call goes through `dial`).
 */
function logEveryCall(docker: Docker, where: string): void {
  const modem = docker.modem as unknown as {
    dial(
      options: { method?: string; path?: string },
      callback: (error: unknown, data: unknown) => void,
    ): unknown;
  };
  const dial = modem.dial.bind(modem);
  modem.dial = (options, callback) => {
    const started = Date.now();
    return dial(options, (error, data) => {
      process.stderr.write(
        `[engine ${where}] ${options.method ?? 'GET'} ${options.path ?? ''} ${formatDuration(Date.now() - started)}${error ? ` (${daemonMessage(error)})` : ''}\n`,
      );
      callback(error, data);
    });
  };
}

/** The storage driver cannot enforce a writable-layer quota; the backend watches the size instead. */
/** dockerode types GraphDriver.Data for devicemapper only; overlay2 names its folders there. */
function graphDriverOf(raw: { Name?: string; Data?: unknown } | undefined): ContainerDetails['graphDriver'] {
  const data = (raw?.Data ?? {}) as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  const upperDir = text(data.UpperDir);
  const mergedDir = text(data.MergedDir);
  return {
    name: raw?.Name ?? '',
    ...(upperDir ? { upperDir } : {}),
    ...(mergedDir ? { mergedDir } : {}),
  };
}

/** The runtimes, security options and product an engine reports (`/info`, `/version`). */
function runtimeFacts(
  info: Record<string, unknown>,
  version: Record<string, unknown>,
): Pick<
  EngineInfo,
  'runtimes' | 'defaultRuntime' | 'runtimePaths' | 'securityOptions' | 'product' | 'podmanVersion'
> {
  const listed = (info.Runtimes && typeof info.Runtimes === 'object' ? info.Runtimes : {}) as Record<
    string,
    unknown
  >;
  const runtimes = Object.keys(listed).sort();
  const runtimePaths: Record<string, string> = {};
  for (const [name, entry] of Object.entries(listed)) {
    const path = (entry as { path?: unknown } | null)?.path;
    if (typeof path === 'string' && path !== '') runtimePaths[name] = path;
  }
  const securityOptions = Array.isArray(info.SecurityOptions)
    ? info.SecurityOptions.filter((o): o is string => typeof o === 'string')
    : [];
  const components = Array.isArray(version.Components) ? (version.Components as unknown[]) : [];
  const podman = components.find(
    (c): c is { Name: string; Version?: unknown } =>
      typeof c === 'object' && c !== null && /podman/i.test(String((c as { Name?: unknown }).Name)),
  );
  return {
    runtimes,
    defaultRuntime: String(info.DefaultRuntime ?? ''),
    runtimePaths,
    securityOptions,
    product: podman ? 'podman' : 'docker',
    ...(podman ? { podmanVersion: String(podman.Version ?? '') } : {}),
  };
}

/** The subnet or name of a new network is taken (another run chose it first); try another. */
export class NetworkConflict extends HarnessError {
  constructor(message: string) {
    super('NETWORK_CONFLICT', 'infrastructure', message);
  }
}

export class StorageQuotaUnsupported extends HarnessError {
  constructor(message: string) {
    super('STORAGE_QUOTA_UNSUPPORTED', 'infrastructure', message);
  }
}
