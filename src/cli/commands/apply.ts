/** `apply <run>`: a verified run's saved change, written to its repo as `fix` would. */
import { Command } from '@commander-js/extra-typings';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { exitCodeForRun } from '../exit-codes.js';
import { withRunsLocation } from '../shared-options.js';

function declaration() {
  return withRunsLocation(
    new Command('apply').description(
      "write a verified run's saved change to its repo, with the same checks and atomic apply as fix",
    ),
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
Refused, with nothing written, when a file the change touches is no longer what the run saw
(exit 4, not-applied), when the catalog (--catalog, else the one found here or in the repo,
never the record's) does not allow one of its paths, or when the run's saved change, patch or
record was edited after verification (exit 2).
For a run that ended ready-for-review with --no-apply, or not-applied. Example:
  sandbox-harness apply last`,
    );
}

export async function applyCommand(
  ctx: CliContext,
  id: string,
  options: OptionsOf<typeof declaration>,
): Promise<number> {
  const { applySavedRun } = await import('../../fix/apply.js');
  const { resolveRun } = await import('../../runs/record.js');
  const { runsDirOf } = await import('../run-lookup.js');
  const stored = await resolveRun(await runsDirOf(ctx, options), id);
  const result = await applySavedRun(stored, {
    env: ctx.env,
    cwd: ctx.cwd,
    ...(options.catalog ? { catalogFile: options.catalog } : {}),
  });
  const code = exitCodeForRun({ outcome: result.outcome });
  if (options.json) {
    printJson(ctx, {
      runId: stored.record.id,
      outcome: result.outcome,
      exitCode: code,
      repoDir: result.repoDir,
      written: result.written,
      ...(result.problem ? { problem: result.problem } : {}),
    });
    return code;
  }
  if (result.outcome === 'ready-for-review') {
    print(
      ctx,
      `applied run ${stored.record.id} to ${result.repoDir}: ${result.written.join(', ')} (nothing committed)`,
    );
  } else {
    print(ctx, `not applied: ${result.problem ?? 'refused'}`);
    print(
      ctx,
      'The repo changed since the run read it. Review those changes (commit or stash them), or apply the patch by hand: git apply ' +
        (stored.record.patchFile ?? '<run>/patch.diff'),
    );
  }
  return code;
}

export const apply = declareCommand(declaration, applyCommand);
