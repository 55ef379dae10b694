/**
 * One error family for the whole harness. Every error a user can meet carries a stable
 * `code`, a category that decides the process exit code (see `exitCodeFor`), and an
 * optional `hint` saying what to do about it. Only `src/main.ts` turns these into exit
 * codes; only `src/agent/tool-errors.ts` turns them into tool results for the model.
 */
export type ErrorCategory = 'usage' | 'config' | 'infrastructure' | 'interrupted' | 'internal';

export interface HarnessErrorOptions {
  hint?: string;
  cause?: unknown;
  details?: Record<string, unknown>;
}

export class HarnessError extends Error {
  readonly code: string;
  readonly category: ErrorCategory;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: string, category: ErrorCategory, message: string, options: HarnessErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.category = category;
    this.hint = options.hint;
    this.details = options.details;
  }
}

/** Bad command-line input: unknown flag value, unknown run id, empty ticket. */
export class UsageError extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('USAGE', 'usage', message, options);
  }
}

/** A catalog, suite, cassette or other input file that does not validate. */
export class ConfigError extends HarnessError {
  readonly problems: string[];
  constructor(message: string, problems: string[] = [], options?: HarnessErrorOptions) {
    super('CONFIG', 'config', message, options);
    this.problems = problems;
  }
}

/** The Docker daemon cannot be reached or refused a request that should have worked. */
export class SandboxUnavailable extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('SANDBOX_UNAVAILABLE', 'infrastructure', message, options);
  }
}

/** A sandbox that existed is gone or no longer answers (killed, OOM, daemon restarted). */
export class SandboxDead extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('SANDBOX_DEAD', 'infrastructure', message, options);
  }
}

/** An image could not be built, pulled or bootstrapped. */
export class ImageError extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('IMAGE', 'infrastructure', message, options);
  }
}

/** A file inside the sandbox could not be read or written (missing, too large, not a file). */
export class SandboxFileError extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('SANDBOX_FILE', 'usage', message, options);
  }
}

/** The model API failed after retries, or answered something we cannot use. */
export class ModelError extends HarnessError {
  readonly retryable: boolean;
  constructor(message: string, retryable = false, options?: HarnessErrorOptions) {
    super('MODEL', 'infrastructure', message, options);
    this.retryable = retryable;
  }
}

/** The user pressed Ctrl-C (or a signal arrived); work stopped on purpose. */
export class Interrupted extends HarnessError {
  constructor(message = 'interrupted', options?: HarnessErrorOptions) {
    super('INTERRUPTED', 'interrupted', message, options);
  }
}

/** Writing back to the host repo was refused or failed (and was rolled back). */
export class ApplyError extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('APPLY', 'usage', message, options);
  }
}

export const EXIT_CODES = {
  ok: 0,
  taskFailed: 1,
  usage: 2,
  infrastructure: 3,
  interrupted: 130,
  internal: 70,
} as const;

export function exitCodeFor(error: unknown): number {
  if (!(error instanceof HarnessError)) return EXIT_CODES.internal;
  switch (error.category) {
    case 'usage':
    case 'config':
      return EXIT_CODES.usage;
    case 'infrastructure':
      return EXIT_CODES.infrastructure;
    case 'interrupted':
      return EXIT_CODES.interrupted;
    case 'internal':
      return EXIT_CODES.internal;
  }
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
