/** What a file script's exit code means, as the error the caller gets (`SandboxFileError`). */
import { SandboxFileError, type SandboxFileProblem } from '../../errors.js';
import { WORKSPACE } from '../types.js';
import type { ScriptResult } from './exec.js';
import { FILE_PROBLEMS } from './scripts.js';

function problemOf(exitCode: number): SandboxFileProblem | undefined {
  const problem = FILE_PROBLEMS[exitCode as keyof typeof FILE_PROBLEMS];
  if (problem === 'not-a-folder') return 'missing';
  return problem;
}

function describe(problem: SandboxFileProblem, path: string, detail: string): string {
  switch (problem) {
    case 'missing':
      return detail && detail !== path
        ? `${path}: ${detail} is not a folder or does not exist`
        : `${path}: no such file`;
    case 'through-link':
      return `${path}: ${detail || path} is a symbolic link; files are never read or written through a link`;
    case 'not-a-file':
      return `${path}: not a regular file`;
    case 'is-a-directory':
      return `${path}: is a directory, not a file`;
    case 'too-large':
      return `${path}: ${detail} bytes is over the read limit`;
    case 'permission':
      return `${path}: permission denied${detail && detail !== path ? ` (${detail})` : ''}`;
    case 'invalid-path':
      return `${path}: not a plain path inside ${WORKSPACE}`;
  }
}

/** The error of a file script that failed on `path`: its problem by exit code, else permission. */
export function fileProblem(result: ScriptResult, path: string): SandboxFileError {
  const problem = problemOf(result.exitCode);
  if (!problem) {
    return new SandboxFileError(
      `${path}: the sandbox could not do it (exit ${result.exitCode}${result.stderr.trim() ? `: ${result.stderr.trim().slice(0, 300)}` : ''})`,
      'permission',
    );
  }
  return new SandboxFileError(describe(problem, path, result.stderr.trim().slice(0, 500)), problem);
}
