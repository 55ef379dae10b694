/**
 * `work <backlog.yaml>`: the CLI's side of a backlog run: flags, the real `fix` and the
 * verification sandbox, the list on the terminal. The flow itself is `work/run-backlog.ts`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path, { join, relative, resolve } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { alignColumns } from '../../format.js';
import type { Backlog, BacklogItem } from '../../work/backlog.js';
import type { Verification, WorkState } from '../../work/run-backlog.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { exitCodeForWork, exitCodeForWorkStatus } from '../exit-codes.js';
import { terminalProgress } from '../progress-line.js';
import { providerOption } from '../shared-options.js';
import { terminalSafe } from '../terminal.js';

function declaration() {
  return new Command('work')
    .description(
      'work a backlog one item at a time (WIP = 1): fix each, apply it, verify it with every earlier item applied; state beside the backlog',
    )
    .argument(
      '<backlog>',
      'backlog file (YAML: catalog, items with id, ticket, catalog?, verify?, dependsOn?, cassette?)',
    )
    .option('--status', 'print the items and their state, and do nothing else')
    .option('--keep-going', 'after a blocked item, go on with the items that do not depend on it')
    .addOption(providerOption())
    .option('--model <id>', 'model id (provider default otherwise)')
    .option('--json', 'print the state as JSON on stdout')
    .addHelpText(
      'after',
      `
An item is passing only when its verified patch was applied and its verification (the item's
verify: command, else the catalog's tests) passes in a fresh sandbox of the repo with every
earlier item applied. Anything else makes it blocked, with the reason; work stops there unless
--keep-going. The state file (<backlog>.state.json) is written after every step: a killed work
continues where it was, passing items are never redone. Nothing is committed or pushed.

Each item's fix runs its catalog's testCommand: it must fail before the item's change (the
baseline) and pass after it. When every ticket comes with its own failing test, the whole suite
fails until the last item is done, so give each item a catalog whose testCommand runs that
item's tests (catalog: on the item), and a verify: that runs every item's tests so far
(docs/backlogs.md has an example).

Exit codes: 0 every item passing, 1 an item blocked or left, 2 a bad backlog or catalog.
With --status: 0 unless an item is blocked (pending items are not a failure).`,
    );
}

export type WorkCommandOptions = OptionsOf<typeof declaration>;

function catalogOf(backlog: Backlog, item: BacklogItem): string {
  // loadBacklog made sure one of the two is set.
  return resolve(backlog.dir, item.catalog ?? backlog.catalog ?? '');
}

function statusLines(backlog: Backlog, state: WorkState): string[] {
  const rows = backlog.items.map((item) => {
    const s = state.items[item.id] ?? { status: 'pending' as const };
    // Made safe before padding, so an escaped character cannot push its row out of line.
    return [item.id, s.status, s.runId ? `run ${s.runId}` : '', s.reason ?? ''].map((cell) =>
      terminalSafe(cell),
    );
  });
  return alignColumns(rows);
}

export async function workCommand(
  ctx: CliContext,
  file: string,
  options: WorkCommandOptions,
): Promise<number> {
  const { catalogSandboxEnv, catalogSandboxFile, loadCatalog, resourcesFromCatalog } =
    await import('../../catalog/load.js');
  const { verificationLayers } = await import('../../catalog/schema.js');
  const { catalogImageOptions, fixDeps } = await import('../../fix/deps.js');
  const { runFix } = await import('../../fix/run-fix.js');
  const { silentProgress } = await import('../../fix/progress.js');
  const { sandboxProvider } = await import('../../sandbox/backend-registry.js');
  const { loadBacklog } = await import('../../work/backlog.js');
  const { readWorkState, runBacklog, stateFileFor } = await import('../../work/run-backlog.js');
  const absolute = resolve(ctx.cwd, file);
  const backlog = await loadBacklog(absolute, relative(ctx.cwd, absolute) || absolute);
  const stateFile = stateFileFor(absolute);
  if (options.status) {
    const state = await readWorkState(stateFile, backlog);
    if (options.json) printJson(ctx, { stateFile, items: state.items });
    else for (const line of statusLines(backlog, state)) print(ctx, line);
    return exitCodeForWorkStatus(backlog.items.map((i) => state.items[i.id]?.status ?? 'pending'));
  }
  const provider = await sandboxProvider();
  const deps = fixDeps(provider);
  const progress = options.json ? undefined : terminalProgress(ctx.stderr, ctx.isTTY);
  const state = await runBacklog(
    {
      backlog,
      stateFile,
      keepGoing: options.keepGoing ?? false,
      signal: ctx.signal,
      ...(progress ? { progress } : {}),
    },
    {
      fix: (item, signal, itemProgress) =>
        runFix(
          {
            ticket: item.ticket,
            catalogFile: catalogOf(backlog, item),
            ...(options.provider ? { provider: options.provider } : {}),
            ...(options.model ? { model: options.model } : {}),
            ...(item.cassette ? { cassette: resolve(backlog.dir, item.cassette) } : {}),
            keep: 'on-failure',
            apply: true,
            force: false,
            rebuild: false,
            cwd: backlog.dir,
            env: ctx.env,
            signal,
            readStdin: async () => '',
            progress: options.json ? silentProgress : itemProgress,
          },
          deps,
        ),
      verify: async (item, signal): Promise<Verification> => {
        const catalog = await loadCatalog(catalogOf(backlog, item));
        const logs = await mkdtemp(join(tmpdir(), 'sandbox-harness-work-'));
        try {
          // Built from the repo as it is now: every item applied so far is in it.
          const image = await deps.image({
            repoDir: catalog.repoDir,
            ...catalogImageOptions(catalog),
            rebuild: false,
            logFile: join(logs, 'image-build.log'),
            onProgress: () => undefined,
            signal,
          });
          const box = await provider.backend.create({
            image: image.tag,
            role: 'work-verify',
            env: { ...catalog.catalog.sandbox.env, ...catalogSandboxEnv() },
            resources: resourcesFromCatalog(catalog.catalog),
            files: [catalogSandboxFile(catalog)],
            keep: 'never',
          });
          try {
            const layers = verificationLayers(catalog.catalog);
            const command = item.verify ?? layers.map((l) => `(${l.command})`).join(' && ');
            const result = await box.exec(command, {
              timeoutMs: catalog.catalog.sandbox.timeouts.testSec * 1000 * (item.verify ? 1 : layers.length),
              signal,
            });
            return {
              passed: result.exitCode === 0 && !result.timedOut,
              exitCode: result.exitCode,
              output: `${result.stdout}${result.stderr}`,
            };
          } finally {
            await box.dispose();
          }
        } finally {
          await rm(logs, { recursive: true, force: true });
        }
      },
    },
  );
  const statuses = backlog.items.map((i) => state.items[i.id]?.status ?? 'pending');
  if (options.json) printJson(ctx, { stateFile, items: state.items });
  else {
    for (const line of statusLines(backlog, state)) print(ctx, line);
    print(ctx, `state: ${path.relative(ctx.cwd, stateFile) || stateFile}`);
  }
  return exitCodeForWork(statuses);
}

export const work = declareCommand(declaration, workCommand);
