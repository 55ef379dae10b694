/** `fix <ticket>`: fix a ticket in a sandbox; the verified, allowlisted patch goes to the working tree. */
import { resolve } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import type { FixResult } from '../../fix/run-fix.js';
import { formatCost, formatDuration } from '../../format.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { exitCodeForRun } from '../exit-codes.js';
import { integerOption, usdOption } from '../option-parsers.js';
import { terminalProgress } from '../progress-line.js';
import { agentOption, keepOption, providerOption, runtimeOption } from '../shared-options.js';
import { shortPath } from '../short-path.js';

function declaration() {
  return new Command('fix')
    .description('fix a ticket in a sandbox; apply the verified, allowlisted patch to the working tree')
    .argument(
      '<ticket>',
      'a ticket file (markdown, optional front matter id/title), a ticket id (tickets/<id>.md), inline text, or - for stdin',
    )
    .option('-c, --catalog <file>', 'service catalog (default: the only *.yaml in ./catalog/ or here)')
    .option('--repo <dir>', "the service repo (default: the catalog's repo)")
    .addOption(providerOption())
    .option('--model <id>', 'model id (provider default otherwise)')
    .option(
      '--cassette <file>',
      'replay a recorded conversation (implies --provider replay); with --parallel N, give it N times: one per attempt',
      (file: string, earlier: string[] = []) => [...earlier, file],
    )
    .option('--record <file>', 'record the live conversation as a cassette')
    .addOption(
      integerOption('--max-attempts <n>', 'attempts before giving up (1-10; default: the catalog)', {
        min: 1,
        max: 10,
      }),
    )
    .addOption(
      usdOption(
        '--cost-limit <usd>',
        "stop once the run's model calls cost this many US dollars (ends `budget`; default: the catalog's agent.costLimit)",
      ),
    )
    .option(
      '--continue <run>',
      "start from an earlier run's last attempt: its patch in the first sandbox, its feedback to the model, attempts numbered on",
    )
    .option(
      '--from-sandbox',
      "with --continue: start from a fork of that run's kept attempt sandbox (its files, dependencies, build output), not only its patch (docs/forks.md)",
    )
    .addOption(
      integerOption(
        '--parallel <n>',
        "attempts at once from the same state; the first verified (with review, approved) wins, the others are stopped (1-8; default: the catalog's agent.parallelAttempts, else 1)",
        { min: 1, max: 8 },
      ),
    )
    .addOption(keepOption('keep containers for inspection').default('on-failure'))
    .option(
      '--no-apply',
      'do not write the verified patch to the working tree (it is saved in the run record)',
    )
    .option('--force', 'run even when the tests already pass before any change')
    .option('--rebuild', 'rebuild the sandbox image even when the repo is unchanged')
    .option(
      '--pool',
      'hand out sandboxes from a warm pool: made ahead, proven pristine when taken, drained at the end (docs/pool.md)',
    )
    .option(
      '--review',
      "review every verified attempt with an independent checker (also the catalog's agent.review); ready-for-review then needs its approval",
    )
    .option('--runs-dir <dir>', 'where run records go (default: <repo>/.sandbox-harness/runs)')
    .addOption(runtimeOption())
    .addOption(
      agentOption(
        "the agent that works the ticket: builtin, or a CLI in the sandbox behind the model bridge (default: the catalog's agent.kind, else builtin)",
      ),
    )
    .option('--json', 'print only a JSON summary on stdout')
    .addHelpText(
      'after',
      `
Outcomes: ready-for-review (exit 0), nothing-to-fix (0), failed, rejected, not-approved, timeout, budget (1),
error (2; 70 for a fault of the harness), infrastructure (3), not-applied (4), interrupted (130).
The harness never commits, pushes or deploys. Example:
  sandbox-harness fix OPS-412 --catalog examples/shipping-service/shipping-service.yaml \\
    --cassette examples/shipping-service/cassettes/OPS-412.json`,
    );
}

export type FixCommandOptions = OptionsOf<typeof declaration>;

function readStdin(): Promise<string> {
  return new Promise((resolveText, reject) => {
    const chunks: Buffer[] = [];
    process.stdin.on('data', (chunk: Buffer) => chunks.push(chunk));
    process.stdin.on('end', () => resolveText(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

/** The exit code a finished run stands for. */
export function fixExitCode(result: FixResult): number {
  return exitCodeForRun({
    outcome: result.outcome,
    ...(result.error ? { errorCategory: result.error.category } : {}),
  });
}

export function fixSummaryJson(result: FixResult) {
  const r = result.record;
  return {
    runId: result.runId,
    runDir: result.runDir,
    outcome: result.outcome,
    exitCode: fixExitCode(result),
    message: r.message,
    ticket: r.ticket,
    catalog: r.catalog,
    provider: r.provider,
    image: r.image,
    ...(r.runtime ? { runtime: r.runtime } : {}),
    applied: r.applied ?? false,
    applyError: r.applyError,
    patchFile: r.patchFile,
    attempts: r.attempts.map((a) => ({
      n: a.n,
      verdict: a.verdict,
      turns: a.turns,
      durationMs: a.durationMs,
      changedFiles: a.changedFiles,
      failingLayer: a.failingLayer,
      heldOut: a.heldOut,
      reviews: a.reviews,
      ...(a.stoppedBy !== undefined ? { stoppedBy: a.stoppedBy } : {}),
      ...(a.costUsd !== undefined ? { costUsd: a.costUsd } : {}),
    })),
    ...(r.parallelAttempts ? { parallelAttempts: r.parallelAttempts } : {}),
    ...(r.fork ? { fork: r.fork } : {}),
    checker: r.checker,
    turns: r.turns,
    tokens: r.tokens,
    ...(r.cost ? { cost: r.cost } : {}),
    durationMs: r.durationMs,
    keptContainers: r.containers.filter((c) => c.kept),
    error: result.error
      ? { code: result.error.code, message: result.error.message, hint: result.error.hint }
      : undefined,
  };
}

function changedList(a: { changedFiles: string[]; changedCount?: number | undefined }): string {
  if (a.changedFiles.length === 0) return '';
  const count = a.changedCount ?? a.changedFiles.length;
  const shown = a.changedFiles.slice(0, 10);
  return `, changed ${shown.join(', ')}${count > shown.length ? ` and ${count - shown.length} more` : ''}`;
}

export async function fixCommand(
  ctx: CliContext,
  ticket: string,
  options: FixCommandOptions,
): Promise<number> {
  const { findCatalog } = await import('../../catalog/discover.js');
  const { runFix } = await import('../../fix/run-fix.js');
  const { fixDeps } = await import('../../fix/deps.js');
  const { silentProgress } = await import('../../fix/progress.js');
  const { sandboxProvider } = await import('../../sandbox/backend-registry.js');
  const catalogFile = await findCatalog(ctx.cwd, options.catalog);
  const result = await runFix(
    {
      ticket,
      catalogFile,
      ...(options.repo ? { repoDir: options.repo } : {}),
      ...(options.provider ? { provider: options.provider } : {}),
      ...(options.model ? { model: options.model } : {}),
      ...(options.cassette ? { cassette: options.cassette[0]! } : {}),
      ...(options.cassette && options.cassette.length > 1 ? { laneCassettes: options.cassette } : {}),
      ...(options.parallel !== undefined ? { parallel: options.parallel } : {}),
      ...(options.fromSandbox ? { fromSandbox: true } : {}),
      ...(options.record ? { record: options.record } : {}),
      maxAttempts: options.maxAttempts,
      costLimitUsd: options.costLimit,
      ...(options.continue ? { continueFrom: options.continue } : {}),
      ...(options.runsDir ? { runsDir: resolve(ctx.cwd, options.runsDir) } : {}),
      keep: options.keep,
      apply: options.apply,
      force: options.force ?? false,
      rebuild: options.rebuild ?? false,
      ...(options.pool ? { pool: true } : {}),
      ...(options.review ? { review: true } : {}),
      ...(options.runtime ? { runtime: options.runtime } : {}),
      ...(options.agent ? { agent: options.agent } : {}),
      cwd: ctx.cwd,
      env: ctx.env,
      signal: ctx.signal,
      progress: options.json ? silentProgress : terminalProgress(ctx.stderr, ctx.isTTY),
      readStdin,
    },
    fixDeps(await sandboxProvider()),
  );
  if (options.json) {
    printJson(ctx, fixSummaryJson(result));
    return fixExitCode(result);
  }
  printOutcome(ctx, result, options);
  return fixExitCode(result);
}

/** What a person reads at the end: the outcome, each attempt, the patch, and where to look next. */
export function printOutcome(ctx: CliContext, result: FixResult, options: FixCommandOptions): void {
  const r = result.record;
  print(ctx, '');
  print(ctx, `outcome: ${result.outcome}${r.message ? ` — ${r.message}` : ''}`);
  for (const a of r.attempts) {
    print(
      ctx,
      `  attempt ${a.n}: ${a.stoppedBy !== undefined ? `stopped (attempt ${a.stoppedBy} passed first)` : a.verdict}, ${a.turns} turns, ${formatDuration(a.durationMs)}${changedList(a)}`,
    );
    for (const review of a.reviews ?? []) {
      print(ctx, `    review ${review.round}: ${review.verdict} — ${review.summary}`);
      for (const reason of review.reasons) {
        print(
          ctx,
          `      - ${[reason.file, reason.rule].filter(Boolean).join(', ')}${reason.file || reason.rule ? ': ' : ''}${reason.text}`,
        );
      }
    }
  }
  if (result.error?.hint) print(ctx, `hint: ${result.error.hint}`);
  if ((result.outcome === 'ready-for-review' || result.outcome === 'not-applied') && result.patch)
    print(ctx, `\n${result.patch}`);
  // How to name these runs again in the commands that read them.
  const where = options.runsDir
    ? ` --runs-dir ${options.runsDir}`
    : options.catalog
      ? ` --catalog ${options.catalog}`
      : '';
  if (result.outcome === 'not-applied')
    print(ctx, `apply it once the repo is as the run saw it: sandbox-harness apply ${result.runId}${where}`);
  print(
    ctx,
    `run record: ${shortPath(ctx.cwd, result.runDir)}  (${r.turns} turns, ${r.tokens.input + r.tokens.output} tokens, ${formatDuration(r.durationMs ?? 0)})`,
  );
  if (r.cost) print(ctx, `cost: ${formatCost(r.cost)}`);
  const kept = r.containers.filter((c) => c.kept);
  if (kept.length > 0) {
    print(ctx, `kept container(s): ${kept.map((c) => `${c.role} ${c.id.slice(0, 12)}`).join(', ')}`);
    for (const [label, command] of [
      ['inspect', 'inspect'],
      ['shell', 'shell'],
      ['rerun tests', 'rerun-tests'],
    ] as const) {
      print(ctx, `  ${`${label}:`.padEnd(13)} sandbox-harness ${command} ${result.runId}${where}`);
    }
  }
}

export const fix = declareCommand(declaration, fixCommand);
