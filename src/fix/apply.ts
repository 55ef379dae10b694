/**
 * The last step of a verified run: the patch saved in the run record and, unless
 * `--no-apply`, written to the host working tree, all or nothing, only where the host file
 * is still what the image was built from. `sandbox-harness apply <run>` does the same later
 * from what the run saved. The harness never commits, pushes or deploys.
 */
import { realpath } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { findCatalogIfAny } from '../catalog/discover.js';
import { loadCatalog, type LoadedCatalog } from '../catalog/load.js';
import { applyChangeSet } from '../changes/apply-change-set.js';
import { defaultJournalDir } from '../changes/apply-journal.js';
import type { ChangeEntry, ChangeSet } from '../changes/change-set.js';
import { sha256 } from '../changes/hash.js';
import { changeSetPatch } from '../changes/patch.js';
import {
  parseSavedChange,
  SAVED_CHANGE_FILE,
  SAVED_CHANGE_MAX_BYTES,
  serializeSavedChange,
  type SavedChange,
} from '../changes/saved-change.js';
import {
  ensureSealKey,
  PATCH_FILE,
  readSealKey,
  SEAL_FILE,
  sealedRecordHash,
  sealKeyFile,
  sealProblem,
  sealText,
} from '../changes/verified-seal.js';
import { ApplyError, errorMessage, UsageError } from '../errors.js';
import type { RunOutcome } from '../outcomes.js';
import {
  HARNESS_DIR,
  RunDir,
  readRunFile,
  runRecordSchema,
  type RunRecord,
  type StoredRun,
} from '../runs/record.js';
import { applyRunEvent, type RunEvent } from '../runs/journal.js';
import { catalogAllowlist } from './catalog-allowlist.js';
import type { Ending, Run } from './types.js';
import type { RepoImage } from '../image-context/request.js';

const SEAL_MAX_BYTES = 64 * 1024;

export async function applyVerified(run: Run, image: RepoImage, changeSet: ChangeSet): Promise<Ending> {
  const { record } = run;
  const patch = changeSetPatch(changeSet);
  run.journal.append({ kind: 'patch_saved', patchFile: await run.dir.writeFile(PATCH_FILE, patch) });
  const expected = new Map<string, string | null>();
  for (const entry of changeSet.entries)
    expected.set(entry.path, image.hostFiles.get(entry.path)?.sha256 ?? null);
  // What `apply <run>` writes later: the exact bytes and modes, and the host state they replace.
  const saved = serializeSavedChange(changeSet, expected);
  await run.dir.writeFile(SAVED_CHANGE_FILE, saved);
  // Sealed now that the tests passed on exactly this change: what is applied must be this.
  let unsealed: string | undefined;
  try {
    await sealRun(run, saved, patch);
  } catch (error) {
    unsealed = `the verified change could not be sealed: ${errorMessage(error)}`;
  }
  run.journal.append({ kind: 'apply', status: 'saved' });
  if (!run.options.apply) {
    return {
      outcome: 'ready-for-review',
      message: `Verified fix saved at ${record.patchFile} (not applied: --no-apply).${unsealed ? ` But ${unsealed}, so \`apply\` will refuse it: apply the patch by hand.` : ''}`,
      changeSet,
    };
  }
  run.journal.append({ kind: 'apply_start' });
  try {
    if (unsealed) throw new ApplyError(unsealed);
    // The same check as `apply <run>`: the change is read back from the run folder, its seal
    // checked, and gated again with the run's catalog (the one the user named for this run).
    const stored: StoredRun = { dir: run.dir.dir, record: storedForm(run.record) };
    const checked = await sealedChange(stored, run.options.env);
    const entries = await gatedEntries(stored.record, checked, run.catalog, run.repoDir);
    await applyChangeSet(
      run.repoDir,
      { entries },
      {
        expected: checked.expected,
        journalDir: defaultJournalDir(run.options.env),
      },
    );
    run.journal.append({ kind: 'apply', status: 'applied', files: entries.length });
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

/** The record as `run.json` gives it back (validated, unknown fields dropped): what a later apply reads. */
function storedForm(record: RunRecord): RunRecord {
  return runRecordSchema.parse(JSON.parse(JSON.stringify(record)));
}

/** Writes the run's seal (`verified-seal.ts`) over the change, the patch and the record as they are now. */
async function sealRun(run: Run, saved: string, patch: string): Promise<void> {
  const key = await ensureSealKey(sealKeyFile(run.options.env));
  const facts = {
    runId: run.record.id,
    record: sealedRecordHash(storedForm(run.record)),
    change: sha256(Buffer.from(saved)),
    patch: sha256(Buffer.from(patch)),
  };
  await run.dir.writeFile(SEAL_FILE, sealText(facts, key));
}

/**
 * The verified change a run saved, once its seal vouches for it: the saved change, the patch
 * and the record's sealed fields as they are now, checked against the seal with this user's
 * key. Anything edited, missing or sealed for another run is refused, named; nothing is written.
 */
async function sealedChange(stored: StoredRun, env: NodeJS.ProcessEnv): Promise<SavedChange> {
  const { record } = stored;
  const refuse = (problem: string, hint?: string) =>
    new UsageError(`run ${record.id}: ${problem}; refusing to apply it, nothing was written`, {
      hint:
        hint ??
        `What apply writes must be exactly what verification tested. Run \`sandbox-harness fix\` again, or review ${PATCH_FILE} and apply it by hand.`,
    });
  const change = await readRunFile(stored, SAVED_CHANGE_FILE, SAVED_CHANGE_MAX_BYTES);
  if (change === undefined) {
    throw refuse(
      `it has no ${SAVED_CHANGE_FILE} (recorded by an older harness?)`,
      record.patchFile
        ? `Apply its patch by hand after reading it: git apply ${record.patchFile}`
        : undefined,
    );
  }
  const patch = await readRunFile(stored, PATCH_FILE);
  if (patch === undefined) throw refuse(`its ${PATCH_FILE} is missing`);
  const keyFile = sealKeyFile(env);
  let key: Buffer | undefined;
  try {
    key = await readSealKey(keyFile);
  } catch (error) {
    throw refuse(
      errorMessage(error),
      `Remove ${keyFile} only if you know why it changed; runs sealed with it can no longer be applied.`,
    );
  }
  if (!key)
    throw refuse(
      `there is no sealing key (${keyFile}) to check its seal with: it was sealed by another user, or the key was removed`,
    );
  const problem = sealProblem(
    await readRunFile(stored, SEAL_FILE, SEAL_MAX_BYTES),
    {
      runId: record.id,
      record: sealedRecordHash(record),
      change: sha256(Buffer.from(change)),
      patch: sha256(Buffer.from(patch)),
    },
    key,
  );
  if (problem) throw refuse(problem);
  const saved = parseSavedChange(change);
  if ('problem' in saved)
    throw refuse(`${SAVED_CHANGE_FILE} is not a change this harness saved: ${saved.problem}`);
  return saved;
}

/** The saved entries, each judged by `catalog`'s gate for `repoDir`; a path it does not allow is refused. */
async function gatedEntries(
  record: RunRecord,
  saved: SavedChange,
  catalog: LoadedCatalog,
  repoDir: string,
): Promise<ChangeEntry[]> {
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
  return entries;
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

export interface SavedApplyOptions {
  env: NodeJS.ProcessEnv;
  /** The catalog to judge the change with (`--catalog`), relative to `cwd`; else one is found (`catalogForApply`). */
  catalogFile?: string;
  /** Where the command runs (default: this process's working directory). */
  cwd?: string;
}

/**
 * `apply <run>`: the change a verified run saved, written to the repo it ran on with the
 * same checks and the same atomic, journalled apply as `fix`. The saved change, its patch and
 * the record must be as the run sealed them when its tests passed (`verified-seal.ts`);
 * every path must pass the gate of the catalog the user names now (never one a record
 * names); every file it touches must still be what the run saw (a repo changed since is
 * refused, nothing written). The record says it was applied.
 */
export async function applySavedRun(
  stored: StoredRun,
  options: SavedApplyOptions,
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
  const saved = await sealedChange(stored, options.env);
  const repoDir = await repoOfRun(stored);
  const catalog = await catalogForApply(record, repoDir, options);
  const entries = await gatedEntries(record, saved, catalog, repoDir);
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
 * The catalog `apply` judges a change with: the one the user names (`--catalog`), else the
 * only catalog found where the command runs (as `fix` finds it) or in the repo, when it is
 * the catalog of that repo. Never the path a record names: a record is data anyone with
 * the repo can edit, and a permissive catalog planted beside it would let anything through.
 */
async function catalogForApply(
  record: RunRecord,
  repoDir: string,
  options: SavedApplyOptions,
): Promise<LoadedCatalog> {
  const cwd = options.cwd ?? process.cwd();
  const unreadable = (file: string, error: unknown) =>
    new UsageError(`run ${record.id}: the catalog ${file} cannot be read: ${errorMessage(error)}`, {
      hint: 'apply checks the change against the catalog again; name a valid one with --catalog.',
    });
  if (options.catalogFile) {
    const file = resolve(cwd, options.catalogFile);
    return loadCatalog(file, { cwd }).catch((error: unknown) => {
      throw unreadable(options.catalogFile!, error);
    });
  }
  for (const where of [cwd, repoDir]) {
    const found = await findCatalogIfAny(where).catch(() => undefined);
    if (!found) continue;
    const loaded = await loadCatalog(found, { cwd }).catch(() => undefined);
    if (loaded && (await realpath(loaded.repoDir).catch(() => undefined)) === repoDir) return loaded;
  }
  throw new UsageError(
    `run ${record.id}: which catalog should the change be checked against? None of this repo's was found here or in ${repoDir}`,
    {
      hint: `Name it: sandbox-harness apply ${record.id} --catalog <file> (the run was made with ${record.catalog.file}; use it if it is still yours).`,
    },
  );
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
