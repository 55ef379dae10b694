/** `exec -- <command...>`: one command in a fresh sandbox built from a repo (a smoke test of the sandbox). */
import { resolve } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import type { LoadedCatalog } from '../../catalog/load.js';
import { UsageError } from '../../errors.js';
import { formatDuration } from '../../format.js';
import type { SandboxSpec } from '../../sandbox/types.js';
import { printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { positiveNumberOption } from '../option-parsers.js';
import { terminalProgress } from '../progress-line.js';
import { backendChoice, runtimeOption, withBackend } from '../shared-options.js';
import { terminalSafe } from '../terminal.js';

function declaration() {
  return withBackend(new Command('exec'))
    .description('run one command in a fresh sandbox built from a repo (a smoke test of the sandbox)')
    .argument('<command...>', 'the command; put -- before it')
    .option('--repo <dir>', 'repo to build the sandbox from (default: here)')
    .option('--image <image>', 'use this image instead of building one')
    .option(
      '-c, --catalog <file>',
      "build and run the sandbox as this catalog's agent sandbox is (recipe, base image, build options, env, limits, sandbox.egress of the agent phase; repo: the catalog's)",
    )
    .option(
      '--base-image <ref>',
      'build on this base image (e.g. sandbox-harness/base-python:3), as sandbox.baseImage would',
    )
    .option('--rebuild', 'rebuild the image')
    .addOption(positiveNumberOption('--timeout <sec>', 'command timeout in seconds', 'seconds').default(120))
    .addOption(runtimeOption())
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
Examples:
  sandbox-harness exec --repo ../my-service -- npx vitest run
  sandbox-harness exec --catalog catalog/my-service.yaml -- npm test
  sandbox-harness exec --repo ../my-py-service --base-image sandbox-harness/base-python:3 -- python -m pytest -q
(\`sandbox-harness images ensure python\` makes the Python base first.)`,
    );
}

export type ExecCommandOptions = OptionsOf<typeof declaration>;

/** Runs one command in a fresh, hardened sandbox built from a repo; the sandbox is removed afterwards. */
export async function execCommand(
  ctx: CliContext,
  command: string[],
  options: ExecCommandOptions,
): Promise<number> {
  if (command.length === 0)
    throw new UsageError('no command given', { hint: 'sandbox-harness exec -- node --version' });
  if (options.image && (options.baseImage || options.catalog)) {
    throw new UsageError(
      `--image runs an existing image as it is; ${options.baseImage ? '--base-image' : '--catalog'} only applies when the sandbox image is built`,
    );
  }
  const { loadCatalog } = await import('../../catalog/load.js');
  const { catalogImageOptions } = await import('../../fix/deps.js');
  const { withBuildTimeLimit } = await import('../../image-context/build-limit.js');
  const { sandboxProvider } = await import('../../sandbox/backend-registry.js');
  const { shellJoin } = await import('../../sandbox/shell.js');
  const { buildLines } = await import('../../fix/progress.js');
  const catalog = options.catalog
    ? await loadCatalog(resolve(ctx.cwd, options.catalog), { cwd: ctx.cwd })
    : undefined;
  if (options.baseImage && catalog?.catalog.sandbox.image) {
    throw new UsageError(
      `--base-image: the catalog ${catalog.file} runs the prebuilt image ${catalog.catalog.sandbox.image} (sandbox.image); there is nothing to build on another base`,
    );
  }
  const progress = options.json ? undefined : terminalProgress(ctx.stderr, ctx.isTTY);
  const chosen = backendChoice(options);
  const provider = await sandboxProvider(chosen.name, chosen.options);
  // A runtime the engine lacks is refused before an image is built.
  const runtime = await provider.runtime?.(options.runtime);
  let image = options.image;
  let baseImage: string | undefined;
  if (!image) {
    const repoDir = options.repo ? resolve(ctx.cwd, options.repo) : (catalog?.repoDir ?? resolve(ctx.cwd));
    progress?.phase('image', `sandbox image for ${repoDir}`);
    const built = await withBuildTimeLimit(
      {
        repoDir,
        ...(catalog ? catalogImageOptions(catalog) : {}),
        ...(options.baseImage ? { baseImage: options.baseImage } : {}),
        rebuild: options.rebuild ?? false,
        onProgress: buildLines(progress),
        signal: ctx.signal,
      },
      (request) => provider.repoImage(request),
    );
    baseImage = built.baseImage;
    progress?.end(
      `${built.tag}${built.reused ? ' (cached)' : ' (built)'}${built.baseImage ? ` on ${built.baseImage}` : ''}`,
    );
    image = built.tag;
  }
  progress?.phase('validate', `running in a sandbox: ${command.join(' ')}`);
  const spec = catalog ? await catalogSpec(catalog) : {};
  // What network it gets, said before it runs: a smoke test of egress must not guess.
  progress?.detail(egressNote(catalog, spec.egress));
  const sandbox = await provider.backend.create({
    image,
    role: 'exec',
    ...(options.runtime ? { runtime: options.runtime } : {}),
    ...spec,
  });
  try {
    // One argument is a shell command line; several are argv words, quoted for the shell.
    const line = command.length === 1 ? command[0]! : shellJoin(command);
    const result = await sandbox.exec(line, {
      timeoutMs: options.timeout * 1000,
      signal: ctx.signal,
    });
    progress?.end(
      `exit ${result.exitCode}${result.timedOut ? ' (timed out)' : ''} in ${formatDuration(result.durationMs)}`,
    );
    if (options.json) {
      const requests = sandbox.egressLog?.() ?? [];
      printJson(ctx, {
        image,
        ...(baseImage ? { baseImage } : {}),
        ...(catalog ? { catalog: catalog.file } : {}),
        container: sandbox.id,
        ...(runtime ? { runtime } : {}),
        egress: spec.egress
          ? {
              allow: spec.egress.allow.map((r) => r.host),
              allowed: requests.filter((e) => e.allowed).length,
              denied: requests.filter((e) => !e.allowed).length,
            }
          : null,
        ...result,
      });
    } else {
      if (result.stdout) ctx.stdout.write(terminalSafe(result.stdout));
      if (result.stderr) ctx.stderr.write(terminalSafe(result.stderr));
    }
    return result.exitCode === 0 ? 0 : 1;
  } finally {
    await sandbox.dispose();
  }
}

/**
 * What the agent's sandbox of a run gets from the catalog: its env, its limits, the catalog
 * itself read-only, and egress as `sandbox.egress` gives the agent phase (no more: network
 * none when the catalog has no egress or does not list that phase).
 */
export async function catalogSpec(
  catalog: LoadedCatalog,
): Promise<Pick<SandboxSpec, 'env' | 'resources' | 'files' | 'egress'>> {
  const { catalogSandboxEnv, catalogSandboxFile, resourcesFromCatalog } =
    await import('../../catalog/load.js');
  const { egressForPhase } = await import('../../fix/egress-phases.js');
  const egress = egressForPhase(catalog.catalog.sandbox.egress, 'agent');
  return {
    env: { ...catalog.catalog.sandbox.env, ...catalogSandboxEnv() },
    resources: resourcesFromCatalog(catalog.catalog),
    files: [catalogSandboxFile(catalog)],
    ...(egress ? { egress } : {}),
  };
}

/** The network the exec sandbox gets, in one line. */
export function egressNote(catalog: LoadedCatalog | undefined, egress: SandboxSpec['egress']): string {
  if (egress)
    return `egress as the agent's (sandbox.egress): ${egress.allow.map((r) => r.host).join(', ') || 'no name allowed'}`;
  if (catalog?.catalog.sandbox.egress)
    return `network none: sandbox.egress does not list the agent phase (phases: ${catalog.catalog.sandbox.egress.phases.join(', ')})`;
  return 'network none';
}

export const exec = declareCommand(declaration, execCommand);
