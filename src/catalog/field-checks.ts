/**
 * The checks every section of the catalog schema is built from: globs and repo-relative
 * paths that must stay inside the repo, variables that must not carry a secret into a
 * sandbox, and the few message helpers that keep the schema's wording one convention
 * (`src/yaml-validate.ts`: a type or range message is the "expected …" clause; a refinement's
 * is the whole sentence).
 */
import picomatch from 'picomatch';
import { z } from 'zod';

// ---------------------------------------------------------------------------------------
// Globs and repo-relative paths

/**
 * Why a glob cannot be used in an allowlist, or undefined if it can. Negation is refused
 * because a lone `!x` in picomatch matches everything except `x`: one character would turn
 * an allowlist into a denylist.
 */
export function globProblem(glob: string): string | undefined {
  if (glob.trim() === '') return 'an empty pattern matches nothing';
  if (glob.startsWith('!')) return 'negated patterns ("!…") are not supported: list what IS editable';
  if (glob.includes('\\')) return 'use forward slashes; a backslash is not a path separator here';
  if (glob.startsWith('/') || /^[A-Za-z]:/.test(glob))
    return 'must be relative to the repo root, not absolute';
  if (glob.startsWith('./')) return 'write it relative to the repo root without a leading "./"';
  if (glob.split('/').includes('..')) return 'must not contain ".." (it has to stay inside the repo)';
  if (hasControlCharacter(glob)) return 'must not contain control characters';
  try {
    picomatch.makeRe(glob, { strictBrackets: true, dot: true });
  } catch (error) {
    return `is not a valid glob: ${error instanceof Error ? error.message : String(error)}`;
  }
  return undefined;
}

export function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || (code >= 0x7f && code < 0xa0)) return true;
  }
  return false;
}

export const glob = z
  .string({ error: 'expected a glob pattern such as "src/**/*.ts"' })
  .superRefine((value, ctx) => {
    const problem = globProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: `glob ${JSON.stringify(value)} ${problem}` });
  });

function relativePathProblem(path: string): string | undefined {
  if (path.trim() === '') return 'must not be empty';
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) return 'must be relative to the repo, not absolute';
  if (path.includes('\\')) return 'use forward slashes';
  if (path.split('/').includes('..')) return 'must not contain ".." (it has to stay inside the repo)';
  return undefined;
}

export const repoRelativePath = z
  .string({ error: 'expected a path relative to the repo' })
  .superRefine((value, ctx) => {
    const problem = relativePathProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: `path ${JSON.stringify(value)} ${problem}` });
  });

// ---------------------------------------------------------------------------------------
// Secrets

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

const TOKEN_SHAPES: { pattern: RegExp; what: string }[] = [
  { pattern: /^sk-[A-Za-z0-9_-]{16,}/, what: 'an API key ("sk-…")' },
  { pattern: /^(gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}/, what: 'a GitHub token' },
  { pattern: /^(AKIA|ASIA)[A-Z0-9]{16}$/, what: 'an AWS access key id' },
  { pattern: /^xox[abprs]-/, what: 'a Slack token' },
  { pattern: /^glpat-[A-Za-z0-9_-]{20,}/, what: 'a GitLab token' },
  { pattern: /^AIza[0-9A-Za-z_-]{35}$/, what: 'a Google API key' },
  { pattern: /^npm_[A-Za-z0-9]{36}$/, what: 'an npm token' },
  { pattern: /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/, what: 'a JSON Web Token' },
  { pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----/, what: 'a private key' },
  { pattern: /^[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:[^/\s@]+@/i, what: 'a URL with a password in it' },
];

function shannonBits(value: string): number {
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

/** What kind of credential a value looks like, or undefined. Never returns the value itself. */
export function secretShape(value: string): string | undefined {
  for (const { pattern, what } of TOKEN_SHAPES) if (pattern.test(value)) return what;
  // Long unbroken runs of mixed letters and digits with high entropy are how most keys look;
  // paths, versions and sentences have separators or repeat themselves.
  if (
    value.length >= 32 &&
    /^[A-Za-z0-9+/=_.-]+$/.test(value) &&
    /[A-Za-z]/.test(value) &&
    /[0-9]/.test(value) &&
    shannonBits(value) >= 3.5
  ) {
    return 'a long random string (an API key or token)';
  }
  return undefined;
}

/** Why a variable must not reach a sandbox, or undefined. */
export function secretProblem(name: string, value: string): string | undefined {
  const named = SECRET_NAME.exec(name);
  if (named) {
    return `refused: the name contains "${named[0].toUpperCase()}", which marks a secret; sandboxes never receive credentials`;
  }
  const shape = secretShape(value);
  if (shape) return `refused: the value looks like ${shape}; sandboxes never receive credentials`;
  return undefined;
}

// YAML reads `PORT: 8080` as a number; the process environment only knows strings.
const envValue = z
  .union([z.string(), z.number(), z.boolean()], { error: 'expected a string, number or boolean value' })
  .transform((value) => String(value));

export const variables = (what: string) =>
  z
    .record(
      z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: `expected a ${what} name of letters, digits and "_"` }),
      envValue,
      { error: `expected a mapping of ${what} NAME: value` },
    )
    .superRefine((record, ctx) => {
      for (const [name, value] of Object.entries(record)) {
        const problem = secretProblem(name, value);
        if (problem) ctx.addIssue({ code: 'custom', path: [name], message: problem });
      }
    });

// ---------------------------------------------------------------------------------------
// Messages

export const nonEmpty = (what: string) =>
  z.string({ error: `expected ${what}` }).min(1, { error: `expected ${what}` });

/**
 * A message for a value of the wrong type only; other issues of the same schema (unknown
 * keys, in particular) keep the generic, more specific wording.
 */
export const typeError = (message: string) => (issue: { code?: string }) =>
  issue.code === 'invalid_type' ? message : undefined;

export const int = (min: number, max: number) =>
  z
    .int({ error: `expected an integer from ${min} to ${max}` })
    .min(min, { error: `expected an integer from ${min} to ${max}` })
    .max(max, { error: `expected an integer from ${min} to ${max}` });
