/** The real dependencies of `fix`: a sandbox provider (by backend name) and the catalog's image recipe. */
import type { LoadedCatalog } from '../catalog/load.js';
import type { RepoImageRequest, SandboxProvider } from '../sandbox/registry.js';
import type { FixDeps, ImageRequest, SandboxImage } from './context.js';
import { buildEgress } from './egress.js';

/** How a catalog's `sandbox` section asks for its image: prebuilt, or recipe, base and build options. */
export function catalogImageOptions(
  catalog: Pick<LoadedCatalog, 'catalog' | 'dir'>,
): Omit<RepoImageRequest, 'repoDir' | 'rebuild'> {
  const sandbox = catalog.catalog.sandbox;
  const egress = buildEgress(sandbox.egress);
  return {
    ...(sandbox.image ? { prebuilt: sandbox.image } : {}),
    ...(sandbox.dockerfile ? { dockerfile: sandbox.dockerfile, dockerfileRoot: catalog.dir } : {}),
    ...(sandbox.baseImage ? { baseImage: sandbox.baseImage } : {}),
    ...(sandbox.buildArgs ? { buildArgs: sandbox.buildArgs } : {}),
    buildNetwork: sandbox.build?.network === true,
    ...(egress ? { buildEgress: egress } : {}),
    ...(sandbox.build?.exclude.length ? { excludes: sandbox.build.exclude } : {}),
  };
}

export function fixDeps(provider: SandboxProvider, extra: Partial<FixDeps> = {}): FixDeps {
  return {
    backend: provider.backend,
    ping: () => provider.preflight(),
    ...(provider.runtime ? { runtime: (asked?: string) => provider.runtime!(asked) } : {}),
    image: async (request: ImageRequest): Promise<SandboxImage> => {
      const image = await provider.repoImage({
        repoDir: request.repoDir,
        ...catalogImageOptions(request.catalog),
        rebuild: request.rebuild,
        logFile: request.logFile,
        onProgress: request.onProgress,
        ...(request.signal ? { signal: request.signal } : {}),
      });
      return {
        tag: image.tag,
        imageId: image.imageId,
        reused: image.reused,
        buildNetwork: image.buildNetwork,
        hostFiles: image.hostFiles,
        ...(image.baseImage ? { baseImage: image.baseImage } : {}),
        ...(image.sizeBytes !== undefined ? { sizeBytes: image.sizeBytes } : {}),
      };
    },
    ...extra,
  };
}

/**
 * The same deps, with each repo's image resolved once: within an eval every trial of a task
 * asks for the image of the same, untouched repo (trials never apply), and hashing the repo
 * again for each costs a quarter of a second. The key holds the catalog's bytes, so two
 * catalogs of one repo (another recipe, other build options) are two images.
 */
export function reuseImages(deps: FixDeps): FixDeps {
  const images = new Map<string, Promise<SandboxImage>>();
  return {
    ...deps,
    image: (request) => {
      if (request.rebuild) return deps.image(request);
      const key = `${request.repoDir}\0${request.catalog.file}\0${request.catalog.hash}`;
      const known = images.get(key);
      // The one that made it says what it did; every later one found it made.
      if (known) return known.then((image) => ({ ...image, reused: true }));
      const pending = deps.image(request);
      images.set(key, pending);
      // A failure is not remembered: the next trial tries again (and says why, if it fails).
      pending.catch(() => images.delete(key));
      return pending;
    },
  };
}
