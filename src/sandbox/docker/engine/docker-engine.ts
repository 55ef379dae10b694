/**
 * One Docker-API engine (dockerd, or Podman's API service), split by resource the way
 * testcontainers splits its runtime client: `containers`, `exec`, `images` and `networks`,
 * each a small client of its own; the engine itself only answers whether it is there
 * (`ping`), what it is (`info`) and what it stores (`storageUsage`). This folder is the only
 * one that imports dockerode; nothing it returns is a dockerode object.
 */
import type Docker from 'dockerode';
import type { EngineStorageUsage } from '../../types.js';
import { connect } from './connection.js';
import { EngineContainers } from './containers.js';
import { translateDaemonError } from './daemon-errors.js';
import type { EngineEndpoint } from './endpoint.js';
import { EngineExec } from './exec-sessions.js';
import { EngineImages } from './image-store.js';
import { EngineNetworks } from './networks.js';

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

/** How long `recentInfo` keeps an answer: runtimes and the data root do not change under a run. */
export const RECENT_INFO_MS = 10_000;

export class DockerEngine {
  /** Names the engine in messages; undefined for the local default (the environment decides). */
  readonly where: string | undefined;
  readonly containers: EngineContainers;
  readonly exec: EngineExec;
  readonly images: EngineImages;
  readonly networks: EngineNetworks;
  private readonly docker: Docker;
  private readonly local: boolean;

  /**
   * Without an endpoint: the local engine, as DOCKER_HOST / DOCKER_TLS_VERIFY /
   * DOCKER_CERT_PATH say. With one: exactly that engine, whatever the environment says.
   */
  constructor(endpoint?: EngineEndpoint) {
    const connection = connect(endpoint);
    this.docker = connection.docker;
    this.where = connection.where;
    this.local = connection.local;
    this.containers = new EngineContainers(this.docker, this.where);
    this.exec = new EngineExec(this.docker, this.where);
    this.images = new EngineImages(this.docker, this.where);
    this.networks = new EngineNetworks(this.docker, this.where);
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

  private recent: { at: number; info: Promise<EngineInfo> } | undefined;

  /**
   * `info()` as it was at most `maxAgeMs` ago, one request shared by every caller in that
   * time: each run asks at its start (free space, runtimes), and an eval starts many. A
   * failed answer is never kept. Whoever needs the engine's word now (doctor, the gVisor
   * set-up after registering runsc) asks `info()`.
   */
  recentInfo(maxAgeMs = RECENT_INFO_MS): Promise<EngineInfo> {
    const now = Date.now();
    if (this.recent && now - this.recent.at < maxAgeMs) return this.recent.info;
    const entry = { at: now, info: this.info() };
    this.recent = entry;
    entry.info.catch(() => {
      if (this.recent === entry) this.recent = undefined;
    });
    return entry.info;
  }

  /** What the engine stores (`GET /system/df`). It does not say how much disk is free. */
  async storageUsage(): Promise<EngineStorageUsage> {
    try {
      return storageUsageOf((await this.docker.df()) as DiskUsageAnswer);
    } catch (error) {
      throw translateDaemonError(error, 'reading disk usage', this.where);
    }
  }
}

/** The part of `GET /system/df` the harness reads. */
export interface DiskUsageAnswer {
  LayersSize?: number;
  Images?: unknown[] | null;
  Containers?: Array<{ SizeRw?: number }> | null;
  Volumes?: unknown[] | null;
  BuildCache?: Array<{ Size?: number }> | null;
}

export function storageUsageOf(df: DiskUsageAnswer): EngineStorageUsage {
  const images = (df.Images ?? []).length;
  const layers = Number(df.LayersSize ?? 0);
  return {
    // Podman's Docker API answers LayersSize 0 however many images it holds: not a size.
    ...(layers > 0 || images === 0 ? { layersBytes: layers } : {}),
    images,
    containers: (df.Containers ?? []).length,
    containersBytes: (df.Containers ?? []).reduce((sum, c) => sum + Number(c.SizeRw ?? 0), 0),
    volumes: (df.Volumes ?? []).length,
    buildCacheBytes: (df.BuildCache ?? []).reduce((sum, b) => sum + Number(b.Size ?? 0), 0),
  };
}

let shared: DockerEngine | undefined;

/** One engine per process: dockerode keeps an HTTP agent, so reuse it. */
export function dockerEngine(): DockerEngine {
  shared ??= new DockerEngine();
  return shared;
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
