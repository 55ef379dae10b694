/** `rerun-tests <run>`: the catalog's test command again in a run's kept container. */
import { note, print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { keptSandboxCommand } from '../shared-options.js';

function declaration() {
  return keptSandboxCommand(
    'rerun-tests',
    "run the catalog's test command again in a run's kept container",
  ).option('--json', 'JSON output');
}

export type RerunTestsOptions = OptionsOf<typeof declaration>;

export async function rerunTestsCommand(
  ctx: CliContext,
  ref: string,
  options: RerunTestsOptions,
): Promise<number> {
  const { resolveRun } = await import('../../runs/record.js');
  const { formatTestRun, runTestLayers } = await import('../../fix/test-layers.js');
  const { backendOfRun, keptAttemptSandbox, keptContainerPresent, runsDirOf } =
    await import('../run-lookup.js');
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const request = keptAttemptSandbox(run, options.attempt);
  const id = request.id;
  const backend = await backendOfRun(ctx, run.record, options);
  await keptContainerPresent(backend, request, run);
  const sandbox = await backend.attach(request);
  try {
    if (!options.json) note(ctx, `running the tests again in kept container ${id.slice(0, 12)} ...`);
    const result = await runTestLayers(sandbox, run.record.testCommand, {
      timeoutMs: 15 * 60_000,
      signal: ctx.signal,
    });
    if (options.json) {
      printJson(ctx, { run: run.record.id, container: id, passed: result.passed, layers: result.layers });
    } else {
      print(ctx, formatTestRun(result));
      print(
        ctx,
        result.passed
          ? 'tests pass in the kept container'
          : `tests fail (layer ${result.failingLayer?.name})`,
      );
    }
    return result.passed ? 0 : 1;
  } finally {
    await backend.release(request);
  }
}

export const rerunTests = declareCommand(declaration, rerunTestsCommand);
