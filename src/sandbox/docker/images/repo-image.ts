/**
 * The per-repo sandbox image, named by a content hash of (Dockerfile, build context, build
 * args, base image id) so an unchanged repo reuses its image without a build.
 */
import { join, relative, resolve } from 'node:path';
import { BuildRefused, ImageError } from '../../../errors.js';
import { scanBuildContext, type BuildContext } from '../../../image-context/build-context.js';
import { argDefault, finalBaseImage } from '../../../image-context/dockerfile.js';
import type { BuiltRepoImage, RepoImageRequest } from '../../../image-context/request.js';
import { packageRoot } from '../../../package-root.js';
import { defaultRecipe, repoImageTag, repoSlug, resolveDockerfile } from '../../../image-context/recipe.js';
import { imageRef, imageRefProblem } from '../../../object-names.js';
import { readRepoFile } from '../../../repo-files.js';
import { dockerEngine, type DockerEngine } from '../engine/index.js';
import { BUILD_NETWORK_LABEL, CONTENT_HASH_LABEL, LABEL, REPO_LABEL } from '../labels.js';
import {
  assertBuildEgressEnforceable,
  buildEgressHashInput,
  withBuildEgress,
} from '../network/build-egress.js';
import { BASE_IMAGES, DEFAULT_BASE_IMAGE } from './base-images.js';
import { LogFile, logsDir } from './build-log.js';
import {
  assertDependenciesCanArrive,
  assertNothingToFetch,
  assertOfflineRecipeCanWork,
} from './build-guards.js';
import { ensureBaseImage } from './ensure-base.js';
import { runBuild } from './image-build.js';
import { pullWithIdleTimeout } from './image-pull.js';

export type { BuiltRepoImage } from '../../../image-context/request.js';
// The recipe and the tag are the same for every backend (image-context/recipe.ts).
export { defaultRecipe, repoImageTag, repoSlug, resolveDockerfile };

/** A repo image request as the Docker backend takes it: the one request, on one engine. */
export interface BuildRepoImageOptions extends Omit<RepoImageRequest, 'prebuilt'> {
  engine?: DockerEngine;
}

const pendingRepo = new Map<string, Promise<BuiltRepoImage>>();

/**
 * The sandbox image of a repo, tagged by the content hash of (Dockerfile, build context,
 * build args, base image id). An existing image with that hash is reused without a build.
 */
export async function buildRepoImage(options: BuildRepoImageOptions): Promise<BuiltRepoImage> {
  const engine = options.engine ?? dockerEngine();
  const repoDir = resolve(options.repoDir);
  const dockerfile = await resolveDockerfile(repoDir, options.dockerfile, options.dockerfileRoot);
  const ours = dockerfile === defaultRecipe();
  const network = options.buildNetwork === true;
  // Before anything is made: egress that cannot be enforced is refused, never widened.
  if (options.buildEgress) await assertBuildEgressEnforceable(engine, network);
  const dockerfileRoot = ours ? packageRoot() : resolve(options.dockerfileRoot ?? repoDir);
  // A repo's own recipe may name its base (`ARG BASE_IMAGE=...`): that default holds unless
  // the catalog chose one (sandbox.baseImage), rather than being replaced by the Node base.
  const declared =
    options.baseImage === undefined && !ours ? await declaredBase(dockerfileRoot, dockerfile) : undefined;
  const baseImage = options.baseImage ?? declared?.value ?? DEFAULT_BASE_IMAGE;
  const baseId = declared
    ? await ensureDeclaredBase(engine, declared, dockerfile, network, options.onProgress)
    : await ensureBase(engine, baseImage, options.onProgress);
  // Only the catalog's arguments and the base: nothing of the host environment.
  const buildArgs = { BASE_IMAGE: baseImage, ...options.buildArgs };
  const context = await scanBuildContext({
    contextDir: repoDir,
    dockerfile,
    dockerfileRoot,
    buildArgs,
    ...(options.excludes ? { extraExcludes: options.excludes } : {}),
    hashInputs: {
      // A rebuilt base (same tag, new id) must not be hidden behind an old repo image.
      baseImageId: baseId,
      // The same files built with network may have installed something else.
      buildNetwork: network
        ? 'default'
        : options.buildEgress
          ? buildEgressHashInput(options.buildEgress)
          : 'none',
    },
    ...(options.onWarning ? { onWarning: options.onWarning } : {}),
  });
  if (ours) await assertDependenciesCanArrive(repoDir, context);
  if (!network) {
    // With egress the steps may download through the proxy; the daemon's own fetches may not.
    if (ours && !options.buildEgress) await assertOfflineRecipeCanWork(repoDir, baseImage, context);
    else await assertNothingToFetch(engine, dockerfile, context, buildArgs);
  }
  const tag = repoImageTag(repoDir, context.contentHash, options.name);
  // The base the final stage really starts from (a recipe may ignore BASE_IMAGE altogether).
  // Only a name (a FROM the simple reading cannot resolve is not recorded as one).
  const final = finalBaseImage(context.dockerfileBytes.toString('utf8'), buildArgs);
  const usedBase = final !== undefined && imageRefProblem(final) === undefined ? final : baseImage;
  const key = `${engine.where ?? ''}|${tag}|${options.rebuild === true}`;
  let pending = pendingRepo.get(key);
  if (!pending) {
    pending = buildOrReuse(engine, context, {
      ...options,
      repoDir,
      dockerfile,
      baseImage: usedBase,
      buildArgs,
      tag,
      network,
    }).finally(() => pendingRepo.delete(key));
    pendingRepo.set(key, pending);
  }
  return pending;
}

async function buildOrReuse(
  engine: DockerEngine,
  context: BuildContext,
  options: BuildRepoImageOptions & {
    repoDir: string;
    dockerfile: string;
    baseImage: string;
    buildArgs: Record<string, string>;
    tag: string;
    network: boolean;
  },
): Promise<BuiltRepoImage> {
  const common = {
    tag: options.tag,
    contentHash: context.contentHash,
    hostFiles: context.snapshot,
    dockerfile: options.dockerfile,
    baseImage: options.baseImage,
    buildNetwork: options.network,
    warnings: context.warnings,
  };
  if (!options.rebuild) {
    const existing = await engine.images.inspect(options.tag);
    if (existing && existing.labels[CONTENT_HASH_LABEL] === context.contentHash) {
      return { ...common, imageId: existing.id, reused: true };
    }
  }
  const logPath =
    options.logFile ??
    join(
      await logsDir(),
      `build-${repoSlug(options.repoDir, options.name)}-${context.contentHash.slice(0, 16)}.log`,
    );
  const log = new LogFile(logPath);
  log.line(
    `# ${new Date().toISOString()} building ${options.tag} from ${options.repoDir} with ${options.dockerfile}, ${options.network ? 'with network (sandbox.build.network)' : options.buildEgress ? `with egress by name to ${options.buildEgress.allow.map((r) => `${r.host}:${r.ports.join(',')}`).join(' ') || 'nothing'} (sandbox.egress phase build)` : 'without network'}`,
  );
  const build = (egress?: { networkMode: string; buildArgs: Record<string, string> }) =>
    runBuild(engine, context, {
      tag: options.tag,
      buildArgs: { ...options.buildArgs, ...egress?.buildArgs },
      labels: {
        [LABEL.marker]: '1',
        [LABEL.kind]: 'repo',
        [CONTENT_HASH_LABEL]: context.contentHash,
        // The name in the tag, never a host path: an image is shared by every checkout
        // with the same content, and travels to other engines.
        [REPO_LABEL]: repoSlug(options.repoDir, options.name),
        [BUILD_NETWORK_LABEL]: options.network ? 'default' : options.buildEgress ? 'egress' : 'none',
      },
      noCache: options.rebuild === true,
      onLine: options.onProgress,
      log,
      recipe: options.dockerfile,
      baseImage: options.baseImage,
      ...(options.network
        ? {}
        : egress
          ? {
              networkMode: egress.networkMode,
              failureNote:
                "The build's steps reached only the names of sandbox.egress.allow, through a proxy: the log's `# egress denied` lines say what else a step asked for.",
            }
          : {
              networkMode: 'none',
              failureNote:
                'The build had no network (the default): a step that downloads something fails. Bring what it needs with the repo, or let builds use the network with `sandbox.build: { network: true }` in the catalog.',
            }),
      signal: options.signal,
    });
  try {
    const imageId = options.buildEgress
      ? await withBuildEgress(
          engine,
          options.buildEgress,
          (line) => {
            log.line(line);
            options.onProgress?.(line);
          },
          build,
        )
      : await build();
    return { ...common, imageId, reused: false, logFile: logPath };
  } finally {
    await log.close();
  }
}

/** The `ARG BASE_IMAGE=<default>` of a recipe, read without following a link out of its folder. */
async function declaredBase(
  root: string,
  dockerfile: string,
): Promise<{ value: string; line: number } | undefined> {
  const text = await readRepoFile(root, relative(root, dockerfile), 'Dockerfile', {
    rootName: 'its folder',
    error: (message, hint) => new BuildRefused(message, { hint }),
  });
  const declared = argDefault(text.toString('utf8'), 'BASE_IMAGE');
  // A repo's recipe is the repo's word: its base is parsed as a name before the engine hears it.
  if (declared)
    imageRef(declared.value, `${dockerfile}:${declared.line}: the recipe's ARG BASE_IMAGE default`);
  return declared;
}

/**
 * The base a repo's recipe declares. Ours are made as usual; any other must be on the engine,
 * or be pulled when the catalog lets builds use the network: a repo does not get to make the
 * daemon download an image the catalog never named.
 */
async function ensureDeclaredBase(
  engine: DockerEngine,
  declared: { value: string; line: number },
  dockerfile: string,
  network: boolean,
  onLine?: (line: string) => void,
): Promise<string> {
  const ref = declared.value;
  const ours = Object.values(BASE_IMAGES).some((b) => b.tag === ref);
  if (ours || network) return ensureBase(engine, ref, onLine);
  const existing = await engine.images.inspect(ref);
  if (existing) return existing.id;
  throw new BuildRefused(
    `${dockerfile}:${declared.line}: the recipe's base image ${ref} (its ARG BASE_IMAGE default) is not on this engine${engine.where ? ` (${engine.where})` : ''}, and image builds have no network to pull it`,
    {
      hint: `Make ${ref} available first (\`docker pull ${ref}\`, or \`sandbox-harness images ensure node|python\` for the harness's own bases), set sandbox.baseImage in the catalog to an image that is here, or let builds use the network with \`sandbox.build: { network: true }\`.`,
      details: { baseImage: ref },
    },
  );
}

/** Makes sure the base image exists (bootstrapping ours when needed); returns its id. */
async function ensureBase(
  engine: DockerEngine,
  ref: string,
  onLine?: (line: string) => void,
): Promise<string> {
  const existing = await engine.images.inspect(ref);
  if (existing) return existing.id;
  const ours = Object.values(BASE_IMAGES).find((b) => b.tag === ref);
  if (ours) return (await ensureBaseImage(ours.kind, { onLine, engine })).imageId;
  const reason = await pullWithIdleTimeout(engine, ref, onLine, 30_000, undefined);
  const pulled = reason === undefined ? await engine.images.inspect(ref) : undefined;
  if (pulled) return pulled.id;
  throw new ImageError(
    `base image ${ref} does not exist here and cannot be pulled${reason ? ` (${reason})` : ''}`,
    {
      hint: `Check the image name, or make it available first (\`docker pull ${ref}\`, or \`sandbox-harness images ensure node\` for the harness's own base).`,
    },
  );
}
