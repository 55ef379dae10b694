/**
 * `fix --continue <run>`: start from where an earlier run's last attempt left off. Its patch
 * is replayed onto the repo as it is now (on the host, in memory: nothing is written to the
 * repo), the resulting files are written into the first attempt's fresh sandbox before the
 * agent starts, the attempt's feedback (test output, gate reasons, review) goes to the model,
 * and attempts are numbered on from the earlier run's.
 *
 * The earlier run's files are data: its record is validated, its patch is read without
 * following links and capped, every path in it must be a plain workspace path, and whatever
 * it writes is gated and verified like any change of the agent's. A patch that no longer
 * applies to the repo is refused, naming the file, rather than half-applied.
 */
import { parsePatch, applyPatch } from 'diff';
import { ConfigError } from '../errors.js';
import { readRepoFileNoFollow } from '../changes/host-read.js';
import { readRunFile, resolveRun, type RunRecord } from '../runs/record.js';
import type { Message } from '../llm/types.js';
import type { WriteFile } from '../sandbox/types.js';

export interface Continuation {
  runId: string;
  /** Attempts the earlier run made: this run's are numbered on from there. */
  attemptsBefore: number;
  /** The earlier change, replayed onto the repo as it is now. */
  files: WriteFile[];
  deletions: string[];
  /** What the earlier run's last attempt taught (test output, gate reasons, review). */
  feedback?: string;
  /** The earlier run's last attempt sandbox, when it was kept (`--from-sandbox` forks it). */
  keptSandbox?: { id: string; role: string; engine?: string | undefined };
  /** A seeded run (`seed.ts`): the earlier run's last conversation, the first attempt's history. */
  messages?: Message[];
}

const MAX_PATCH_BYTES = 8 * 1024 * 1024;
const MAX_FILES = 200;

function workspacePath(name: string | undefined, prefix: 'a/' | 'b/'): string | undefined {
  if (name === undefined || name === '/dev/null') return undefined;
  const path = name.startsWith(prefix) ? name.slice(prefix.length) : name;
  const parts = path.split('/');
  if (
    path === '' ||
    path.startsWith('/') ||
    parts.some((p) => p === '' || p === '.' || p === '..' || p === '.git')
  )
    throw new ConfigError(
      `the earlier run's patch names a path that is not a plain workspace path: ${JSON.stringify(name)}`,
    );
  return path;
}

export async function loadContinuation(runsDir: string, ref: string, repoDir: string): Promise<Continuation> {
  const run = await resolveRun(runsDir, ref);
  const last = run.record.attempts[run.record.attempts.length - 1];
  if (!last) throw new ConfigError(`run ${run.record.id} made no attempt: there is nothing to continue from`);
  // Bounded as it is read: a planted multi-GB patch is refused, never loaded.
  const patchText = (await readRunFile(run, `attempts/${last.n}/patch.diff`, MAX_PATCH_BYTES)) ?? '';
  const files: WriteFile[] = [];
  const deletions: string[] = [];
  const patches = patchText.trim() === '' ? [] : parsePatch(patchText);
  if (patches.length > MAX_FILES)
    throw new ConfigError(
      `run ${run.record.id}: the patch of attempt ${last.n} changes more than ${MAX_FILES} files`,
    );
  for (const patch of patches) {
    const oldPath = workspacePath(patch.oldFileName, 'a/');
    const newPath = workspacePath(patch.newFileName, 'b/');
    const path = newPath ?? oldPath;
    if (!path) continue;
    if (patch.hunks.length === 0 && !patch.isDelete && !patch.isCreate)
      throw new ConfigError(
        `run ${run.record.id}: ${path} is a binary or mode-only change; it cannot be replayed`,
      );
    const current = oldPath ? await readRepoFileNoFollow(repoDir, oldPath) : undefined;
    if (oldPath && !current) {
      throw new ConfigError(
        `the patch of run ${run.record.id} no longer applies: ${oldPath} is not in the repo any more`,
      );
    }
    if (!newPath) {
      deletions.push(oldPath!);
      continue;
    }
    const result = applyPatch(current ? current.content.toString('utf8') : '', patch);
    if (result === false) {
      throw new ConfigError(
        `the patch of run ${run.record.id} no longer applies: ${path} changed since that run`,
        [],
        { hint: 'Run fix without --continue, or put the file back as it was.' },
      );
    }
    const newMode = patch.newMode ? Number.parseInt(patch.newMode.slice(-3), 8) : undefined;
    files.push({ path: newPath, content: result, mode: newMode ?? current?.mode ?? 0o644 });
  }
  return {
    runId: run.record.id,
    attemptsBefore: run.record.attempts.length,
    files,
    deletions,
    ...(last.feedback ? { feedback: last.feedback } : {}),
    ...keptSandboxOf(run.record, last.n),
  };
}

function keptSandboxOf(record: RunRecord, n: number): Pick<Continuation, 'keptSandbox'> {
  const kept = record.containers.find((c) => c.role === `attempt-${n}` && c.kept);
  return kept ? { keptSandbox: { id: kept.id, role: kept.role, engine: kept.engine } } : {};
}

/** What the model is told first when a run continues another. */
export function continuationFeedback(continuation: Continuation): string {
  const changed = [...continuation.files.map((f) => f.path), ...continuation.deletions];
  const what =
    changed.length > 0
      ? `Your earlier change (${changed.join(', ')}) is already in the workspace.`
      : 'The earlier attempt left no change in the workspace.';
  return [
    `This run continues run ${continuation.runId}, which made ${continuation.attemptsBefore} attempt(s). ${what}`,
    continuation.feedback ? `What its last attempt taught:\n${continuation.feedback}` : '',
  ]
    .filter(Boolean)
    .join('\n\n');
}
