/** `check`: the image and one test run on the untouched repo, no model. */
import { Command, Option } from '@commander-js/extra-typings';
import type { CheckExpectation, CheckResult } from '../../fix/check.js';
import { formatBytes, formatDuration } from '../../format.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { exitCodeForCheck } from '../exit-codes.js';
import { terminalProgress } from '../progress-line.js';
import { everyValueOf } from '../shared-options.js';
import { shortPath } from '../short-path.js';

const EXPECTATIONS = everyValueOf<CheckExpectation>()(['failing', 'passing', 'any']);

function declaration() {
  return new Command('check')
    .description(
      'preflight a catalog: build the sandbox image with its settings and run the test command once on the untouched repo (no model)',
    )
    .option('-c, --catalog <file>', 'service catalog (default: the only *.yaml in ./catalog/ or here)')
    .option('--repo <dir>', "the service repo (default: the catalog's repo)")
    .option('--rebuild', 'rebuild the sandbox image even when the repo is unchanged')
    .addOption(
      new Option('--expect <tests>', 'what the tests should do on the untouched repo')
        .choices(EXPECTATIONS)
        .default('failing'),
    )
    .option('--json', 'print only a JSON report on stdout')
    .addHelpText(
      'after',
      `
Reports the image (tag, id, cached or built), the base it was built on, its size, the build
time, each test layer's exit code and duration, and a verdict:
  failing  the tests run and fail: what a ticket needs (fix has something to verify against)
  passing  the tests run and pass: fix would end nothing-to-fix (fine for an eval task whose
           held-out tests decide: --expect passing or any)
  broken   the test command itself did not run the tests (not found, no such npm script, no
           package.json, no tests, the runner cannot start): fix and eval stop there with exit 2
The whole test output and the build log go to <repo>/.sandbox-harness/checks/<id>/.
Exit codes: 0 the tests did what --expect says (default: failing); 1 they did not; 2 broken,
or a bad catalog; 3 Docker unavailable or the image cannot be built.
Example:
  sandbox-harness check --catalog examples/shipping-service/shipping-service.yaml`,
    );
}

export type CheckCommandOptions = OptionsOf<typeof declaration>;

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

export async function checkCommand(ctx: CliContext, options: CheckCommandOptions): Promise<number> {
  const { findCatalog } = await import('../../catalog/discover.js');
  const { runCheck } = await import('../../fix/check.js');
  const { fixDeps } = await import('../../fix/deps.js');
  const { silentProgress } = await import('../../fix/progress.js');
  const { sandboxProvider } = await import('../../sandbox/backend-registry.js');
  const catalogFile = await findCatalog(ctx.cwd, options.catalog);
  const result = await runCheck(
    {
      catalogFile,
      ...(options.repo ? { repoDir: options.repo } : {}),
      cwd: ctx.cwd,
      rebuild: options.rebuild ?? false,
      expect: options.expect,
      signal: ctx.signal,
      progress: options.json ? silentProgress : terminalProgress(ctx.stderr, ctx.isTTY),
    },
    fixDeps(await sandboxProvider()),
  );
  if (options.json) printJson(ctx, checkSummaryJson(result));
  else print(ctx, formatCheck(ctx, result));
  return exitCodeForCheck(result);
}

export const check = declareCommand(declaration, checkCommand);
