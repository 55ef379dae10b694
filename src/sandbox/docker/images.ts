/**
 * Images: the base images (registry image + recipe, or an offline bootstrap + recipe) and
 * the per-repo sandbox images, named by a content hash so an unchanged repo reuses its
 * image without a build.
 */
import { lstat } from 'node:fs/promises';
import { basename, join, relative, resolve } from 'node:path';
import { HarnessError, BuildRefused, ImageError, Interrupted, SandboxUnavailable } from '../../errors.js';
import { bootstrapRootfs, ensureMmdebstrap, LogFile, logsDir, timestampForFile } from './bootstrap.js';
import { withFileLock } from '../../image-context/build-lock.js';
import { scanBuildContext, type BuildContext } from '../../image-context/build-context.js';
import { argDefault, daemonFetches, finalBaseImage } from '../../image-context/dockerfile.js';
import { readRepoFile } from '../../repo-files.js';
import { formatDuration } from '../../format.js';
import { dockerEngine, statusOf, type DockerEngine } from './engine.js';
import { LABEL } from './labels.js';
import { BASE_IMAGES, DEFAULT_BASE_IMAGE, type BaseImageSpec, type BaseKind } from './base-images.js';
import { packageRoot } from '../../package-root.js';
import type { BuiltRepoImage, RepoImageRequest } from '../../image-context/request.js';
export type { BuiltRepoImage } from '../../image-context/request.js';
import { assertBuildEgressEnforceable, buildEgressHashInput, withBuildEgress } from './build-egress.js';

export const CONTENT_HASH_LABEL = 'sandbox-harness.content-hash';
export const REPO_LABEL = 'sandbox-harness.repo';
export const BASE_LABEL = 'sandbox-harness.base';
export const ORIGIN_LABEL = 'sandbox-harness.origin';
export const BUILT_FROM_LABEL = 'sandbox-harness.built-from';
/** `none` or `default`: whether the build steps of a repo image had network. */
export const BUILD_NETWORK_LABEL = 'sandbox-harness.build-network';

export {
  BASE_IMAGES,
  DEFAULT_BASE_IMAGE,
  isBaseKind,
  type BaseImageSpec,
  type BaseKind,
} from './base-images.js';
export { packageRoot } from '../../package-root.js';

// ---- building --------------------------------------------------------------------------

/** Keeps the current `Step N/M : ...` line and the output since, to explain a failure. */
class StepTracker {
  step: string | undefined;
  private lines: string[] = [];

  push(line: string): void {
    if (/^Step \d+\/\d+ : /.test(line)) {
      this.step = line;
      this.lines = [];
      return;
    }
    // Builder chatter, not output of the step.
    if (/^ ---> |^Removing intermediate container /.test(line)) return;
    this.lines.push(line);
    if (this.lines.length > 200) this.lines.shift();
  }

  lastLines(count: number): string[] {
    return this.lines.slice(-count);
  }
}

function shorten(text: string, max = 200): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

interface RunBuildOptions {
  tag: string;
  buildArgs: Record<string, string>;
  labels: Record<string, string>;
  noCache: boolean;
  onLine?: (line: string) => void;
  log: LogFile;
  /** For the hint: which recipe failed (`/repo/Dockerfile.sandbox`, `images/node/Dockerfile`). */
  recipe: string;
  /**
   * `none`: build steps have no network (resolving a name fails at once); a network's name:
   * the build's egress network. Default: the daemon's.
   */
  networkMode?: string;
  /** Added to the hint of a failed build (what else could be wrong). */
  failureNote?: string;
  /** The base image the build starts from, named in every failure ("pip: not found" on which base?). */
  baseImage?: string;
  signal?: AbortSignal;
}

async function runBuild(
  engine: DockerEngine,
  context: BuildContext,
  options: RunBuildOptions,
): Promise<string> {
  const tracker = new StepTracker();
  const { stream, done } = context.createTar();
  let imageId: string;
  try {
    imageId = await engine.buildImage(stream, {
      tag: options.tag,
      dockerfile: context.dockerfileInContext,
      buildArgs: options.buildArgs,
      labels: options.labels,
      noCache: options.noCache,
      ...(options.networkMode ? { networkMode: options.networkMode } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      onLine: (line) => {
        tracker.push(line);
        options.log.line(line);
        options.onLine?.(line);
      },
    });
  } catch (error) {
    // Ctrl-C (the engine reports it as Interrupted) is not the recipe's fault.
    if (error instanceof Interrupted) throw error;
    const tarError = await done.then(
      () => undefined,
      (e: unknown) => e,
    );
    if (tarError) throw tarError;
    // An unreachable daemon is not the recipe's fault; a refusal the daemon answered is.
    if (error instanceof SandboxUnavailable && statusOf(error.cause) === undefined) throw error;
    const reason = (error instanceof Error ? error.message : String(error))
      .replace(/^building \S+: /, '')
      .replace(/^\(HTTP code \d+\) [\w ]+ - /, '')
      // The step line above already shows the command; the legacy builder repeats it in full.
      .replace(
        /^The command '[\s\S]*' returned a non-zero code: (\d+)$/,
        'the command of that step exited with code $1',
      );
    options.log.line(`error: ${reason}`);
    const last = tracker
      .lastLines(21)
      .filter(
        (l) => !/^The command '[\s\S]*' returned a non-zero code: \d+$/.test(l) && l.trim() !== reason.trim(),
      )
      .slice(-20);
    throw new ImageError(
      [
        `building ${options.tag}${options.baseImage ? ` on ${options.baseImage}` : ''} failed at ${tracker.step ? shorten(tracker.step) : 'the start (before the first step)'}`,
        `  ${reason}`,
        ...(last.length ? ['last output lines:', ...last.map((l) => `  | ${shorten(l, 300)}`)] : []),
        `full log: ${options.log.path}`,
      ].join('\n'),
      {
        hint: `Fix ${options.recipe} (or what that step needs), then run again; the full build log is ${options.log.path}.${options.baseImage && options.labels[LABEL.kind] === 'repo' ? ` The build ran on ${options.baseImage}: if the step needs another toolchain, choose the base with sandbox.baseImage in the catalog (or the recipe's ARG BASE_IMAGE default).` : ''}${options.failureNote ? ` ${options.failureNote}` : ''}`,
        cause: error,
        details: {
          step: tracker.step,
          lastLines: last,
          logFile: options.log.path,
          ...(options.baseImage ? { baseImage: options.baseImage } : {}),
        },
      },
    );
  }
  // The daemon should refuse a cut-off context; if it did not, the image is not trusted.
  const tarError = await done.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (tarError) {
    await engine.removeImage(imageId).catch(() => undefined);
    throw tarError;
  }
  return imageId;
}

// ---- base images -----------------------------------------------------------------------

export interface EnsureBaseImageOptions {
  /** Progress and notes (one line each). Nothing is written when the image already exists. */
  onLine?: (line: string) => void;
  /** Skip the registry and bootstrap from Debian packages. */
  offline?: boolean;
  /** Rebuild even when the tag exists. */
  force?: boolean;
  /** A pull that shows no progress for this long is given up (default 30 s). */
  pullIdleTimeoutMs?: number;
  signal?: AbortSignal;
  engine?: DockerEngine;
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
    const existing = await engine.inspectImage(spec.tag);
    if (existing) return { kind, tag: spec.tag, imageId: existing.id, source: 'existing' };
  }
  return withFileLock(`base-${kind}`, say, async () => {
    // Another process may have built it while we waited for the lock.
    if (!options.force) {
      const existing = await engine.inspectImage(spec.tag);
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

async function tryPull(
  engine: DockerEngine,
  ref: string,
  say: (line: string) => void,
  idleMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  say(`pulling ${ref}`);
  const failure = await pullWithIdleTimeout(engine, ref, say, idleMs, signal);
  if (failure === undefined) return true;
  say(`cannot pull ${ref}: ${failure}`);
  return false;
}

/**
 * Pulls `ref`; resolves with undefined on success or the reason it failed. A pull that
 * shows no progress for `idleMs` is given up: a black-holed registry must not hang set-up.
 */
async function pullWithIdleTimeout(
  engine: DockerEngine,
  ref: string,
  onLine: ((line: string) => void) | undefined,
  idleMs: number,
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  const controller = new AbortController();
  const abortFromCaller = () => controller.abort();
  signal?.addEventListener('abort', abortFromCaller, { once: true });
  let timer = setTimeout(() => controller.abort(), idleMs);
  const bump = () => {
    clearTimeout(timer);
    timer = setTimeout(() => controller.abort(), idleMs);
  };
  // Aborting the request may not end the progress stream it already returned; this ends the wait.
  const aborted = new Promise<never>((_, reject) => {
    controller.signal.addEventListener('abort', () => reject(new ImageError(`no progress pulling ${ref}`)), {
      once: true,
    });
  });
  aborted.catch(() => undefined);
  try {
    await Promise.race([
      engine.pullImage(
        ref,
        (line) => {
          bump();
          onLine?.(line);
        },
        { signal: controller.signal },
      ),
      aborted,
    ]);
    return undefined;
  } catch (error) {
    if (signal?.aborted) throw new Interrupted(`pulling ${ref}: interrupted`);
    if (error instanceof HarnessError && !(error instanceof ImageError)) throw error;
    if (controller.signal.aborted) return `no progress for ${formatDuration(idleMs)}`;
    return ((error as Error).message.split('\n')[0] ?? '').replace(/^cannot pull \S+: /, '');
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', abortFromCaller);
  }
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

// ---- repo images -----------------------------------------------------------------------

/** A repo image request as the Docker backend takes it: the one request, on one engine. */
export interface BuildRepoImageOptions extends Omit<RepoImageRequest, 'prebuilt'> {
  engine?: DockerEngine;
}

/**
 * The name a repo image goes by: the service's (`name`, the catalog's), else the repo's folder.
 * Docker repository names allow lowercase letters, digits and separators only.
 */
export function repoSlug(repoDir: string, name?: string): string {
  const slug = (name ?? basename(resolve(repoDir)))
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
    .replace(/-+$/g, '');
  return slug || 'repo';
}

export function repoImageTag(repoDir: string, contentHash: string, name?: string): string {
  return `sandbox-harness/repo-${repoSlug(repoDir, name)}:${contentHash.slice(0, 16)}`;
}

/** The harness's own per-project recipe, used when a repo has no Dockerfile.sandbox. */
export function defaultRecipe(): string {
  return join(packageRoot(), 'Dockerfile.sandbox');
}

export async function resolveDockerfile(
  repoDir: string,
  dockerfile?: string,
  root?: string,
): Promise<string> {
  if (dockerfile) return resolve(root ?? repoDir, dockerfile);
  const own = join(repoDir, 'Dockerfile.sandbox');
  const st = await lstat(own).catch(() => undefined);
  if (st && (st.isFile() || st.isSymbolicLink())) return own;
  return defaultRecipe();
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
    extraExcludes: options.excludes,
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
    onWarning: options.onWarning,
  });
  if (ours) await assertDependenciesCanArrive(repoDir, context);
  if (!network) {
    // With egress the steps may download through the proxy; the daemon's own fetches may not.
    if (ours && !options.buildEgress) assertOfflineRecipeCanWork(repoDir, baseImage, context);
    else await assertNothingToFetch(engine, dockerfile, context, buildArgs);
  }
  const tag = repoImageTag(repoDir, context.contentHash, options.name);
  // The base the final stage really starts from (a recipe may ignore BASE_IMAGE altogether).
  const usedBase = finalBaseImage(context.dockerfileBytes.toString('utf8'), buildArgs) ?? baseImage;
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
    const existing = await engine.inspectImage(options.tag);
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
      ...(options.signal ? { signal: options.signal } : {}),
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

/**
 * The default recipe installs dependencies only when the repo did not bring them. Without
 * network that install cannot work, so say what to do before a build that must fail.
 */
function assertOfflineRecipeCanWork(repoDir: string, baseImage: string, context: BuildContext): void {
  const has = (path: string) => context.snapshot.has(path);
  const lockfile = ['package-lock.json', 'npm-shrinkwrap.json'].find(has);
  const nodeModules = context.directories.includes('node_modules');
  const optIn = 'or let image builds use the network with `sandbox.build: { network: true }` in the catalog';
  if (lockfile && !nodeModules) {
    throw new BuildRefused(
      `the default sandbox recipe would run \`npm ci\` for ${repoDir} (it has ${lockfile} but no node_modules in the build context), and image builds have no network`,
      {
        hint: `Run \`npm ci\` in ${repoDir} on the host so node_modules is copied into the image (if it exists, .dockerignore or sandbox.build.exclude leaves it out), ${optIn}.`,
      },
    );
  }
  // Only the python base has pip; on any other the recipe skips requirements.txt.
  if (baseImage === BASE_IMAGES.python.tag && has('requirements.txt')) {
    throw new BuildRefused(
      `the default sandbox recipe would run \`pip install -r requirements.txt\` for ${repoDir}, and image builds have no network`,
      {
        hint: `Write a Dockerfile.sandbox for the repo that brings the packages along (for example wheels in the repo and \`pip install --no-index --find-links\`), ${optIn}.`,
      },
    );
  }
}

/** Lockfiles of the package managers the default recipe never runs (the base has npm only). */
const OTHER_LOCKFILES: readonly (readonly [file: string, install: string])[] = [
  ['pnpm-lock.yaml', 'pnpm install'],
  ['yarn.lock', 'yarn install'],
  ['bun.lock', 'bun install'],
  ['bun.lockb', 'bun install'],
];

/**
 * The default recipe installs with npm, from package-lock.json only. A pnpm, yarn or bun repo
 * whose node_modules is not in the build context would get a sandbox without any of its
 * dependencies, and every test command would then fail as if the code were wrong.
 */
async function assertDependenciesCanArrive(repoDir: string, context: BuildContext): Promise<void> {
  const has = (path: string) => context.snapshot.has(path);
  if (has('package-lock.json') || has('npm-shrinkwrap.json')) return;
  if (context.directories.includes('node_modules')) return;
  const other = OTHER_LOCKFILES.find(([file]) => has(file));
  if (!other || !(await declaresDependencies(repoDir))) return;
  const [file, install] = other;
  throw new BuildRefused(
    `${repoDir} has ${file} but no node_modules in the build context, and the default sandbox recipe installs only with npm (from package-lock.json): the sandbox would have none of package.json's dependencies`,
    {
      hint: `Run \`${install}\` in ${repoDir} on the host so node_modules is copied into the image (if it exists, .dockerignore or sandbox.build.exclude leaves it out), or write a Dockerfile.sandbox for the repo that brings them.`,
      details: { lockfile: file },
    },
  );
}

/** package.json names a dependency; unreadable or not JSON counts as no (nothing is refused on a guess). */
async function declaresDependencies(repoDir: string): Promise<boolean> {
  try {
    const text = await readRepoFile(repoDir, 'package.json', 'package.json', { optional: true });
    if (!text) return false;
    const manifest: unknown = JSON.parse(text.toString('utf8'));
    if (typeof manifest !== 'object' || manifest === null) return false;
    return ['dependencies', 'devDependencies', 'optionalDependencies'].some((key) => {
      const value: unknown = (manifest as Record<string, unknown>)[key];
      return typeof value === 'object' && value !== null && Object.keys(value).length > 0;
    });
  } catch {
    return false;
  }
}

/**
 * Network none only applies to the build steps' containers: the daemon itself downloads
 * `ADD <url>` sources and pulls missing `FROM` / `COPY --from` images over the host's
 * network. A build without network must need neither.
 */
async function assertNothingToFetch(
  engine: DockerEngine,
  dockerfile: string,
  context: BuildContext,
  buildArgs: Record<string, string>,
): Promise<void> {
  const optIn = 'or let image builds use the network with `sandbox.build: { network: true }` in the catalog';
  for (const fetch of daemonFetches(context.dockerfileBytes.toString('utf8'), buildArgs)) {
    const where = `${dockerfile}:${fetch.line}: ${fetch.instruction}`;
    if (fetch.kind === 'add-url') {
      throw new BuildRefused(
        `${where}\n  ADD of ${fetch.ref} is downloaded by the Docker daemon over the host's network, and this build has no network`,
        { hint: `Bring the file with the repo and COPY it, ${optIn}.` },
      );
    }
    if (!(await engine.inspectImage(fetch.ref))) {
      throw new BuildRefused(
        `${where}\n  the image ${fetch.ref} is not on this engine, so the daemon would pull it over the host's network, and this build has no network`,
        {
          hint: `Pull it first (\`docker pull ${fetch.ref}\`), build on the harness's base image (the BASE_IMAGE build argument), ${optIn}.`,
        },
      );
    }
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
  return argDefault(text.toString('utf8'), 'BASE_IMAGE');
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
  const existing = await engine.inspectImage(ref);
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
  const existing = await engine.inspectImage(ref);
  if (existing) return existing.id;
  const ours = Object.values(BASE_IMAGES).find((b) => b.tag === ref);
  if (ours) return (await ensureBaseImage(ours.kind, { onLine, engine })).imageId;
  const reason = await pullWithIdleTimeout(engine, ref, onLine, 30_000, undefined);
  const pulled = reason === undefined ? await engine.inspectImage(ref) : undefined;
  if (pulled) return pulled.id;
  throw new ImageError(
    `base image ${ref} does not exist here and cannot be pulled${reason ? ` (${reason})` : ''}`,
    {
      hint: `Check the image name, or make it available first (\`docker pull ${ref}\`, or \`sandbox-harness images ensure node\` for the harness's own base).`,
    },
  );
}

// ---- listing ---------------------------------------------------------------------------

export interface HarnessImage {
  id: string;
  tags: string[];
  kind: string;
  createdAt: Date;
  sizeBytes: number;
  labels: Record<string, string>;
}

/** Every image this harness made (base, rootfs and repo images), newest first. */
export async function listHarnessImages(engine: DockerEngine = dockerEngine()): Promise<HarnessImage[]> {
  const images = await engine.listImages({ [LABEL.kind]: true });
  return images
    .map((i) => ({
      id: i.id,
      tags: i.tags.filter((t) => t !== '<none>:<none>'),
      kind: i.labels[LABEL.kind] ?? '',
      createdAt: i.createdAt,
      sizeBytes: i.sizeBytes,
      labels: i.labels,
    }))
    .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
}

/** Which of the harness's base images are present locally. */
export async function baseImageStatus(
  engine: DockerEngine = dockerEngine(),
): Promise<Array<{ kind: BaseKind; tag: string; present: boolean; imageId?: string; origin?: string }>> {
  const result: Array<{ kind: BaseKind; tag: string; present: boolean; imageId?: string; origin?: string }> =
    [];
  for (const spec of Object.values(BASE_IMAGES)) {
    const image = await engine.inspectImage(spec.tag);
    result.push(
      image
        ? {
            kind: spec.kind,
            tag: spec.tag,
            present: true,
            imageId: image.id,
            origin: image.labels[ORIGIN_LABEL],
          }
        : { kind: spec.kind, tag: spec.tag, present: false },
    );
  }
  return result;
}
