/**
 * `images ensure | bootstrap | list`: the base images sandboxes build on, and what this
 * tool has in the engine. Docker only: another backend gets its images another way (a
 * registry), so this reaches the Docker backend through `dockerOnly()` of the registry. Each command is a typed function returning its result; the
 * `*Command` wrappers print it and return the exit code.
 */
import { UsageError } from '../../errors.js';
import {
  BASE_IMAGES,
  dockerOnly,
  isBaseKind,
  type BaseKind,
  type EnsureBaseImageResult,
  type HarnessImage,
} from '../../sandbox/registry.js';
import { print, printJson, type CliContext } from '../context.js';
import { alignColumns, formatBytes } from '../format.js';
import { terminalProgress } from '../progress-line.js';

export interface ImagesEnsureOptions {
  kind: BaseKind;
  /** Skip the registry; bootstrap from Debian packages. */
  offline?: boolean;
  /** Rebuild even when the image exists. */
  force?: boolean;
  /** No progress output (for --json). */
  quiet?: boolean;
}

export interface ImagesCommandFlags {
  json?: boolean;
  force?: boolean;
  offline?: boolean;
}

export function parseBaseKind(kind: string | undefined): BaseKind {
  const value = kind ?? 'node';
  if (!isBaseKind(value)) {
    throw new UsageError(
      `unknown base image kind "${value}": expected ${Object.keys(BASE_IMAGES).join(' or ')}`,
    );
  }
  return value;
}

export function describeEnsureResult(result: EnsureBaseImageResult): string {
  switch (result.source) {
    case 'existing':
      return `base image ${result.tag} is present (${result.imageId.slice(7, 19)})`;
    case 'pulled':
      return `base image ${result.tag} ready: pulled ${result.builtFrom ?? BASE_IMAGES[result.kind].registryImage} and built the recipe on it`;
    case 'bootstrapped':
      return `base image ${result.tag} ready: bootstrapped offline from Debian ${BASE_IMAGES[result.kind].rootfs.suite} packages`;
  }
}

/** Makes sure a base image exists: reuse, pull + recipe, or offline bootstrap + recipe. */
export async function imagesEnsure(
  ctx: CliContext,
  options: ImagesEnsureOptions,
): Promise<EnsureBaseImageResult> {
  const progress = options.quiet ? undefined : terminalProgress(ctx.stderr, ctx.isTTY);
  let started = false;
  const result = await (
    await dockerOnly()
  ).ensureBaseImage(options.kind, {
    offline: options.offline ?? false,
    force: options.force ?? false,
    signal: ctx.signal,
    onLine: (line) => {
      if (!progress) return;
      if (!started) {
        progress.phase('image', `base image ${BASE_IMAGES[options.kind].tag}`);
        started = true;
      }
      progress.detail(line.slice(0, 160));
    },
  });
  if (started) progress?.end(result.source === 'existing' ? 'present' : result.source);
  if (result.logFile && !options.quiet) ctx.stderr.write(`log: ${result.logFile}\n`);
  return result;
}

/** Builds a base image offline from Debian packages (reuses an existing one unless `force`). */
export function imagesBootstrap(
  ctx: CliContext,
  options: Omit<ImagesEnsureOptions, 'offline'>,
): Promise<EnsureBaseImageResult> {
  return imagesEnsure(ctx, { ...options, offline: true });
}

export async function imagesList(): Promise<{ images: HarnessImage[] }> {
  return { images: await (await dockerOnly()).listHarnessImages() };
}

// ---- wiring-facing wrappers (exit codes) -----------------------------------------------

export async function imagesEnsureCommand(
  ctx: CliContext,
  kind: string | undefined,
  flags: ImagesCommandFlags = {},
): Promise<number> {
  const result = await imagesEnsure(ctx, {
    kind: parseBaseKind(kind),
    offline: flags.offline === true,
    force: flags.force === true,
    quiet: flags.json === true,
  });
  if (flags.json) printJson(ctx, result);
  else print(ctx, describeEnsureResult(result));
  return 0;
}

export async function imagesBootstrapCommand(
  ctx: CliContext,
  kind: string | undefined,
  flags: ImagesCommandFlags = {},
): Promise<number> {
  const result = await imagesBootstrap(ctx, {
    kind: parseBaseKind(kind),
    force: flags.force === true,
    quiet: flags.json === true,
  });
  if (flags.json) printJson(ctx, result);
  else {
    print(ctx, describeEnsureResult(result));
    if (result.source === 'existing') print(ctx, 'nothing rebuilt; use --force to bootstrap it again');
  }
  return 0;
}

export async function imagesListCommand(ctx: CliContext, flags: ImagesCommandFlags = {}): Promise<number> {
  const { images } = await imagesList();
  if (flags.json) {
    printJson(ctx, { images });
    return 0;
  }
  // `images` is the Docker backend's alone: say so where its answer is read.
  print(ctx, "this tool's images in the Docker engine (`images` is for the docker backend only)");
  // Untagged ones are superseded builds and the layer cache of failed ones; not worth a row each.
  const tagged = images.filter((i) => i.tags.length > 0);
  if (tagged.length === 0) {
    print(ctx, 'no images yet: `sandbox-harness images ensure node` makes the base image');
    return 0;
  }
  const rows = tagged.map((image) => [
    image.kind,
    image.tags[0] ?? image.id.slice(7, 19),
    formatBytes(image.sizeBytes),
    image.createdAt.toISOString().slice(0, 16),
    image.kind === 'repo'
      ? (image.labels['sandbox-harness.repo'] ?? '')
      : (image.labels['sandbox-harness.origin'] ?? ''),
  ]);
  // Sizes right-aligned, so their units line up.
  for (const line of alignColumns(rows, [2])) print(ctx, line);
  const untagged = images.length - tagged.length;
  if (untagged > 0)
    print(ctx, `(${untagged} untagged: superseded builds and the layer cache of failed ones)`);
  return 0;
}
