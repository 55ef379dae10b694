import { findCatalog } from '../../catalog/discover.js';
import { UsageError } from '../../errors.js';
import { runCheck, type CheckExpectation, type CheckResult } from '../../fix/check.js';
import { fixDeps } from '../../fix/deps.js';
import { silentProgress } from '../../fix/progress.js';
import { sandboxProvider } from '../../sandbox/registry.js';
import { exitCodeForCheck } from '../exit-codes.js';
import { print, printJson, type CliContext } from '../context.js';
import { formatBytes, formatDuration, shortPath } from '../format.js';
import { terminalProgress } from '../progress-line.js';

export interface CheckCommandOptions {
  catalog?: string;
  repo?: string;
  rebuild?: boolean;
  expect?: string;
  json?: boolean;
}

const EXPECTATIONS: CheckExpectation[] = ['failing', 'passing', 'any'];

export function checkSummaryJson(result: CheckResult) {
  return { ...result, exitCode: exitCodeForCheck(result) };
}

export function formatCheck(ctx: CliContext, result: CheckResult): string {
  const i = result.image;
  const mark = result.verdict === 'broken' ? '✗' : result.asExpected ? '✓' : '!';
  const lines = [
    `catalog     ${result.catalog.name} (${shortPath(ctx.cwd, result.catalog.file)})`,
    `repo        ${shortPath(ctx.cwd, result.repoDir)}`,
    `image       ${i.tag} (${i.id.replace(/^sha256:/, '').slice(0, 12)})${i.reused ? ', cached' : ', built'}`,
    `base        ${i.base ?? '(prebuilt image: sandbox.image)'}`,
    `size        ${i.sizeBytes !== undefined ? formatBytes(i.sizeBytes) : 'unknown'}`,
    `build time  ${formatDuration(result.buildMs)}${i.reused ? ' (found, not built)' : ''}`,
  ];
  for (const layer of result.tests.layers) {
    lines.push(
      `tests       $ ${layer.command}${result.tests.layers.length > 1 ? `  [${layer.name}]` : ''}`,
      `            exit ${layer.exitCode}${layer.timedOut ? ' (timed out)' : ''} after ${formatDuration(layer.durationMs)}`,
    );
  }
  lines.push(
    `test time   ${formatDuration(result.tests.durationMs)}`,
    `verdict     ${mark} ${result.verdict}: ${result.meaning}`,
  );
  if (result.verdict !== 'broken' && !result.asExpected)
    lines.push(
      `            (expected the tests to be ${result.expect}; --expect passing|any for an eval task)`,
    );
  for (const hint of result.hints) lines.push(`hint        ${hint}`);
  lines.push(`output      ${shortPath(ctx.cwd, result.dir)}/test-output.txt`);
  return lines.join('\n');
}

/** `sandbox-harness check`: the image and one test run on the untouched repo, no model. */
export async function checkCommand(ctx: CliContext, options: CheckCommandOptions): Promise<number> {
  const expect = (options.expect ?? 'failing') as CheckExpectation;
  if (!EXPECTATIONS.includes(expect)) {
    throw new UsageError(`--expect: expected one of ${EXPECTATIONS.join(', ')}, got "${options.expect}"`);
  }
  const catalogFile = await findCatalog(ctx.cwd, options.catalog);
  const result = await runCheck(
    {
      catalogFile,
      ...(options.repo ? { repoDir: options.repo } : {}),
      cwd: ctx.cwd,
      rebuild: options.rebuild ?? false,
      expect,
      signal: ctx.signal,
      progress: options.json ? silentProgress : terminalProgress(ctx.stderr, ctx.isTTY),
    },
    fixDeps(await sandboxProvider()),
  );
  if (options.json) printJson(ctx, checkSummaryJson(result));
  else print(ctx, formatCheck(ctx, result));
  return exitCodeForCheck(result);
}
