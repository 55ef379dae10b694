/** The Docker backend as a `SandboxProvider`: sandboxes, repo images and the pre-flight check. */
import { statfs } from 'node:fs/promises';
import { ImageError, SandboxUnavailable } from '../../errors.js';
import { formatBytes } from '../../format.js';
import { imageRef } from '../../object-names.js';
import type { RepoImage, RepoImageRequest } from '../../image-context/request.js';
import type { EngineHandle, SandboxProvider } from '../types.js';
import { runDoctor, dockerEndpoint } from './operator/engine-doctor.js';
import { describeEndpoint, type EngineEndpoint } from './engine/endpoint.js';
import { ensureBaseImageOn } from './images/image-shipping.js';
import { collectGarbage } from './operator/collect-garbage.js';
import { scanBuildContext } from '../../image-context/build-context.js';
import { DockerBackend, dockerBackend } from './docker-sandbox.js';
import { dockerEngine, DockerEngine } from './engine/index.js';
import { buildRepoImage, resolveDockerfile } from './images/repo-image.js';
import { effectiveRuntime, requireRuntime } from './runtimes.js';

/** Below this much free space in the engine's storage, runs refuse to start. */
export const DEFAULT_MIN_FREE_BYTES = 2 * 1024 ** 3;

export async function checkFreeSpace(
  engine: DockerEngine,
  minFreeBytes = DEFAULT_MIN_FREE_BYTES,
): Promise<void> {
  // The data root from a recent answer (it does not move); the free space measured now.
  const info = await engine.recentInfo();
  // Only a local engine's data root can be measured from here; a remote one is checked by `doctor`.
  if (!engine.isLocal() || !info.dockerRootDir) return;
  const stats = await statfs(info.dockerRootDir).catch(() => undefined);
  if (!stats) return;
  const free = stats.bavail * stats.bsize;
  if (free < minFreeBytes) {
    throw new SandboxUnavailable(
      `the Docker engine's storage (${info.dockerRootDir}) has ${formatBytes(free)} free, less than the ${formatBytes(minFreeBytes)} a run needs`,
      {
        hint: 'Free some space (`sandbox-harness gc --all`, `docker system prune`), or set SANDBOX_HARNESS_MIN_FREE_BYTES.',
      },
    );
  }
}

async function repoImage(engine: DockerEngine, request: RepoImageRequest): Promise<RepoImage> {
  // Names from a catalog or a flag, parsed before anything of the repo is read or built.
  if (request.prebuilt !== undefined) imageRef(request.prebuilt, "the catalog's sandbox.image");
  if (request.baseImage !== undefined)
    imageRef(request.baseImage, 'the base image (sandbox.baseImage, --base-image)');
  if (request.prebuilt) {
    const details = await engine.images.inspect(request.prebuilt);
    if (!details) {
      throw new ImageError(
        `the catalog's sandbox.image ${request.prebuilt} does not exist ${engine.where ? `on ${engine.where}` : 'locally'}`,
        {
          hint: 'Build or pull it first, or use sandbox.dockerfile to let sandbox-harness build it from the repo.',
        },
      );
    }
    // The files the host apply compares against are the repo as it is now.
    const context = await scanBuildContext({
      contextDir: request.repoDir,
      dockerfile: await resolveDockerfile(request.repoDir),
      // Nothing is built from this context: it is only the host's view of the repo.
      secretScan: false,
    });
    return {
      tag: request.prebuilt,
      imageId: details.id,
      reused: true,
      buildNetwork: false,
      hostFiles: context.snapshot,
      sizeBytes: details.sizeBytes,
    };
  }
  const { prebuilt: _prebuilt, ...recipe } = request;
  const built = await buildRepoImage({ ...recipe, engine });
  const details = await engine.images.inspect(built.tag).catch(() => undefined);
  return { ...built, ...(details?.sizeBytes !== undefined ? { sizeBytes: details.sizeBytes } : {}) };
}

/** The engine a provider of this backend talks to, to ship images from it to another. */
const engines = new WeakMap<SandboxProvider, DockerEngine>();

/** A connection to the engine of a spec (an engines file entry, `--engine`). */
export function connectEngine(spec: { name: string; endpoint: EngineEndpoint }): EngineHandle & {
  connection: DockerEngine;
} {
  return {
    name: spec.name,
    connection: new DockerEngine(spec.endpoint),
    endpoint: describeEndpoint(spec.endpoint),
  };
}

/** A provider bound to one engine of a fleet: its sandboxes, images and checks all go there. */
export function dockerProviderFor(handle: EngineHandle): SandboxProvider {
  if (!(handle.connection instanceof DockerEngine)) {
    throw new TypeError(`engine ${handle.name}: the docker backend needs a DockerEngine connection`);
  }
  return dockerProvider(
    new DockerBackend(handle.connection, handle.name),
    handle.connection,
    handle.endpoint ?? handle.name,
  );
}

export function dockerProvider(
  backend: DockerBackend = dockerBackend(),
  engine: DockerEngine = dockerEngine(),
  endpoint: string = dockerEndpoint(),
): SandboxProvider {
  const provider: SandboxProvider = {
    backend,
    endpoint,
    repoImage: (request) => repoImage(engine, request),
    async runtime(asked?: string) {
      const info = asked ? await requireRuntime(engine, asked) : await engine.recentInfo();
      return effectiveRuntime(info, asked);
    },
    async preflight() {
      await engine.ping(5000);
      const floor = Number(process.env.SANDBOX_HARNESS_MIN_FREE_BYTES);
      await checkFreeSpace(engine, Number.isFinite(floor) && floor >= 0 ? floor : DEFAULT_MIN_FREE_BYTES);
    },
    doctor: (options = {}) =>
      runDoctor({
        engine,
        ...(options.fleet ? { fleet: { endpoint, prepareHint: options.fleet.prepareHint } } : {}),
      }),
    collectGarbage: (scope) => collectGarbage(engine, scope),
    ensureBaseImage: (options = {}) => {
      const { from, ...rest } = options;
      const source = from ? engines.get(from) : undefined;
      if (from && !source)
        throw new TypeError('the docker backend ships base images only from a docker engine');
      return ensureBaseImageOn(engine, { ...rest, source: source ?? dockerEngine() });
    },
  };
  engines.set(provider, engine);
  return provider;
}
