import { posix } from 'node:path';
import { SandboxFileError } from '../../errors.js';
import { WORKSPACE } from '../types.js';

export function toWorkspacePath(path: string): string {
  const absolute = posix.isAbsolute(path) ? posix.normalize(path) : posix.join(WORKSPACE, path);
  return absolute.length > 1 ? absolute.replace(/\/+$/, '') : absolute;
}

/**
 * A workspace-relative path in the one form the scripts accept: no leading `/`, no `.` or
 * `..` or empty segments, no NUL. Anything else is refused, never reinterpreted: the path
 * that is checked must be the path that is used.
 */
export function workspaceRelative(path: string): string {
  let rel = path;
  if (rel.startsWith(`${WORKSPACE}/`)) rel = rel.slice(WORKSPACE.length + 1);
  const bad =
    rel === '' ||
    rel.includes('\0') ||
    rel.startsWith('/') ||
    rel.split('/').some((segment) => segment === '' || segment === '.' || segment === '..');
  if (bad) throw new SandboxFileError(`${path}: not a plain path inside ${WORKSPACE}`, 'invalid-path');
  return rel;
}
