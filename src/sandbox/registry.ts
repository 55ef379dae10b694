/**
 * Sandbox backends by name, the way model providers are chosen by name: the CLI, `fix` and
 * evals ask for a provider and get the backend, its images and its pre-flight check, never
 * a Docker type. Only the chosen backend's code is loaded.
 */
import { UsageError } from '../errors.js';
import type { RepoImage, RepoImageRequest } from '../image-context/request.js';
import type { SandboxBackend } from './types.js';

export const BACKEND_NAMES = ['docker'] as const;
export type BackendName = (typeof BACKEND_NAMES)[number];

export type { HostFileState, RepoImage, RepoImageRequest } from '../image-context/request.js';

export interface SandboxProvider {
  readonly backend: SandboxBackend;
  /** The sandbox image of a repo: reused by content hash, or built. */
  repoImage(request: RepoImageRequest): Promise<RepoImage>;
  /** Throws `SandboxUnavailable` (with what to do) when the engine does not answer or is nearly full. */
  preflight(): Promise<void>;
  /**
   * The runtime a sandbox of this backend gets when `asked` (or nothing) is asked for, by name;
   * `ConfigError` when the engine has no such runtime. Absent: the backend has no runtimes.
   */
  runtime?(asked?: string): Promise<string>;
}

/**
 * One engine of several (an eval's fleet): the name records and reports use for it, and the
 * connection the fleet made to it. Only the backend that made the connection understands it
 * (for `docker`, a DockerEngine from `src/fleet/`), so nothing above this folder needs the type.
 */
export interface EngineHandle {
  readonly name: string;
  readonly connection: unknown;
}

export interface ProviderOptions {
  /** The engine to bind to; absent: the local engine, named `local`. */
  engine?: EngineHandle;
}

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
      const docker = await import('./docker/provider.js');
      return options.engine ? docker.dockerProviderFor(options.engine) : docker.dockerProvider();
    }
    default:
      throw new UsageError(`unknown sandbox backend "${name}"`, {
        hint: `use one of: ${BACKEND_NAMES.join(', ')}`,
      });
  }
}
