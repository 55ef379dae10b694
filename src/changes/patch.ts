/**
 * The change set as a git-style unified diff: what a reviewer reads and what `git apply`
 * accepts. Binary files (and text that is not UTF-8, which a text diff would corrupt) are
 * only noted; their bytes travel through `applyChangeSet`, not through the patch.
 */
import { formatPatch, structuredPatch, type StructuredPatch } from 'diff';
import type { ChangeEntry, ChangeSet } from './change-set.js';
import { normalisedMode } from './change-set.js';

export interface PatchOptions {
  /** Lines of context around each change (git's default is 3). */
  context?: number;
}

/** A unified diff of every entry that carries the data to describe it. */
export function changeSetPatch(changeSet: Pick<ChangeSet, 'entries'>, options: PatchOptions = {}): string {
  return changeSet.entries.map((entry) => entryPatch(entry, options)).join('');
}

export function entryPatch(entry: ChangeEntry, options: PatchOptions = {}): string {
  if (entry.refused !== undefined) return '';
  if (entry.kind !== 'deleted' && entry.content === undefined) return '';

  const isCreate = entry.kind === 'added';
  const isDelete = entry.kind === 'deleted';
  const oldMode = entry.oldMode === undefined ? undefined : gitMode(entry.oldMode);
  const newMode = entry.mode === undefined ? undefined : gitMode(entry.mode);
  const header: StructuredPatch = {
    oldFileName: isCreate ? '/dev/null' : `a/${entry.path}`,
    newFileName: isDelete ? '/dev/null' : `b/${entry.path}`,
    oldHeader: undefined,
    newHeader: undefined,
    hunks: [],
    isGit: true,
    isCreate,
    isDelete,
    ...(isCreate ? { newMode: newMode ?? '100644' } : {}),
    ...(isDelete ? { oldMode: oldMode ?? '100644' } : {}),
    ...(!isCreate && !isDelete && oldMode !== undefined && newMode !== undefined && oldMode !== newMode
      ? { oldMode, newMode }
      : {}),
  };

  const oldText = isCreate ? '' : decodeText(entry.oldContent ?? Buffer.alloc(0));
  const newText = isDelete ? '' : decodeText(entry.content ?? Buffer.alloc(0));
  if (entry.binary || oldText === undefined || newText === undefined) {
    const from = isCreate ? '/dev/null' : `a/${entry.path}`;
    const to = isDelete ? '/dev/null' : `b/${entry.path}`;
    return `${formatPatch(header)}Binary files ${from} and ${to} differ\n`;
  }

  const hunks = structuredPatch(
    header.oldFileName ?? '',
    header.newFileName ?? '',
    oldText,
    newText,
    undefined,
    undefined,
    {
      context: options.context ?? 3,
    },
  ).hunks;
  if (hunks.length === 0 && !isCreate && !isDelete && header.oldMode === undefined) return '';
  return formatPatch({ ...header, hunks });
}

function gitMode(mode: number): string {
  return normalisedMode(mode) === 0o755 ? '100755' : '100644';
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function decodeText(content: Buffer): string | undefined {
  try {
    return utf8.decode(content);
  } catch {
    return undefined;
  }
}
