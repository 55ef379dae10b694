/**
 * Sandbox backends by name, the way model providers are chosen by name: the CLI, `fix` and
 * evals ask for a provider and get the backend, its images and its pre-flight check, never
 * a Docker type. Only the chosen backend's code is loaded.
 */
import type { z } from 'zod';
import { UsageError } from '../errors.js';
import type { EngineSpec, ResolveEnginesOptions } from './docker/fleet/engines-file.js';
// A record's engine reference, read back: each backend's schema is small and engine-free.
import {
  describeDockerEngineRef,
  dockerEngineFields,
  dockerEngineRefSchema,
} from './docker/fleet/engine-ref.js';
import type { EngineHandle, ProviderOptions, SandboxProvider } from './types.js';

export const BACKEND_NAMES = ['docker', 'slurm'] as const;
export type BackendName = (typeof BACKEND_NAMES)[number];

export type { HostFileState, RepoImage, RepoImageRequest } from '../image-context/request.js';
export type {
  BaseImagePresenceOptions,
  ClusterPlacement,
  DoctorCheck,
  DoctorReport,
  EngineHandle,
  GcReport,
  GcScope,
  ImagePresence,
  PresenceMethod,
  ProviderOptions,
  QueueEvent,
  SandboxProvider,
} from './types.js';
// Docker-only: the harness's base images (no engine code: cheap to load).
export { BASE_IMAGES, DEFAULT_BASE_IMAGE, isBaseKind, type BaseKind } from './docker/images/base-images.js';
export type { EnsureBaseImageResult } from './docker/images/ensure-base.js';
export type { HarnessImage } from './docker/images/image-inventory.js';
export type { GvisorSetupResult } from './docker/operator/gvisor-setup.js';
export { packageRoot } from '../package-root.js';
// The engines a fleet names are Docker engines today (contexts, tcp:// with TLS, ssh://): the
// engines file and its specs are the Docker backend's, reached from above only through here.
export type { EngineRef, EngineSpec, ResolveEnginesOptions } from './docker/fleet/engines-file.js';

/**
 * The provider of a backend. With `engine`, every sandbox, image and pre-flight check goes to
 * that engine and `backend.engine` is its name; without, to the local engine.
 */
export async function sandboxProvider(
  name: string = 'docker',
  options: ProviderOptions = {},
): Promise<SandboxProvider> {
  switch (name) {
    case 'docker': {
      const docker = await import('./docker/docker-provider.js');
      return options.engine ? docker.dockerProviderFor(options.engine) : docker.dockerProvider();
    }
    case 'slurm': {
      if (options.engine) {
        throw new UsageError(
          '--engine/--engines name Docker engines; the slurm backend places sandboxes on its nodes itself',
          {
            hint: 'Use --partition, --account, --qos or --constraint to say where.',
          },
        );
      }
      const slurm = await import('./slurm/slurm-provider.js');
      return slurm.slurmProvider({
        ...options.cluster,
        ...(options.onQueued ? { onQueued: options.onQueued } : {}),
        ...(options.onNote ? { onNote: options.onNote } : {}),
      });
    }
    default:
      throw new UsageError(`unknown sandbox backend "${name}"`, {
        hint: `use one of: ${BACKEND_NAMES.join(', ')}`,
      });
  }
}

/** The engines an eval or `doctor` uses: an engines file and/or `--engine` values; the local one alone without. */
export async function resolveEngines(options: ResolveEnginesOptions = {}): Promise<EngineSpec[]> {
  return (await import('./docker/fleet/engines-file.js')).resolveEngines(options);
}

/**
 * How a run record names its engine again: `{ backend, ...fields that backend owns }`, the
 * fields opaque to everything above the registry and checked by the backend's own schema when
 * the record is read. A reference without `backend` is Docker's (records written before
 * references named their backend). A second backend adds its schema to this union.
 */
export const storedEngineRefSchema = dockerEngineRefSchema;
export type StoredEngineRef = z.infer<typeof storedEngineRefSchema>;

/** The engine a run record names again, found by the backend that wrote the reference. */
export async function resolveStoredEngine(
  ref: StoredEngineRef,
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<EngineSpec> {
  switch (ref.backend ?? 'docker') {
    case 'docker':
      return (await import('./docker/fleet/engines-file.js')).resolveStoredEngine(
        dockerEngineFields(ref),
        options,
      );
  }
}

/** Where a run record's engine reference leads, for messages (the backend's words; no secrets). */
export function describeStoredEngine(ref: StoredEngineRef): string {
  switch (ref.backend ?? 'docker') {
    case 'docker':
      return describeDockerEngineRef(dockerEngineFields(ref));
  }
}

/** What connects to an engine of a spec: made once, then called per engine (a fleet connects many). */
export async function engineConnector(): Promise<
  (spec: Pick<EngineSpec, 'name' | 'endpoint'>) => EngineHandle
> {
  const docker = await import('./docker/docker-provider.js');
  return (spec) => docker.connectEngine(spec);
}

/** A connection to one engine outside an eval (`inspect`, `shell`, `gc --engine`), for `sandboxProvider`. */
export async function connectEngine(spec: Pick<EngineSpec, 'name' | 'endpoint'>): Promise<EngineHandle> {
  return (await engineConnector())(spec);
}

/** Where an engine of a spec is, for messages; no secrets. */
export async function describeEngine(spec: Pick<EngineSpec, 'endpoint'>): Promise<string> {
  return (await import('./docker/engine/endpoint.js')).describeEndpoint(spec.endpoint);
}

/**
 * What only the Docker backend has (the `images` and `setup` commands: base image recipes,
 * the offline bootstrap, starting the local engine, gVisor set-up). Those commands say they
 * are Docker-only; this is their one way in.
 */
export async function dockerOnly() {
  const [base, inventory, gvisor, doctor, engine] = await Promise.all([
    import('./docker/images/ensure-base.js'),
    import('./docker/images/image-inventory.js'),
    import('./docker/operator/gvisor-setup.js'),
    import('./docker/operator/engine-doctor.js'),
    import('./docker/engine/index.js'),
  ]);
  return {
    ensureBaseImage: base.ensureBaseImage,
    listHarnessImages: inventory.listHarnessImages,
    /** Where the local engine is looked for: DOCKER_HOST, else the default socket. */
    localEndpoint: (): string => doctor.dockerEndpoint(),
    /** Whether the local engine answers within `timeoutMs` (throws `SandboxUnavailable` if not). */
    pingLocal: (timeoutMs: number): Promise<void> => engine.dockerEngine().ping(timeoutMs),
    /** Installs and registers runsc on the local engine. */
    setUpGvisor: (options: Omit<Parameters<typeof gvisor.setUpGvisor>[0], 'engine'>) =>
      gvisor.setUpGvisor({ ...options, engine: engine.dockerEngine() }),
  };
}
