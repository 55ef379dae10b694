/**
 * `images ensure | bootstrap | list`: the base images sandboxes build on, and what this
 * tool has in the engine. Docker only: another backend gets its images another way (a
 * registry), so this reaches the Docker backend through `dockerOnly()` of the registry. Each command is a typed function returning its result; the
 * `*Command` wrappers print it and return the exit code.
 */
import { Argument, Command } from '@commander-js/extra-typings';
import { UsageError } from '../../errors.js';
import { alignColumns, formatBytes } from '../../format.js';
import type { BaseKind, EnsureBaseImageResult, HarnessImage } from '../../sandbox/backend-registry.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, declareGroup, type OptionsOf } from '../declare-command.js';
import { terminalProgress } from '../progress-line.js';
import { everyValueOf } from '../shared-options.js';

const BASE_KINDS = everyValueOf<BaseKind>()(['node', 'python']);

export function parseBaseKind(value: string): BaseKind {
  const kind = BASE_KINDS.find((k) => k === value);
  if (kind === undefined) {
    throw new UsageError(`unknown base image kind "${value}": expected ${BASE_KINDS.join(' or ')}`);
  }
  return kind;
}

function kindArgument() {
  return new Argument('[kind]', 'node or python').default('node').argParser(parseBaseKind);
}

function ensureDeclaration() {
  return new Command('ensure')
    .description('make sure a base image exists: reuse, pull + recipe, or bootstrap offline')
    .addArgument(kindArgument())
    .option('--offline', 'do not try the registry; bootstrap from Debian packages')
    .option('--force', 'make it again even when it exists')
    .option('--json', 'JSON output');
}

function bootstrapDeclaration() {
  return new Command('bootstrap')
    .description('build a base image offline from Debian packages (mmdebstrap + docker import + recipe)')
    .addArgument(kindArgument())
    .option('--force', 'rebuild even when the image exists')
    .option('--json', 'JSON output');
}

function listDeclaration() {
  return new Command('list').description("list this tool's images").option('--json', 'JSON output');
}

export interface ImagesEnsureOptions {
  kind: BaseKind;
  /** Skip the registry; bootstrap from Debian packages. */
  offline?: boolean;
  /** Rebuild even when the image exists. */
  force?: boolean;
  /** No progress output (for --json). */
  quiet?: boolean;
}

export async function describeEnsureResult(result: EnsureBaseImageResult): Promise<string> {
  const { BASE_IMAGES } = await import('../../sandbox/backend-registry.js');
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
  const { BASE_IMAGES, dockerOnly } = await import('../../sandbox/backend-registry.js');
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

export async function imagesList(): Promise<{ images: HarnessImage[]; endpoint: string }> {
  const { dockerOnly } = await import('../../sandbox/backend-registry.js');
  const docker = await dockerOnly();
  return { images: await docker.listHarnessImages(), endpoint: docker.localEndpoint() };
}

// ---- wiring-facing wrappers (exit codes) -----------------------------------------------

export async function imagesEnsureCommand(
  ctx: CliContext,
  kind: BaseKind,
  flags: OptionsOf<typeof ensureDeclaration>,
): Promise<number> {
  const result = await imagesEnsure(ctx, {
    kind,
    offline: flags.offline === true,
    force: flags.force === true,
    quiet: flags.json === true,
  });
  if (flags.json) printJson(ctx, result);
  else print(ctx, await describeEnsureResult(result));
  return 0;
}

export async function imagesBootstrapCommand(
  ctx: CliContext,
  kind: BaseKind,
  flags: OptionsOf<typeof bootstrapDeclaration>,
): Promise<number> {
  const result = await imagesBootstrap(ctx, {
    kind,
    force: flags.force === true,
    quiet: flags.json === true,
  });
  if (flags.json) printJson(ctx, result);
  else {
    print(ctx, await describeEnsureResult(result));
    if (result.source === 'existing') print(ctx, 'nothing rebuilt; use --force to bootstrap it again');
  }
  return 0;
}

export async function imagesListCommand(
  ctx: CliContext,
  flags: OptionsOf<typeof listDeclaration>,
): Promise<number> {
  const { images, endpoint } = await imagesList();
  if (flags.json) {
    printJson(ctx, { images });
    return 0;
  }
  // `images` is the Docker backend's alone: say so where its answer is read. The engine is
  // named by its address: DOCKER_HOST may be a Podman service.
  print(ctx, `this tool's images in the engine at ${endpoint} (\`images\` is for the docker backend only)`);
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

export const images = declareGroup(
  () =>
    new Command('images').description(
      'sandbox base images (registry or offline bootstrap) and repo images (Docker backend only)',
    ),
  [
    declareCommand(ensureDeclaration, imagesEnsureCommand),
    declareCommand(bootstrapDeclaration, imagesBootstrapCommand),
    declareCommand(listDeclaration, imagesListCommand),
  ],
);
