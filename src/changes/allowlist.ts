/**
 * Which changed paths may come back to the host. Paths come from a hostile container, so
 * anything that is not a plain, normalised, repo-relative posix path is refused before any
 * glob sees it: globs are about intent, not about parsing tricks.
 */
import picomatch from 'picomatch';
import { hasControlCharacter } from '../catalog/field-checks.js';

export interface AllowlistOptions {
  /** Globs (repo-relative, picomatch) of the files the agent may change. */
  editable: readonly string[];
  /** Paths or globs that are refused even when `editable` matches them (e.g. the catalog). */
  neverEditable?: readonly string[];
  /** More protected paths (e.g. the catalog's sandbox Dockerfile); see `PROTECTED_PATHS`. */
  protected?: readonly string[];
  /**
   * Globs of the held-out tests: never editable, and refused with their own reason (not the
   * catalog's), which names no held-out file beyond the path the agent itself wrote.
   */
  heldOut?: readonly string[];
}

/** Why a change to a held-out test is refused; names nothing of the held-out files. */
export const HELD_OUT_REASON =
  'is a held-out test: held-out tests are kept out of your sandbox and run only at verification, so no change to them is ever accepted';

export type RefusedPathKind = 'invalid-path' | 'never-editable' | 'protected' | 'not-editable' | 'collision';

export interface Classification {
  allowed: boolean;
  kind?: RefusedPathKind;
  /** Why the path is refused, in words the model can act on. */
  reason?: string;
}

export interface Allowlist {
  readonly editable: readonly string[];
  readonly neverEditable: readonly string[];
  /** One path on its own (no collision check). */
  check(path: string): Classification;
  /** A whole set of changed paths, including collisions between them. */
  classify(paths: readonly string[]): Map<string, Classification>;
}

/**
 * Always refused. Nested `.git` entries too: a `.git` file in a subfolder is a gitdir
 * pointer, and a hook or config written there runs on the developer's machine.
 */
export const ALWAYS_NEVER_EDITABLE = ['.git', '.git/**', '**/.git', '**/.git/**'];

/**
 * Paths that steer the harness, the build or the developer's machine: run records, the
 * sandbox recipe and its ignore file, CI workflows, git hooks. A broad glob (`**`) never
 * makes them editable; only an editable entry that names the path exactly does.
 */
export const PROTECTED_PATHS = [
  '.sandbox-harness',
  '.sandbox-harness/**',
  'Dockerfile.sandbox',
  '.dockerignore',
  '.github/workflows/**',
  '.husky/**',
  '.githooks/**',
];

export function createAllowlist(options: AllowlistOptions): Allowlist {
  const editable = [...options.editable];
  const heldOut = [...(options.heldOut ?? [])];
  const neverEditable = [...ALWAYS_NEVER_EDITABLE, ...(options.neverEditable ?? []), ...heldOut];
  const isHeldOut = heldOut.length === 0 ? () => false : picomatch(heldOut, { dot: true, nocase: true });
  const isEditable =
    editable.length === 0 ? () => false : picomatch(editable, { dot: true, strictBrackets: true });
  // Case-insensitive on purpose: on macOS or Windows `.GIT/config` *is* `.git/config`.
  const isNever = picomatch(neverEditable, { dot: true, nocase: true });
  const isProtected = picomatch([...PROTECTED_PATHS, ...(options.protected ?? [])], {
    dot: true,
    nocase: true,
  });
  const exact = new Set(editable);

  const check = (path: string): Classification => {
    const problem = pathProblem(path);
    if (problem) return { allowed: false, kind: 'invalid-path', reason: problem };
    const forms = [...new Set([path, path.normalize('NFC'), path.normalize('NFD')])];
    if (forms.some((form) => isNever(form))) {
      return {
        allowed: false,
        kind: 'never-editable',
        reason: path.split('/').some((s) => s.toLowerCase() === '.git')
          ? 'is inside .git, which is never editable'
          : forms.some((form) => isHeldOut(form))
            ? HELD_OUT_REASON
            : 'is never editable (the service catalog and its rules are read-only)',
      };
    }
    if (forms.some((form) => isProtected(form)) && !exact.has(path)) {
      return {
        allowed: false,
        kind: 'protected',
        reason:
          'is a protected path (run records, the sandbox recipe, CI workflows, git hooks): only an editable entry that names it exactly makes it editable',
      };
    }
    if (!isEditable(path))
      return { allowed: false, kind: 'not-editable', reason: 'is not in the editable files' };
    return { allowed: true };
  };

  const classify = (paths: readonly string[]): Map<string, Classification> => {
    const out = new Map<string, Classification>();
    const collisions = findCollisions(paths);
    for (const path of paths) {
      const others = collisions.get(path);
      if (others) {
        out.set(path, {
          allowed: false,
          kind: 'collision',
          reason: `collides with ${others.map((p) => JSON.stringify(p)).join(', ')} when letter case or Unicode normalisation is ignored (the same file on macOS and Windows)`,
        });
      } else {
        out.set(path, check(path));
      }
    }
    return out;
  };

  return { editable, neverEditable, check, classify };
}

/**
 * Why a path is not a plain repo-relative posix path, or undefined. Non-normalised forms
 * (`a//b`, `./a`, `a/`) are refused rather than normalised: reinterpreting a hostile path is
 * how "the path that was checked" and "the path that was written" come apart.
 */
export function pathProblem(path: string): string | undefined {
  if (path === '') return 'is an empty path';
  if (hasControlCharacter(path)) return 'contains a NUL or control character';
  if (hasBidiControl(path)) return 'contains invisible text-direction characters';
  if (path.includes('\\')) return 'contains a backslash; paths use forward slashes';
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path))
    return 'is an absolute path; paths must be relative to the repo';
  const segments = path.split('/');
  if (segments.includes('..')) return 'contains ".." (a path that leaves its folder)';
  if (segments.some((s) => s === '' || s === '.')) return 'is not a normalised path (empty or "." segments)';
  return undefined;
}

// Bidi overrides make a path read differently in a review than on disk ("Trojan Source").
function hasBidiControl(text: string): boolean {
  return /[\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(text);
}

/** Paths that name the same file on a case-insensitive or normalising filesystem. */
export function findCollisions(paths: readonly string[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const path of new Set(paths)) {
    const key = path.normalize('NFC').toLowerCase();
    const group = groups.get(key);
    if (group) group.push(path);
    else groups.set(key, [path]);
  }
  const out = new Map<string, string[]>();
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    for (const path of group)
      out.set(
        path,
        group.filter((p) => p !== path),
      );
  }
  return out;
}

/**
 * A glob that matches exactly one path, whatever characters it holds: each glob character
 * in a one-character class (`[*]`), so a test file named `a[1].ts` or `(x).js` is named, not
 * matched as a pattern. Passes the catalog's glob checks (no backslash).
 */
export function literalGlob(path: string): string {
  return path.replace(/[*?[\]{}()!+@]/g, (c) => `[${c}]`);
}
