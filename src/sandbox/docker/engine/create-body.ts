/**
 * The body of `POST /containers/create` for a hardened container: the only place that writes
 * HostConfig fields.
 */
import type Docker from 'dockerode';
import { loopbackExtraHosts, SANDBOX_HOSTNAME } from '../../container/loopback-names.js';
import type { TarInput } from '../../tar.js';

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

/**
 * RLIMIT_NPROC for every container. The pids cgroup (`PidsLimit`) is the sandbox's real bound
 * on processes: the kernel counts NPROC per uid across every container of the host that runs
 * as that uid, so a tight value here would let one sandbox's fork bomb starve the others. It
 * is set at all because an engine that sets none passes on its own default, and Podman's
 * exceeds this kind of machine's hard limit, so its containers fail to start ("error setting
 * rlimit"), like a missing nofile.
 */
export const DEFAULT_NPROC = 16_384;

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

export function createBody(options: ContainerCreateOptions): Docker.ContainerCreateOptions {
  return {
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
  };
}
