/**
 * The harness's own base images on an engine: the tag reused, or the registry image pulled
 * and the recipe built on it, or (no registry, or `offline`) a Debian root filesystem
 * bootstrapped with mmdebstrap and the recipe built on that.
 */
import { join } from 'node:path';
import { ImageError } from '../../../errors.js';
import { withFileLock } from '../../../image-context/build-lock.js';
import { scanBuildContext } from '../../../image-context/build-context.js';
import { packageRoot } from '../../../package-root.js';
import { dockerEngine, type DockerEngine } from '../engine/index.js';
import { BUILT_FROM_LABEL, ORIGIN_LABEL } from '../labels.js';
import { BASE_IMAGES, type BaseImageSpec, type BaseKind } from './base-images.js';
import { LogFile, logsDir, timestampForFile } from './build-log.js';
import { runBuild } from './image-build.js';
import { tryPull } from './image-pull.js';
import { bootstrapRootfs, ensureMmdebstrap } from './rootfs-bootstrap.js';

export interface EnsureBaseImageOptions {
  /** Progress and notes (one line each). Nothing is written when the image already exists. */
  onLine?: ((line: string) => void) | undefined;
  /** Skip the registry and bootstrap from Debian packages. */
  offline?: boolean | undefined;
  /** Rebuild even when the tag exists. */
  force?: boolean | undefined;
  /** A pull that shows no progress for this long is given up (default 30 s). */
  pullIdleTimeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  engine?: DockerEngine | undefined;
}

export interface EnsureBaseImageResult {
  kind: BaseKind;
  tag: string;
  imageId: string;
  source: 'existing' | 'pulled' | 'bootstrapped';
  /** What the recipe was built on (registry image or imported rootfs); absent when reused. */
  builtFrom?: string;
  logFile?: string;
}

const pendingBase = new Map<string, Promise<EnsureBaseImageResult>>();

/**
 * Makes sure `sandbox-harness/base-<kind>` exists: reuses the tag, or pulls the registry
 * image and builds the recipe on it, or (no registry, or `offline`) bootstraps a Debian
 * root filesystem with mmdebstrap and builds the recipe on that.
 */
export function ensureBaseImage(
  kind: BaseKind,
  options: EnsureBaseImageOptions = {},
): Promise<EnsureBaseImageResult> {
  // Per engine: the same base image on two engines of a fleet is two jobs, not one.
  const key = `${(options.engine ?? dockerEngine()).where ?? ''}|${kind}|${options.force === true}|${options.offline === true}`;
  let pending = pendingBase.get(key);
  if (!pending) {
    pending = ensureBaseImageOnce(kind, options).finally(() => pendingBase.delete(key));
    pendingBase.set(key, pending);
  }
  return pending;
}

async function ensureBaseImageOnce(
  kind: BaseKind,
  options: EnsureBaseImageOptions,
): Promise<EnsureBaseImageResult> {
  const engine = options.engine ?? dockerEngine();
  const spec = BASE_IMAGES[kind];
  const say = options.onLine ?? (() => undefined);
  if (!options.force) {
    const existing = await engine.images.inspect(spec.tag);
    if (existing) return { kind, tag: spec.tag, imageId: existing.id, source: 'existing' };
  }
  return withFileLock(`base-${kind}`, say, async () => {
    // Another process may have built it while we waited for the lock.
    if (!options.force) {
      const existing = await engine.images.inspect(spec.tag);
      if (existing) return { kind, tag: spec.tag, imageId: existing.id, source: 'existing' as const };
    }
    const log = new LogFile(join(await logsDir(), `base-${kind}-${timestampForFile()}.log`));
    const both = (line: string) => {
      log.line(line);
      say(line);
    };
    try {
      if (!options.offline) {
        const pulled = await tryPull(
          engine,
          spec.registryImage,
          both,
          options.pullIdleTimeoutMs ?? 30_000,
          options.signal,
        );
        if (pulled) {
          try {
            const imageId = await buildRecipe(
              engine,
              spec,
              spec.registryImage,
              'pulled',
              log,
              say,
              options.force === true,
            );
            both(`${spec.tag}: pulled ${spec.registryImage} and built the recipe on it`);
            return {
              kind,
              tag: spec.tag,
              imageId,
              source: 'pulled' as const,
              builtFrom: spec.registryImage,
              logFile: log.path,
            };
          } catch (error) {
            if (!(error instanceof ImageError)) throw error;
            both(
              `building the recipe on ${spec.registryImage} failed; falling back to the offline bootstrap`,
            );
            both(error.message);
          }
        }
      }
      both(
        `${spec.tag}: bootstrapping offline from Debian ${spec.rootfs.suite} packages (mmdebstrap, about a minute or two)`,
      );
      // One apt-get at a time: two bases bootstrapping side by side (setup.sh makes node and
      // python together, an eval may need both) would both install mmdebstrap, and dpkg's
      // lock fails the second.
      await withFileLock(
        'mmdebstrap-install',
        say,
        () => ensureMmdebstrap({ onLine: both, signal: options.signal }),
        { waiting: 'waiting for another process, which is installing mmdebstrap' },
      );
      const rootfs = await bootstrapRootfs(
        engine,
        { ...spec.rootfs, purpose: kind },
        { onLine: say, log, signal: options.signal },
      );
      const imageId = await buildRecipe(
        engine,
        spec,
        rootfs,
        'bootstrapped',
        log,
        say,
        options.force === true,
      );
      both(`${spec.tag}: bootstrapped offline from Debian ${spec.rootfs.suite} packages`);
      return {
        kind,
        tag: spec.tag,
        imageId,
        source: 'bootstrapped' as const,
        builtFrom: rootfs,
        logFile: log.path,
      };
    } finally {
      await log.close();
    }
  });
}

async function buildRecipe(
  engine: DockerEngine,
  spec: BaseImageSpec,
  from: string,
  origin: 'pulled' | 'bootstrapped',
  log: LogFile,
  say: (line: string) => void,
  noCache: boolean,
): Promise<string> {
  const recipeDir = join(packageRoot(), spec.recipe);
  const buildArgs = { BASE: from };
  const context = await scanBuildContext({
    contextDir: recipeDir,
    dockerfile: join(recipeDir, 'Dockerfile'),
    buildArgs,
  });
  say(`building ${spec.tag} from ${spec.recipe}/Dockerfile on ${from}`);
  return runBuild(engine, context, {
    // The bootstrapped root filesystem already holds every package the recipe checks for;
    // only the registry image may need apt-get, from the harness's own trusted recipe.
    ...(origin === 'bootstrapped' ? { networkMode: 'none' as const } : {}),
    tag: spec.tag,
    buildArgs,
    // The recipe labels itself (marker, kind, base); the legacy builder turns every label
    // given here into a build step of its own, so only what the recipe cannot know goes here.
    labels: { [ORIGIN_LABEL]: origin, [BUILT_FROM_LABEL]: from },
    noCache,
    onLine: (line) => say(line),
    log,
    recipe: `${spec.recipe}/Dockerfile`,
    baseImage: from,
  });
}
