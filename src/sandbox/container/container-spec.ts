/**
 * What a sandbox container is, written once and backend-neutral: the values here are the
 * whole of it, and each backend only renders them in its own words (the Docker API's create
 * body in `docker/engine/create-body.ts`; a container CLI's flags, `docker run` or `podman
 * run`, in `cli-args.ts`). Nothing here is a Docker type; no other file writes HostConfig
 * fields or hardening flags (tests/unit/structure.test.ts), and a test reads both renderings
 * back into these fields and finds them equal.
 *
 * The baseline (DESIGN.md, "Sandbox hardening baseline"): no network, or an internal network
 * whose one name server is the egress proxy's; every capability dropped; no new privileges;
 * not privileged; an init as pid 1; a private IPC namespace; memory without swap; CPU, pids,
 * open files, file size and process count bounded; /tmp a size-limited tmpfs; no mounts, no
 * published ports, no restarts, no logs, no health check of the image's own; labels on
 * everything; the environment built explicitly by the caller, never copied from the host.
 */
import type { TarInput } from '../tar.js';
import { LOOPBACK_RESOLVER, loopbackExtraHosts, SANDBOX_HOSTNAME, type Resolver } from './loopback-names.js';

export type { Resolver } from './loopback-names.js';

/** What every sandbox container is, whatever it runs: fixed values, never a parameter. */
export const HARDENING = {
  capDrop: ['ALL'],
  noNewPrivileges: true,
  privileged: false,
  /** An init as pid 1 reaps orphans and forwards signals; nothing of the image runs as pid 1. */
  init: true,
  ipc: 'private',
  /** Memory + swap = memory: a sandbox never swaps. */
  noSwap: true,
  /** Nothing reads container logs, and pid 1's stdout is reachable from inside. */
  logDriver: 'none',
  restart: 'no',
  /** An image's HEALTHCHECK would run its own commands inside the sandbox. */
  healthcheck: 'none',
  /** No bind mounts, no volumes: nothing of the host is inside. */
  mounts: 'none',
  publishPorts: false,
  /** The harness removes a container itself (or keeps it for `inspect`); the engine never does. */
  autoRemove: false,
} as const;

export type Hardening = typeof HARDENING;

export type ContainerNetwork =
  /** No network stack but loopback; names resolve from the hosts file only. */
  | { mode: 'none'; resolver: Resolver }
  /** An internal network of its own (egress), whose one name server is the proxy's. */
  | { mode: 'named'; name: string; resolver: Resolver };

export interface TmpfsMount {
  path: string;
  sizeBytes: number;
  /** Permission bits of its root, e.g. 0o1777. */
  mode: number;
  /** Mount flags before the size, e.g. `rw`, `nosuid`, `nodev`. */
  flags: string[];
}

export interface ContainerUlimits {
  /** Open files (soft = hard). */
  nofile: number;
  /** Largest file a process may write, bytes (soft = hard). */
  fsize: number;
  /** Processes per user (soft = hard); see DEFAULT_NPROC. */
  nproc: number;
}

export interface ContainerSpec {
  /** The engine's name for the container; absent: the engine chooses. */
  name?: string | undefined;
  image: string;
  hostname: string;
  /** Replaces the image's entrypoint: one program, so nothing of the image runs before the harness says so. */
  entrypoint: readonly [string];
  cmd: string[];
  /** `uid:gid`. */
  user: string;
  workingDir: string;
  /** `NAME=value`, built by the caller; never from the host's environment. */
  env: string[];
  labels: Record<string, string>;
  network: ContainerNetwork;
  /** `name:address` entries the hosts file must hold (the loopback names). */
  extraHosts: string[];
  memoryBytes: number;
  /** CPU in billionths of a core (`--cpus` = nanoCpus / 1e9). */
  nanoCpus: number;
  pids: number;
  ulimits: ContainerUlimits;
  tmpfs: TmpfsMount[];
  /** Writable-layer quota; only where the storage driver supports it. */
  diskBytes?: number;
  /** The OCI runtime by the engine's name for it (`runsc`); absent: the engine's default. */
  runtime?: string;
  /** Files placed before the container starts (ownership and modes as given). */
  files: TarInput[];
  hardening: Hardening;
}

/**
 * RLIMIT_NPROC for every container. The pids cgroup (`pids`) is the sandbox's real bound
 * on processes: the kernel counts NPROC per uid across every container of the host that runs
 * as that uid, so a tight value here would let one sandbox's fork bomb starve the others. It
 * is set at all because an engine that sets none passes on its own default, and Podman's
 * exceeds this kind of machine's hard limit, so its containers fail to start ("error setting
 * rlimit"), like a missing nofile.
 */
export const DEFAULT_NPROC = 16_384;

/** The limits a caller chooses; everything else of a sandbox container is fixed. */
export interface ContainerLimits {
  memoryBytes: number;
  nanoCpus: number;
  pids: number;
  /** Largest single file a command may write (RLIMIT_FSIZE). */
  maxFileBytes: number;
  tmpfsBytes: number;
  nofile: number;
  /** RLIMIT_NPROC; default `DEFAULT_NPROC`. */
  nproc?: number | undefined;
  diskBytes?: number | undefined;
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
} as const satisfies ContainerLimits;

/** What a caller says of a sandbox container: what it runs, as whom, its limits; never its hardening. */
export interface ContainerRequest
  extends
    ContainerLimits,
    Pick<ContainerSpec, 'image' | 'entrypoint' | 'cmd' | 'user' | 'workingDir' | 'env' | 'labels'> {
  name?: string | undefined;
  runtime?: string | undefined;
  files?: TarInput[] | undefined;
  /** An egress sandbox: joins this (internal) network, with this name server (the proxy's logging one). */
  network?: { name: string; dns: string[] } | undefined;
}

/** The one way a sandbox container is made: the caller's choices, and the baseline around them. */
export function hardenedContainer(request: ContainerRequest): ContainerSpec {
  return {
    name: request.name,
    image: request.image,
    hostname: SANDBOX_HOSTNAME,
    entrypoint: request.entrypoint,
    cmd: request.cmd,
    user: request.user,
    workingDir: request.workingDir,
    env: request.env,
    labels: request.labels,
    network: request.network
      ? {
          mode: 'named',
          name: request.network.name,
          // Only the proxy's name server: never the engine's default, never the host's search.
          resolver: { nameServers: request.network.dns, search: [], options: [] },
        }
      : { mode: 'none', resolver: LOOPBACK_RESOLVER },
    extraHosts: loopbackExtraHosts(SANDBOX_HOSTNAME),
    memoryBytes: request.memoryBytes,
    nanoCpus: request.nanoCpus,
    pids: request.pids,
    ulimits: { nofile: request.nofile, fsize: request.maxFileBytes, nproc: request.nproc ?? DEFAULT_NPROC },
    tmpfs: [{ path: '/tmp', sizeBytes: request.tmpfsBytes, mode: 0o1777, flags: ['rw', 'nosuid', 'nodev'] }],
    ...(request.diskBytes ? { diskBytes: request.diskBytes } : {}),
    ...(request.runtime ? { runtime: request.runtime } : {}),
    files: request.files ?? [],
    hardening: HARDENING,
  };
}

/** The same container without a writable-layer quota (a storage driver that cannot hold one). */
export function withoutDiskQuota(spec: ContainerSpec): ContainerSpec {
  const { diskBytes: _quota, ...rest } = spec;
  return rest;
}
