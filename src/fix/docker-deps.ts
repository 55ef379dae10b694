/** The real dependencies of `fix`: the Docker backend and the repo image builder. */
import { dockerBackend, dockerEngine } from '../sandbox/docker/index.js';
import { buildRepoImage, resolveDockerfile } from '../sandbox/docker/images.js';
import { scanBuildContext } from '../sandbox/docker/build-context.js';
import { ImageError } from '../errors.js';
import type { FixDeps, ImageRequest, RepoImage } from './run-fix.js';

async function repoImage(request: ImageRequest): Promise<RepoImage> {
  const sandbox = request.catalog.catalog.sandbox;
  if (sandbox.image) {
    // A prebuilt image must already hold the repo at /workspace; the snapshot for the
    // all-or-nothing apply still comes from the host repo as it is now.
    const details = await dockerEngine().inspectImage(sandbox.image);
    if (!details) {
      throw new ImageError(`the catalog's sandbox.image ${sandbox.image} does not exist locally`, {
        hint: 'Build or pull it first, or use sandbox.dockerfile to let sandbox-harness build it from the repo.',
      });
    }
    const context = await scanBuildContext({
      contextDir: request.repoDir,
      dockerfile: await resolveDockerfile(request.repoDir),
      // Nothing is built from this context: it is only the host's view of the repo.
      secretScan: false,
    });
    return { tag: sandbox.image, imageId: details.id, reused: true, snapshot: context.snapshot };
  }
  const built = await buildRepoImage({
    repoDir: request.repoDir,
    ...(sandbox.dockerfile ? { dockerfile: sandbox.dockerfile, dockerfileRoot: request.catalog.dir } : {}),
    network: sandbox.build?.network === true,
    ...(sandbox.build?.exclude.length ? { extraExcludes: sandbox.build.exclude } : {}),
    ...(sandbox.baseImage ? { baseImage: sandbox.baseImage } : {}),
    buildArgs: sandbox.buildArgs,
    rebuild: request.rebuild,
    onProgress: request.onProgress,
    logFile: request.logFile,
    ...(request.signal ? { signal: request.signal } : {}),
  });
  return { tag: built.tag, imageId: built.imageId, reused: built.reused, snapshot: built.snapshot };
}

export function dockerFixDeps(): FixDeps {
  return {
    backend: dockerBackend(),
    ping: () => dockerEngine().ping(5000),
    image: repoImage,
  };
}
