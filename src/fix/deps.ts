/** The real dependencies of `fix`: a sandbox provider (by backend name) and the catalog's image recipe. */
import type { LoadedCatalog } from '../catalog/load.js';
import { withBuildTimeLimit } from '../image-context/build-limit.js';
import type { BuildTimeLimit, RepoImage, RepoImageRequest } from '../image-context/request.js';
import type { SandboxProvider } from '../sandbox/backend-registry.js';
import type { FixDeps } from './types.js';
import { buildEgress } from './egress-phases.js';
import { join } from 'node:path';
import { cacheDir } from '../image-context/cache-dir.js';
import { fileFailingBaselines } from './failing-baselines.js';

/**
 * How a catalog's `sandbox` section asks for its image: prebuilt, or recipe, base and build
 * options, and the build's time limit. `limitFrom` names the file and field that really set
 * that limit when the catalog was made from another file (a Harbor task's task.toml).
 */
export function catalogImageOptions(
  catalog: Pick<LoadedCatalog, 'catalog' | 'dir'> & { displayPath?: string },
  limitFrom?: Omit<BuildTimeLimit, 'sec'>,
): Omit<RepoImageRequest, 'repoDir' | 'rebuild'> {
  const sandbox = catalog.catalog.sandbox;
  const egress = buildEgress(sandbox.egress);
  const buildSec = sandbox.timeouts.buildSec;
  return {
    name: catalog.catalog.name,
    ...(buildSec !== undefined
      ? {
          timeLimit: {
            sec: buildSec,
            ...(limitFrom ?? {
              file: catalog.displayPath ?? 'the catalog',
              field: 'sandbox.timeouts.buildSec',
            }),
          },
        }
      : {}),
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
    image: (request) => withBuildTimeLimit(request, (r) => provider.repoImage(r)),
    failingBaselines: fileFailingBaselines(join(cacheDir(), 'baselines')),
    ...extra,
  };
}

/**
 * What makes two requests ask for the same image: everything but where the log goes, who
 * hears the progress and what stops it. Two catalogs of one repo with another recipe or
 * other build options differ here, so they are two images.
 */
function imageKey(request: RepoImageRequest): string {
  const {
    logFile: _log,
    onProgress: _progress,
    onWarning: _warning,
    signal: _signal,
    timeLimit: _limit,
    ...what
  } = request;
  const args = what.buildArgs
    ? Object.entries(what.buildArgs).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    : [];
  return JSON.stringify([
    what.repoDir,
    what.prebuilt ?? null,
    what.dockerfile ?? null,
    what.dockerfileRoot ?? null,
    what.baseImage ?? null,
    args,
    what.buildNetwork === true,
    what.excludes ?? [],
  ]);
}

/**
 * The same deps, with each repo's image resolved once: within an eval every trial of a task
 * asks for the image of the same, untouched repo (trials never apply), and hashing the repo
 * again for each costs a quarter of a second.
 */
export function reuseImages(deps: FixDeps): FixDeps {
  const images = new Map<string, Promise<RepoImage>>();
  return {
    ...deps,
    image: (request) => {
      if (request.rebuild) return deps.image(request);
      const key = imageKey(request);
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
