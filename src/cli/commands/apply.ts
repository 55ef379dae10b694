/** `apply <run>`: a verified run's saved change, written to its repo as `fix` would. */
import { applySavedRun } from '../../fix/apply.js';
import { resolveRun } from '../../runs/record.js';
import { exitCodeForRun } from '../exit-codes.js';
import { print, printJson, type CliContext } from '../context.js';
import { runsDirOf, type RunsLocation } from './runs.js';

export async function applyCommand(
  ctx: CliContext,
  id: string,
  options: RunsLocation & { json?: boolean },
): Promise<number> {
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
