/**
 * The last step of a verified run: the patch saved in the run record and, unless
 * `--no-apply`, written to the host working tree, all or nothing, only where the host file
 * is still what the image was built from. `sandbox-harness apply <run>` does the same later
 * from what the run saved. The harness never commits, pushes or deploys.
 */
import { realpath } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { loadCatalog } from '../catalog/load.js';
import { applyChangeSet } from '../changes/apply.js';
import { defaultJournalDir } from '../changes/apply-journal.js';
import type { ChangeSet } from '../changes/change-set.js';
import { changeSetPatch } from '../changes/patch.js';
import { parseSavedChange, SAVED_CHANGE_FILE, serializeSavedChange } from '../changes/saved-change.js';
import { ApplyError, errorMessage, UsageError } from '../errors.js';
import type { RunOutcome } from '../outcomes.js';
import { HARNESS_DIR, RunDir, readRunFile, type RunRecord, type StoredRun } from '../runs/record.js';
import { applyRunEvent, type RunEvent } from '../runs/journal.js';
import { catalogAllowlist } from './catalog-allowlist.js';
import type { Ending, Run } from './types.js';
import type { RepoImage } from '../image-context/request.js';

export async function applyVerified(run: Run, image: RepoImage, changeSet: ChangeSet): Promise<Ending> {
  const { record } = run;
  run.journal.append({
    kind: 'patch_saved',
    patchFile: await run.dir.writeFile('patch.diff', changeSetPatch(changeSet)),
  });
  const expected = new Map<string, string | null>();
  for (const entry of changeSet.entries)
    expected.set(entry.path, image.hostFiles.get(entry.path)?.sha256 ?? null);
  // What `apply <run>` writes later: the exact bytes and modes, and the host state they replace.
  await run.dir.writeFile(SAVED_CHANGE_FILE, serializeSavedChange(changeSet, expected));
  run.journal.append({ kind: 'apply', status: 'saved' });
  if (!run.options.apply) {
    return {
      outcome: 'ready-for-review',
      message: `Verified fix saved at ${record.patchFile} (not applied: --no-apply).`,
      changeSet,
    };
  }
  run.journal.append({ kind: 'apply_start' });
  try {
    await applyChangeSet(run.repoDir, changeSet, {
      expected,
      journalDir: defaultJournalDir(run.options.env),
    });
    run.journal.append({ kind: 'apply', status: 'applied', files: changeSet.entries.length });
    return {
      outcome: 'ready-for-review',
      message: 'Verified fix applied to the working tree for review (nothing committed).',
      changeSet,
    };
  } catch (error) {
    run.journal.append({ kind: 'apply', status: 'not-applied', message: errorMessage(error) });
    return {
      outcome: 'not-applied',
      message: `Verified, but not applied: ${record.applyError}. The patch is saved at ${record.patchFile}.`,
      changeSet,
    };
  }
}

export interface SavedApplyResult {
  /** `ready-for-review` when written; `not-applied` when the repo changed since the run. */
  outcome: Extract<RunOutcome, 'ready-for-review' | 'not-applied'>;
  written: string[];
  repoDir: string;
  /** Why nothing was written (the outcome is `not-applied`). */
  problem?: string;
  record: RunRecord;
}

/** Outcomes whose run saved a verified change. */
const APPLICABLE: readonly RunOutcome[] = ['ready-for-review', 'not-applied'];

/**
 * `apply <run>`: the change a verified run saved, written to the repo it ran on with the
 * same checks and the same atomic, journalled apply as `fix`: every path must pass the gate
 * of the catalog as it is now, and every file it touches must still be what the run saw (a
 * repo changed since is refused, nothing written). The record says it was applied.
 */
export async function applySavedRun(
  stored: StoredRun,
  options: { env: NodeJS.ProcessEnv },
): Promise<SavedApplyResult> {
  const { record } = stored;
  if (!(APPLICABLE as readonly string[]).includes(record.outcome)) {
    throw new UsageError(`run ${record.id} ended ${record.outcome}: it has no verified fix to apply`, {
      hint: 'Only a run that ended ready-for-review or not-applied saved a verified change.',
    });
  }
  if (record.applied === true) {
    throw new UsageError(`run ${record.id} was already applied to ${record.repoDir}`, {
      hint: 'Its files are in the working tree; `git diff` shows them.',
    });
  }
  const text = await readRunFile(stored, SAVED_CHANGE_FILE);
  if (text === undefined) {
    throw new UsageError(`run ${record.id} has no ${SAVED_CHANGE_FILE} (recorded by an older harness?)`, {
      hint: record.patchFile
        ? `Apply its patch by hand after reading it: git apply ${record.patchFile}`
        : undefined,
    });
  }
  const saved = parseSavedChange(text);
  if ('problem' in saved) {
    throw new UsageError(
      `run ${record.id}: ${SAVED_CHANGE_FILE} is not a change this harness saved: ${saved.problem}`,
    );
  }
  const repoDir = await repoOfRun(stored);
  // The same gate as `fix`, with the catalog as it is now: a path it no longer allows is refused.
  const catalog = await loadCatalog(record.catalog.file).catch((error: unknown) => {
    throw new UsageError(
      `run ${record.id}: its catalog ${record.catalog.file} cannot be read: ${errorMessage(error)}`,
      { hint: 'apply checks the change against the catalog again; restore the catalog first.' },
    );
  });
  const allowlist = await catalogAllowlist({ ...catalog, repoDir });
  const verdicts = allowlist.classify(saved.changeSet.entries.map((e) => e.path));
  const entries = saved.changeSet.entries.map((e) => {
    const verdict = verdicts.get(e.path);
    return {
      ...e,
      allowed: verdict?.allowed === true,
      ...(verdict?.reason ? { reason: verdict.reason } : {}),
    };
  });
  const refused = entries.filter((e) => !e.allowed);
  if (refused.length > 0) {
    throw new UsageError(
      `run ${record.id}: the catalog ${catalog.displayPath} no longer allows ${refused.map((e) => `${e.path} (${e.reason ?? 'not editable'})`).join(', ')}; nothing was written`,
    );
  }
  const dir = new RunDir(stored.dir, record.id);
  try {
    const result = await applyChangeSet(
      repoDir,
      { entries },
      {
        expected: saved.expected,
        journalDir: defaultJournalDir(options.env),
      },
    );
    await appendToJournal(dir, record, {
      kind: 'applied_later',
      status: 'applied',
      time: new Date().toISOString(),
    });
    return { outcome: 'ready-for-review', written: result.written, repoDir, record };
  } catch (error) {
    if (!(error instanceof ApplyError)) throw error;
    await appendToJournal(dir, record, {
      kind: 'applied_later',
      status: 'not-applied',
      time: new Date().toISOString(),
      message: error.message,
    });
    return { outcome: 'not-applied', written: [], repoDir, problem: error.message, record };
  }
}

/**
 * What `apply <run>` did, on the run's journal and so in its record: the event is appended to
 * `events.jsonl` (the record of an older run without one gains it too) and folded into `run.json`.
 */
async function appendToJournal(dir: RunDir, record: RunRecord, event: RunEvent): Promise<void> {
  await dir.appendEvent({ ...event });
  applyRunEvent(record, event);
  await dir.writeRecord(record);
}

/**
 * The repo a run's change goes to: the one its record names, and, when the record sits in a
 * repo's own `.sandbox-harness/runs/`, that repo must be the one named (a record copied or
 * edited to point elsewhere writes nowhere).
 */
async function repoOfRun(stored: StoredRun): Promise<string> {
  const named = await realpath(stored.record.repoDir).catch(() => {
    throw new UsageError(`run ${stored.record.id}: its repo ${stored.record.repoDir} does not exist`);
  });
  const runsDir = dirname(stored.dir);
  if (basename(runsDir) === 'runs' && basename(dirname(runsDir)) === HARNESS_DIR) {
    const holder = await realpath(dirname(dirname(runsDir))).catch(() => undefined);
    if (holder !== named) {
      throw new UsageError(
        `run ${stored.record.id} is recorded in ${dirname(dirname(runsDir))} but names the repo ${stored.record.repoDir}; refusing to write there`,
      );
    }
  }
  return named;
}
