/** `view`: serve or export the run and trial pages of a repo, a runs folder, a run or an eval. */
import { resolve } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { UsageError } from '../../errors.js';
import type { ViewSource } from '../../view/source.js';
import { note, print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { integerOption } from '../option-parsers.js';
import { shortPath } from '../short-path.js';

function declaration() {
  return new Command('view')
    .description(
      'see what the agent did: a local, read-only web page of runs or eval trials (conversation, gate, diff, test output)',
    )
    .argument(
      '[path]',
      "a repo (its .sandbox-harness/runs/), a runs folder, one run folder, or an eval's output folder (default: the runs here)",
    )
    .option(
      '--export <dir>',
      'write the pages as static, self-contained HTML files into <dir> instead of serving them',
    )
    .addOption(
      integerOption('--port <n>', 'port on 127.0.0.1 (default: any free port)', {
        min: 0,
        max: 65535,
        expected: 'a port number from 0 to 65535 (0: any free port)',
      }),
    )
    .option('--json', 'print {url, port, token} (or, with --export, what was written) as JSON')
    .addHelpText(
      'after',
      `
The server binds 127.0.0.1 only, needs the random token in the printed URL, opens no
browser and serves until Ctrl-C. Examples:
  sandbox-harness view                                  # the runs of the repo here, after fix
  sandbox-harness view .sandbox-harness/evals/<suite>-<time>   # an eval's trials and report
  sandbox-harness view <out> --export <dir>             # static pages (eval writes <out>/view/ itself)`,
    );
}

async function sourceOf(ctx: CliContext, path: string | undefined): Promise<ViewSource> {
  const { openViewSource } = await import('../../view/source.js');
  const { runsDirOf } = await import('../run-lookup.js');
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
  options: OptionsOf<typeof declaration>,
): Promise<number> {
  const { exportView } = await import('../../view/export.js');
  const { startViewServer } = await import('../../view/server.js');
  const port = options.port ?? 0;
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

export const view = declareCommand(declaration, viewCommand);
