import { posix } from 'node:path';
import { WORKSPACE } from '../../sandbox/types.js';
import { ToolError } from '../tool-errors.js';
import type { EditablePolicy } from './types.js';

/**
 * A model-supplied path as a normalised workspace-relative path (`.` for the workspace
 * itself). Absolute paths are accepted only inside /workspace; `..` may not climb out.
 */
export function resolveWorkspacePath(raw: string): string {
  if (raw === '')
    throw new ToolError('path is empty', 'give a path relative to /workspace, e.g. src/index.ts');
  if (raw.includes('\0')) throw new ToolError('path contains a NUL byte');
  let path = raw;
  if (path.startsWith('/')) {
    const normalised = posix.normalize(path);
    if (normalised === WORKSPACE || normalised === `${WORKSPACE}/`) return '.';
    if (!normalised.startsWith(`${WORKSPACE}/`)) {
      throw new ToolError(
        `${raw} is outside ${WORKSPACE}`,
        `use a path relative to ${WORKSPACE}, e.g. src/index.ts`,
      );
    }
    path = normalised.slice(WORKSPACE.length + 1);
  }
  const normalised = posix.normalize(path).replace(/\/+$/, '');
  if (normalised === '..' || normalised.startsWith('../')) {
    throw new ToolError(
      `${raw} leads outside ${WORKSPACE}`,
      `use a path relative to ${WORKSPACE} without ..`,
    );
  }
  return normalised === '' ? '.' : normalised;
}

/** A path that must name a file, not the workspace itself. */
export function resolveFilePath(raw: string): string {
  const path = resolveWorkspacePath(raw);
  if (path === '.')
    throw new ToolError(`${raw} is the workspace directory, not a file`, 'use list_files to see its files');
  return path;
}

export function assertEditable(path: string, editable: EditablePolicy): void {
  if (editable.isEditable(path)) return;
  const globs = editable.globs.length > 0 ? editable.globs.join(', ') : '(none)';
  throw new ToolError(
    `${path} is not editable: only paths matching these globs may be changed: ${globs}`,
    'change only the editable files; a change to any other path rejects the whole attempt',
  );
}

// One quoting function for the whole harness: the sandbox's.
export { shellQuote } from '../../sandbox/shell.js';
