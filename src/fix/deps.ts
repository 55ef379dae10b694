/** The real dependencies of `fix`: a sandbox provider (by backend name) and the catalog's image recipe. */
import type { SandboxProvider } from '../sandbox/registry.js';
import type { FixDeps, ImageRequest, SandboxImage } from './context.js';

export function fixDeps(provider: SandboxProvider, extra: Partial<FixDeps> = {}): FixDeps {
  return {
    backend: provider.backend,
    ping: () => provider.preflight(),
    image: async (request: ImageRequest): Promise<SandboxImage> => {
      const sandbox = request.catalog.catalog.sandbox;
      const image = await provider.repoImage({
        repoDir: request.repoDir,
        ...(sandbox.image ? { prebuilt: sandbox.image } : {}),
        ...(sandbox.dockerfile
          ? { dockerfile: sandbox.dockerfile, dockerfileRoot: request.catalog.dir }
          : {}),
        ...(sandbox.baseImage ? { baseImage: sandbox.baseImage } : {}),
        ...(sandbox.buildArgs ? { buildArgs: sandbox.buildArgs } : {}),
        buildNetwork: sandbox.build?.network === true,
        ...(sandbox.build?.exclude.length ? { excludes: sandbox.build.exclude } : {}),
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
      };
    },
    ...extra,
  };
}
