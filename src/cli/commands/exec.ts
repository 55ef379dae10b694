import { resolve } from 'node:path';
import {
  catalogSandboxEnv,
  catalogSandboxFile,
  loadCatalog,
  resourcesFromCatalog,
  type LoadedCatalog,
} from '../../catalog/load.js';
import { catalogImageOptions } from '../../fix/deps.js';
import { withBuildTimeLimit } from '../../image-context/build-limit.js';
import { sandboxProvider } from '../../sandbox/registry.js';
import type { SandboxSpec } from '../../sandbox/types.js';
import { terminalProgress } from '../progress-line.js';
import { printJson, type CliContext } from '../context.js';
import { terminalSafe } from '../terminal.js';
import { formatDuration } from '../format.js';
import { UsageError } from '../../errors.js';
import { shellJoin } from '../../sandbox/shell.js';

export interface ExecCommandOptions {
  repo?: string;
  image?: string;
  /** Build the sandbox the way this catalog's runs do: its recipe, base, build options, env and limits. */
  catalog?: string;
  /** Build on this base image (the BASE_IMAGE build argument), as the catalog's `sandbox.baseImage` would. */
  baseImage?: string;
  rebuild?: boolean;
  timeout?: string;
  json?: boolean;
  runtime?: string;
}

/** Runs one command in a fresh, hardened sandbox built from a repo; the sandbox is removed afterwards. */
export async function execCommand(
  ctx: CliContext,
  command: string[],
  options: ExecCommandOptions,
): Promise<number> {
  if (command.length === 0)
    throw new UsageError('no command given', { hint: 'sandbox-harness exec -- node --version' });
  const timeoutSec = options.timeout === undefined ? 120 : Number(options.timeout);
  if (!Number.isFinite(timeoutSec) || timeoutSec <= 0) {
    throw new UsageError(`--timeout: expected a number of seconds, got "${options.timeout}"`);
  }
  if (options.image && (options.baseImage || options.catalog)) {
    throw new UsageError(
      `--image runs an existing image as it is; ${options.baseImage ? '--base-image' : '--catalog'} only applies when the sandbox image is built`,
    );
  }
  const catalog = options.catalog
    ? await loadCatalog(resolve(ctx.cwd, options.catalog), { cwd: ctx.cwd })
    : undefined;
  if (options.baseImage && catalog?.catalog.sandbox.image) {
    throw new UsageError(
      `--base-image: the catalog ${catalog.file} runs the prebuilt image ${catalog.catalog.sandbox.image} (sandbox.image); there is nothing to build on another base`,
    );
  }
  const progress = options.json ? undefined : terminalProgress(ctx.stderr, ctx.isTTY);
  const provider = await sandboxProvider();
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
        onProgress: (l) => progress?.detail(l.slice(0, 120)),
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
  const sandbox = await provider.backend.create({
    image,
    role: 'exec',
    ...(options.runtime ? { runtime: options.runtime } : {}),
    ...(catalog ? catalogSpec(catalog) : {}),
  });
  try {
    // One argument is a shell command line; several are argv words, quoted for the shell.
    const line = command.length === 1 ? command[0]! : shellJoin(command);
    const result = await sandbox.exec(line, {
      timeoutMs: timeoutSec * 1000,
      signal: ctx.signal,
    });
    progress?.end(
      `exit ${result.exitCode}${result.timedOut ? ' (timed out)' : ''} in ${formatDuration(result.durationMs)}`,
    );
    if (options.json) {
      printJson(ctx, {
        image,
        ...(baseImage ? { baseImage } : {}),
        ...(catalog ? { catalog: catalog.file } : {}),
        container: sandbox.id,
        ...(runtime ? { runtime } : {}),
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

/** What a run's sandboxes get from the catalog: its env, its limits, the catalog itself read-only. */
function catalogSpec(catalog: LoadedCatalog): Pick<SandboxSpec, 'env' | 'resources' | 'files'> {
  return {
    env: { ...catalog.catalog.sandbox.env, ...catalogSandboxEnv() },
    resources: resourcesFromCatalog(catalog.catalog),
    files: [catalogSandboxFile(catalog)],
  };
}
