/** `view`: serve or export the run and trial pages of a repo, a runs folder, a run or an eval. */
import { resolve } from 'node:path';
import { UsageError } from '../../errors.js';
import { exportView } from '../../view/export.js';
import { startViewServer } from '../../view/server.js';
import { openViewSource, type ViewSource } from '../../view/source.js';
import { note, print, printJson, type CliContext } from '../context.js';
import { shortPath } from '../format.js';
import { runsDirOf } from './runs.js';

export interface ViewCommandOptions {
  export?: string;
  port?: string;
  json?: boolean;
}

function portOf(value: string | undefined): number {
  if (value === undefined) return 0;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`--port: expected a port number from 0 to 65535 (0: any free port), got "${value}"`);
  }
  return port;
}

async function sourceOf(ctx: CliContext, path: string | undefined): Promise<ViewSource> {
  if (path !== undefined) return openViewSource(resolve(ctx.cwd, path));
  // Without a path: the runs `runs` would list from here (this repo, or the repo of the catalog here).
  const runsDir = await runsDirOf(ctx, {});
  return openViewSource(runsDir).catch(() => {
    throw new UsageError(`view: no runs recorded here (looked in ${shortPath(ctx.cwd, runsDir)})`, {
      hint: 'Give a path: a repo, a runs folder, a run folder, or an eval output folder (sandbox-harness view <path>).',
    });
  });
}

export async function viewCommand(
  ctx: CliContext,
  path: string | undefined,
  options: ViewCommandOptions,
): Promise<number> {
  const port = portOf(options.port);
  const source = await sourceOf(ctx, path);

  if (options.export !== undefined) {
    if (options.port !== undefined)
      throw new UsageError('--port and --export do not go together: an export serves nothing');
    const result = await exportView(source, resolve(ctx.cwd, options.export));
    if (options.json) printJson(ctx, result);
    else print(ctx, `${result.pages} page(s) written; open ${shortPath(ctx.cwd, result.index)}`);
    return 0;
  }

  const server = await startViewServer(source, {
    port,
    onError: (error) =>
      note(ctx, `view: a page failed: ${error instanceof Error ? error.message : String(error)}`),
  }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'EADDRINUSE')
      throw new UsageError(`--port ${port} is in use`, { hint: 'Leave --port out to get a free port.' });
    throw error;
  });
  if (options.json)
    ctx.stdout.write(`${JSON.stringify({ url: server.url, port: server.port, token: server.token })}\n`);
  else {
    print(ctx, server.url);
    note(ctx, `viewing ${source.root} (read-only, this machine only); open the URL above; Ctrl-C stops`);
  }
  await new Promise<void>((done) => {
    if (ctx.signal.aborted) done();
    else ctx.signal.addEventListener('abort', () => done(), { once: true });
  });
  await server.close();
  return 0;
}
