import { resolve } from 'node:path';
import { findCatalog } from '../../catalog/discover.js';
import { UsageError } from '../../errors.js';
import { runFix, type FixResult, type KeepPolicy } from '../../fix/run-fix.js';
import { fixDeps } from '../../fix/deps.js';
import { sandboxProvider } from '../../sandbox/registry.js';
import { exitCodeForRun } from '../exit-codes.js';
import { silentProgress } from '../../fix/progress.js';
import { terminalProgress } from '../progress-line.js';
import { print, printJson, type CliContext } from '../context.js';
import { formatDuration, shortPath } from '../format.js';
import { parseCostLimit } from '../cost-flag.js';

export interface FixCommandOptions {
  catalog?: string;
  repo?: string;
  provider?: string;
  model?: string;
  cassette?: string;
  maxAttempts?: string;
  keep?: string;
  apply?: boolean;
  json?: boolean;
  record?: string;
  force?: boolean;
  rebuild?: boolean;
  runsDir?: string;
  review?: boolean;
  costLimit?: string;
  continue?: string;
  runtime?: string;
}

const KEEP_POLICIES: KeepPolicy[] = ['on-failure', 'always', 'never'];

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
    })),
    checker: r.checker,
    turns: r.turns,
    tokens: r.tokens,
    durationMs: r.durationMs,
    keptContainers: r.containers.filter((c) => c.kept),
    error: result.error
      ? { code: result.error.code, message: result.error.message, hint: result.error.hint }
      : undefined,
  };
}

function changedList(a: { changedFiles: string[]; changedCount?: number }): string {
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
  const keep = (options.keep ?? 'on-failure') as KeepPolicy;
  if (!KEEP_POLICIES.includes(keep)) {
    throw new UsageError(`--keep: expected one of ${KEEP_POLICIES.join(', ')}, got "${options.keep}"`);
  }
  let maxAttempts: number | undefined;
  if (options.maxAttempts !== undefined) {
    maxAttempts = Number(options.maxAttempts);
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 10) {
      throw new UsageError(`--max-attempts: expected an integer from 1 to 10, got "${options.maxAttempts}"`);
    }
  }
  const costLimitUsd = parseCostLimit(options.costLimit);
  const catalogFile = await findCatalog(ctx.cwd, options.catalog);
  const progress = options.json ? silentProgress : terminalProgress(ctx.stderr, ctx.isTTY);
  const result = await runFix(
    {
      ticket,
      catalogFile,
      ...(options.repo ? { repoDir: options.repo } : {}),
      ...(options.provider ? { provider: options.provider } : {}),
      ...(options.model ? { model: options.model } : {}),
      ...(options.cassette ? { cassette: options.cassette } : {}),
      ...(options.record ? { record: options.record } : {}),
      ...(maxAttempts ? { maxAttempts } : {}),
      ...(costLimitUsd !== undefined ? { costLimitUsd } : {}),
      ...(options.continue ? { continueFrom: options.continue } : {}),
      ...(options.runsDir ? { runsDir: resolve(ctx.cwd, options.runsDir) } : {}),
      keep,
      apply: options.apply !== false,
      force: options.force ?? false,
      rebuild: options.rebuild ?? false,
      ...(options.review ? { review: true } : {}),
      ...(options.runtime ? { runtime: options.runtime } : {}),
      cwd: ctx.cwd,
      env: ctx.env,
      signal: ctx.signal,
      progress,
      readStdin,
    },
    fixDeps(await sandboxProvider()),
  );
  if (options.json) {
    printJson(ctx, fixSummaryJson(result));
    return fixExitCode(result);
  }
  const r = result.record;
  print(ctx, '');
  print(ctx, `outcome: ${result.outcome}${r.message ? ` — ${r.message}` : ''}`);
  for (const a of r.attempts) {
    print(
      ctx,
      `  attempt ${a.n}: ${a.verdict}, ${a.turns} turns, ${formatDuration(a.durationMs)}${changedList(a)}`,
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
  if (result.outcome === 'not-applied')
    print(
      ctx,
      `apply it once the repo is as the run saw it: sandbox-harness apply ${result.runId}${options.runsDir ? ` --runs-dir ${options.runsDir}` : options.catalog ? ` --catalog ${options.catalog}` : ''}`,
    );
  print(
    ctx,
    `run record: ${shortPath(ctx.cwd, result.runDir)}  (${r.turns} turns, ${r.tokens.input + r.tokens.output} tokens, ${formatDuration(r.durationMs ?? 0)})`,
  );
  const kept = r.containers.filter((c) => c.kept);
  if (kept.length > 0) {
    const where = options.runsDir
      ? ` --runs-dir ${options.runsDir}`
      : options.catalog
        ? ` --catalog ${options.catalog}`
        : '';
    print(ctx, `kept container(s): ${kept.map((c) => `${c.role} ${c.id.slice(0, 12)}`).join(', ')}`);
    for (const [label, command] of [
      ['inspect', 'inspect'],
      ['shell', 'shell'],
      ['rerun tests', 'rerun-tests'],
    ] as const) {
      print(ctx, `  ${`${label}:`.padEnd(13)} sandbox-harness ${command} ${result.runId}${where}`);
    }
  }
  return fixExitCode(result);
}
