import { resolve } from 'node:path';
import { sandboxProvider } from '../../sandbox/registry.js';
import { terminalProgress } from '../progress-line.js';
import { printJson, type CliContext } from '../context.js';
import { terminalSafe } from '../terminal.js';
import { UsageError } from '../../errors.js';
import { shellJoin } from '../../sandbox/shell.js';

export interface ExecCommandOptions {
  repo?: string;
  image?: string;
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
  const progress = options.json ? undefined : terminalProgress(ctx.stderr, ctx.isTTY);
  const provider = await sandboxProvider();
  // A runtime the engine lacks is refused before an image is built.
  const runtime = await provider.runtime?.(options.runtime);
  let image = options.image;
  if (!image) {
    const repoDir = resolve(ctx.cwd, options.repo ?? '.');
    progress?.phase('image', `sandbox image for ${repoDir}`);
    const built = await provider.repoImage({
      repoDir,
      rebuild: options.rebuild ?? false,
      onProgress: (l) => progress?.detail(l.slice(0, 120)),
      signal: ctx.signal,
    });
    progress?.end(`${built.tag}${built.reused ? ' (cached)' : ' (built)'}`);
    image = built.tag;
  }
  progress?.phase('validate', `running in a sandbox: ${command.join(' ')}`);
  const sandbox = await provider.backend.create({
    image,
    role: 'exec',
    ...(options.runtime ? { runtime: options.runtime } : {}),
  });
  try {
    // One argument is a shell command line; several are argv words, quoted for the shell.
    const line = command.length === 1 ? command[0]! : shellJoin(command);
    const result = await sandbox.exec(line, {
      timeoutMs: timeoutSec * 1000,
      signal: ctx.signal,
    });
    progress?.end(
      `exit ${result.exitCode}${result.timedOut ? ' (timed out)' : ''} in ${result.durationMs} ms`,
    );
    if (options.json) {
      printJson(ctx, { image, container: sandbox.id, ...(runtime ? { runtime } : {}), ...result });
    } else {
      if (result.stdout) ctx.stdout.write(terminalSafe(result.stdout));
      if (result.stderr) ctx.stderr.write(terminalSafe(result.stderr));
    }
    return result.exitCode === 0 ? 0 : 1;
  } finally {
    await sandbox.dispose();
  }
}
