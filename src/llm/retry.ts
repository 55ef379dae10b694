/**
 * The one retry policy for model HTTP calls. The SDKs' own retries are switched off
 * (`maxRetries: 0`) so that attempts, delays and the final error are decided here, the
 * same way for every provider. Only the HTTP call is wrapped: a retried model call never
 * re-runs a tool, because tools run after `complete()` has returned.
 */
import { HarnessError, Interrupted, ModelError } from '../errors.js';
import { formatDuration } from '../format.js';

export interface RetryPolicy {
  /** Total tries, the first included. */
  maxAttempts: number;
  /** First backoff delay; doubles per retry, with jitter. */
  baseDelayMs: number;
  /** Cap on a computed backoff delay. */
  maxBackoffMs: number;
  /** Longest Retry-After we wait for; a server asking for more ends the call instead. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 4,
  baseDelayMs: 1_000,
  maxBackoffMs: 15_000,
  maxRetryAfterMs: 60_000,
};

export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || (status >= 500 && status <= 599);
}

function finiteOrUndefined(value: number): number | undefined {
  return Number.isFinite(value) ? value : undefined;
}

/** Retry-After as milliseconds: either delta-seconds or an HTTP date. Unparseable → undefined. */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (trimmed === '') return undefined;
  // A number too long to be one (it parses as Infinity) is no wish: the usual backoff applies.
  if (/^\d+(\.\d+)?$/.test(trimmed)) return finiteOrUndefined(Math.round(Number(trimmed) * 1000));
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/**
 * Reads the server's wish from response headers. `retry-after-ms` (sent by the Anthropic
 * and OpenAI APIs) is more precise than `retry-after` and wins when both are present.
 */
export function retryAfterFromHeaders(
  get: (name: string) => string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  const ms = get('retry-after-ms');
  if (ms !== null && ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) {
    const value = finiteOrUndefined(Math.round(Number(ms.trim())));
    if (value !== undefined) return value;
  }
  return parseRetryAfter(get('retry-after'), now);
}

/** Exponential backoff with "equal jitter": never zero, never above the cap. */
export function backoffDelayMs(
  retryNumber: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(policy.maxBackoffMs, policy.baseDelayMs * 2 ** Math.max(0, retryNumber - 1));
  return Math.round(exponential / 2 + random() * (exponential / 2));
}

export interface HttpFailure {
  provider: string;
  /** HTTP status, absent when no response arrived. */
  status?: number;
  /** No response: refused, reset, DNS failure or the client's request timeout. */
  connection?: boolean;
  message: string;
  retryAfterMs?: number;
  cause?: unknown;
}

const STATUS_HINTS: Record<number, string> = {
  400: 'the request was refused as malformed; the model name or the conversation may be wrong for this server',
  401: 'check the API key in the environment of the host process',
  403: 'the API key is not allowed to use this model or endpoint',
  404: 'check the model name and the base URL',
  413: 'the conversation is too large for this model; lower the context window setting',
  429: 'rate limited: wait, or lower eval concurrency',
};

/** The single place an HTTP-level failure becomes a `ModelError` with the right retryable flag. */
export function modelErrorFromHttp(failure: HttpFailure): ModelError {
  const retryable =
    failure.connection === true || (failure.status !== undefined && isRetryableStatus(failure.status));
  const what =
    failure.status !== undefined
      ? `${failure.provider} API answered HTTP ${failure.status}`
      : `${failure.provider} API could not be reached`;
  const hint =
    failure.status !== undefined
      ? (STATUS_HINTS[failure.status] ??
        (failure.status >= 500 ? 'the model server had a problem; try again later' : undefined))
      : 'check the network and the base URL';
  return new ModelError(`${what}: ${failure.message}`, retryable, {
    ...(hint === undefined ? {} : { hint }),
    cause: failure.cause,
    details: { provider: failure.provider, status: failure.status, retryAfterMs: failure.retryAfterMs },
  });
}

/** Resolves after `ms`, or rejects with `Interrupted` as soon as the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new Interrupted('interrupted while waiting to retry the model call'));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new Interrupted('interrupted while waiting to retry the model call'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface RetryInfo {
  /** The try that failed, 1-based. */
  attempt: number;
  delayMs: number;
  error: ModelError;
}

export interface RetryOptions {
  policy?: Partial<RetryPolicy>;
  signal?: AbortSignal;
  /** Turns whatever the call threw into our error family (provider-specific). */
  toError: (error: unknown) => HarnessError;
  onRetry?: (info: RetryInfo) => void;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  random?: () => number;
}

export async function withRetry<T>(call: () => Promise<T>, options: RetryOptions): Promise<T> {
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.policy };
  const wait = options.sleep ?? sleep;
  const maxAttempts = Math.max(1, Math.floor(policy.maxAttempts));
  for (let attempt = 1; ; attempt++) {
    if (options.signal?.aborted) throw new Interrupted('model call interrupted');
    try {
      return await call();
    } catch (thrown) {
      if (options.signal?.aborted) throw new Interrupted('model call interrupted', { cause: thrown });
      const error = options.toError(thrown);
      if (!(error instanceof ModelError) || !error.retryable) throw error;
      if (attempt >= maxAttempts) {
        throw new ModelError(`${error.message} (gave up after ${attempt} attempts)`, true, {
          ...(error.hint === undefined ? {} : { hint: error.hint }),
          cause: error.cause,
          details: { ...error.details, attempts: attempt },
        });
      }
      const retryAfterMs = error.details?.['retryAfterMs'];
      let delayMs: number;
      if (typeof retryAfterMs === 'number') {
        if (retryAfterMs > policy.maxRetryAfterMs) {
          // Up to a whole second, so a wait just over the limit never reads as the limit itself.
          const askedMs = Math.ceil(retryAfterMs / 1000) * 1000;
          throw new ModelError(
            `${error.message} (the server asked to wait ${formatDuration(askedMs)}, more than the ${formatDuration(policy.maxRetryAfterMs)} we wait)`,
            true,
            { cause: error.cause, details: { ...error.details, attempts: attempt } },
          );
        }
        delayMs = retryAfterMs;
      } else {
        delayMs = backoffDelayMs(attempt, policy, options.random);
      }
      options.onRetry?.({ attempt, delayMs, error });
      await wait(delayMs, options.signal);
    }
  }
}
