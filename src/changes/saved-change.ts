/**
 * A verified change as a run keeps it for a later `sandbox-harness apply <run>`: the bytes
 * and modes that passed the gate and verification, the deletions it makes, and for every
 * path the state of the host file the run was built from (its sha256, or null when it did
 * not exist). The patch in the run folder is for people and `git apply`; it cannot carry
 * binary files or modes exactly, so this file is what an apply writes. It sits in a folder
 * anyone with the repo can edit, so it is sealed (`verified-seal.ts`) and read as hostile
 * data: size and count checked before anything is decoded, every path plain, every content
 * re-hashed against the hash it claims, modes only the two verification writes.
 *
 * Modes are saved normalised (0644, or 0755 for an executable), as verification wrote them
 * into the sandbox it tested: a set-id or sticky bit, or any other mode, is never saved, and
 * a saved file that claims one is refused rather than normalised (it was not written here).
 */
import { z } from 'zod';
import { pathProblem } from './allowlist.js';
import { DEFAULT_CHANGE_LIMITS, normalisedMode, type ChangeEntry, type ChangeSet } from './change-set.js';
import { sha256 } from './hash.js';

export const SAVED_CHANGE_FILE = 'verified-change.json';

const SHA256 = /^[0-9a-f]{64}$/;

/** What the host file was when the run read it; null: there was none. */
const expectedSha256 = z.string().regex(SHA256).nullable();

const writtenEntrySchema = z.strictObject({
  path: z.string().min(1).max(4096),
  kind: z.enum(['added', 'modified']),
  mode: z.union([z.literal(0o644), z.literal(0o755)], {
    error: 'expected mode 420 (0644) or 493 (0755): no other mode is ever saved',
  }),
  sha256: z.string().regex(SHA256),
  /** base64 */
  content: z.string(),
  expectedSha256,
});

const deletedEntrySchema = z.strictObject({
  path: z.string().min(1).max(4096),
  kind: z.literal('deleted'),
  expectedSha256,
});

const savedChangeSchema = z.strictObject({
  version: z.literal(2),
  entries: z
    .array(z.discriminatedUnion('kind', [writtenEntrySchema, deletedEntrySchema]))
    .max(DEFAULT_CHANGE_LIMITS.maxFiles),
});

export interface SavedChange {
  changeSet: Pick<ChangeSet, 'entries'>;
  /** For `applyChangeSet`: path -> the host file's sha256 the run saw, or null. */
  expected: Map<string, string | null>;
}

/**
 * The JSON to keep next to the patch: every entry of the verified change (the gate let the
 * whole of it through), deletions included, so that an apply sees exactly what verification
 * tested and refuses what it cannot write, as `fix` does, rather than write part of it.
 */
export function serializeSavedChange(
  changeSet: Pick<ChangeSet, 'entries'>,
  expected: ReadonlyMap<string, string | null>,
): string {
  const entries = changeSet.entries
    .filter((e) => e.allowed && e.refused === undefined && (e.kind === 'deleted' || e.content !== undefined))
    .map((e) => {
      const expectedSha256 = expected.get(e.path) ?? null;
      if (e.kind === 'deleted') return { path: e.path, kind: 'deleted' as const, expectedSha256 };
      const content = e.content as Buffer;
      return {
        path: e.path,
        kind: e.kind,
        mode: normalisedMode(e.mode ?? 0o644),
        sha256: sha256(content),
        content: content.toString('base64'),
        expectedSha256,
      };
    });
  return `${JSON.stringify({ version: 2, entries }, null, 2)}\n`;
}

/** Largest saved file read: the change limit in base64 plus room for the JSON around it. */
export const SAVED_CHANGE_MAX_BYTES = Math.ceil((DEFAULT_CHANGE_LIMITS.maxTotalBytes * 4) / 3) + 1024 * 1024;

/** The change and the expected host state, or why the text is not a saved change. */
export function parseSavedChange(text: string): SavedChange | { problem: string } {
  if (Buffer.byteLength(text) > SAVED_CHANGE_MAX_BYTES)
    return { problem: `larger than ${SAVED_CHANGE_MAX_BYTES} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problem: 'not JSON' };
  }
  const parsed = savedChangeSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { problem: issue ? `${issue.path.join('.') || '(file)'}: ${issue.message}` : 'invalid' };
  }
  const entries: ChangeEntry[] = [];
  const expected = new Map<string, string | null>();
  let total = 0;
  for (const e of parsed.data.entries) {
    const problem = pathProblem(e.path);
    if (problem) return { problem: `${JSON.stringify(e.path)} ${problem}` };
    if (expected.has(e.path)) return { problem: `${e.path} is listed twice` };
    if (e.kind === 'deleted') {
      expected.set(e.path, e.expectedSha256);
      entries.push({
        path: e.path,
        kind: 'deleted',
        type: 'file',
        binary: false,
        modeChanged: false,
        allowed: false,
      });
      continue;
    }
    const content = Buffer.from(e.content, 'base64');
    if (content.toString('base64') !== e.content) return { problem: `${e.path}: content is not base64` };
    if (sha256(content) !== e.sha256) return { problem: `${e.path}: content does not match its sha256` };
    if (content.length > DEFAULT_CHANGE_LIMITS.maxFileBytes)
      return { problem: `${e.path} is larger than ${DEFAULT_CHANGE_LIMITS.maxFileBytes} bytes` };
    total += content.length;
    if (total > DEFAULT_CHANGE_LIMITS.maxTotalBytes)
      return { problem: `more than ${DEFAULT_CHANGE_LIMITS.maxTotalBytes} bytes in all` };
    expected.set(e.path, e.expectedSha256);
    entries.push({
      path: e.path,
      kind: e.kind,
      type: 'file',
      content,
      mode: e.mode,
      binary: content.includes(0),
      modeChanged: false,
      // The gate is applied again by the caller, with the catalog as it is now.
      allowed: false,
    });
  }
  return { changeSet: { entries }, expected };
}
