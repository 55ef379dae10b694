/**
 * The last step of a verified run: the patch saved in the run record and, unless
 * `--no-apply`, written to the host working tree, all or nothing, only where the host file
 * is still what the image was built from. The harness never commits, pushes or deploys.
 */
import { applyChangeSet } from '../changes/apply.js';
import { defaultJournalDir } from '../changes/apply-journal.js';
import type { ChangeSet } from '../changes/change-set.js';
import { changeSetPatch } from '../changes/patch.js';
import { errorMessage } from '../errors.js';
import type { Ending, Run, SandboxImage } from './context.js';

export async function applyVerified(run: Run, image: SandboxImage, changeSet: ChangeSet): Promise<Ending> {
  const { record } = run;
  record.patchFile = await run.dir.writeFile('patch.diff', changeSetPatch(changeSet));
  record.applied = false;
  if (!run.options.apply) {
    return {
      outcome: 'ready-for-review',
      message: `Verified fix saved at ${record.patchFile} (not applied: --no-apply).`,
      changeSet,
    };
  }
  run.progress.phase('apply', 'applying the verified patch to the host repo');
  const expected = new Map<string, string | null>();
  for (const entry of changeSet.entries)
    expected.set(entry.path, image.hostFiles.get(entry.path)?.sha256 ?? null);
  try {
    await applyChangeSet(run.repoDir, changeSet, {
      expected,
      journalDir: defaultJournalDir(run.options.env),
    });
    record.applied = true;
    run.progress.end(`${changeSet.entries.length} file(s) written`);
    return {
      outcome: 'ready-for-review',
      message: 'Verified fix applied to the working tree for review (nothing committed).',
      changeSet,
    };
  } catch (error) {
    record.applyError = errorMessage(error);
    run.progress.end(`not applied: ${record.applyError}`);
    return {
      outcome: 'not-applied',
      message: `Verified, but not applied: ${record.applyError}. The patch is saved at ${record.patchFile}.`,
      changeSet,
    };
  }
}
