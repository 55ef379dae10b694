/**
 * One error family for the whole harness. Every error a user can meet carries a stable
 * `code`, a category that decides the run outcome and the process exit code (see
 * `src/cli/exit-codes.ts`, the only place that maps them), and an optional `hint` saying
 * what to do about it. Only `src/agent/tool-errors.ts` turns them into tool results.
 */
import { formatBytes } from './format.js';

export type ErrorCategory = 'usage' | 'config' | 'infrastructure' | 'interrupted' | 'limit' | 'internal';

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

/**
 * The machine a sandbox ran on (a cluster's node) was lost or failed a step. It names that
 * machine because a run can fail on a node that is not its own (the eval's shared baseline runs
 * in another run's job): an eval blames the node that failed, not the one its attempt was on.
 */
export class NodeFailure extends SandboxUnavailable {
  constructor(
    /** Undefined when the cluster's name for it was not fit to keep (see the backend's check). */
    readonly node: string | undefined,
    message: string,
    options?: HarnessErrorOptions,
  ) {
    super(message, options);
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

/** Why a sandbox file operation was refused; stable, so callers never parse messages. */
export type SandboxFileProblem =
  'missing' | 'not-a-file' | 'is-a-directory' | 'through-link' | 'too-large' | 'permission' | 'invalid-path';

/**
 * The sandbox image is not built because the repo or its recipe breaks a rule of the
 * harness (a credential in the context, a file linked out of the repo, a need for network
 * the catalog did not allow). The repo's configuration, not the engine: exit 2, never retried.
 */
export class BuildRefused extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('BUILD_REFUSED', 'config', message, options);
  }
}

/**
 * The sandbox image's build passed the time limit its configuration set (catalog
 * `sandbox.timeouts.buildSec`, a Harbor task's `environment.build_timeout_sec`) and was
 * stopped: the configuration's limit, named with its file and field, never a scored failure
 * of an agent and never retried.
 */
export class BuildTimeout extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('BUILD_TIMEOUT', 'config', message, options);
  }
}

/**
 * The catalog's test command did not run the tests at all on the untouched repo (not found,
 * no such npm script, no package.json, no tests, a runner that cannot start): the
 * configuration's fault, found before any attempt is spent. Exit 2, never retried; an eval
 * trial ends `error` with this reason.
 */
export class TestCommandBroken extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('TEST_COMMAND_BROKEN', 'config', message, options);
  }
}

/** A file inside the sandbox could not be read or written (missing, too large, not a file, a link on the way). */
export class SandboxFileError extends HarnessError {
  readonly problem: SandboxFileProblem;
  constructor(message: string, problem: SandboxFileProblem, options?: HarnessErrorOptions) {
    super('SANDBOX_FILE', 'usage', message, options);
    this.problem = problem;
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

/**
 * A budget ran out. Each limit carries the word it ends with, so the outcome cannot be
 * misnamed on the way up (a time limit is never mistaken for Ctrl-C).
 */
export abstract class LimitExceeded extends HarnessError {
  abstract readonly verdict: 'timeout' | 'disk-budget';
  constructor(code: string, message: string, options?: HarnessErrorOptions) {
    super(code, 'limit', message, options);
  }
}

/** The run's (or a trial's) wall-clock limit passed. */
export class RunTimeout extends LimitExceeded {
  readonly verdict = 'timeout' as const;
  constructor(message = 'the run time limit passed', options?: HarnessErrorOptions) {
    super('RUN_TIMEOUT', message, options);
  }
}

/** A sandbox wrote more than its disk budget; it was stopped. */
export class DiskBudgetExceeded extends LimitExceeded {
  readonly verdict = 'disk-budget' as const;
  constructor(usedBytes: number, budgetBytes: number, options?: HarnessErrorOptions) {
    super(
      'DISK_BUDGET',
      `disk budget exceeded (${formatBytes(usedBytes)} of ${formatBytes(budgetBytes)}); the sandbox was stopped`,
      options,
    );
  }
}

/**
 * The verification sandbox's own change set differs from the allowed change set: what would
 * be tested is not what would be applied. A harness failure, never a pass.
 */
export class VerificationMismatch extends HarnessError {
  constructor(message: string, options?: HarnessErrorOptions) {
    super('VERIFY_MISMATCH', 'internal', message, options);
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

/**
 * The error an aborted signal stands for: its own reason when that is one of ours (a
 * `RunTimeout` stays a timeout), else `Interrupted`.
 */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof HarnessError ? reason : new Interrupted('interrupted');
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
