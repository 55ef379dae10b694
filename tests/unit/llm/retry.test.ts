import { describe, expect, it } from 'vitest';
import { Interrupted, ModelError } from '../../../src/errors.js';
import { until } from '../../helpers/poll.js';
import {
  backoffDelayMs,
  DEFAULT_RETRY_POLICY,
  isRetryableStatus,
  modelErrorFromHttp,
  parseRetryAfter,
  retryAfterFromHeaders,
  withRetry,
} from '../../../src/llm/retry.js';

function failing(statuses: number[], retryAfterMs?: number) {
  let calls = 0;
  const call = async (): Promise<string> => {
    const status = statuses[calls++];
    if (status === undefined) return 'ok';
    throw modelErrorFromHttp({
      provider: 'test',
      status,
      message: `HTTP ${status}`,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    });
  };
  return { call, calls: () => calls };
}

function recordingSleep() {
  const delays: number[] = [];
  return { delays, sleep: async (ms: number) => void delays.push(ms) };
}

describe('retryable statuses', () => {
  it.each([408, 409, 429, 500, 502, 503, 529])('%i is retried', (status) =>
    expect(isRetryableStatus(status)).toBe(true),
  );
  it.each([400, 401, 403, 404, 413, 422])('%i is not retried', (status) =>
    expect(isRetryableStatus(status)).toBe(false),
  );

  it('marks connection failures retryable and 401 not retryable, with a hint', () => {
    expect(modelErrorFromHttp({ provider: 'p', connection: true, message: 'ECONNREFUSED' }).retryable).toBe(
      true,
    );
    const auth = modelErrorFromHttp({ provider: 'p', status: 401, message: 'bad key' });
    expect(auth.retryable).toBe(false);
    expect(auth.hint).toMatch(/API key/);
  });
});

describe('Retry-After', () => {
  it('reads delta-seconds', () => expect(parseRetryAfter('3')).toBe(3000));
  it('reads an HTTP date relative to now', () => {
    const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:05 GMT', now)).toBe(5000);
  });
  it('ignores garbage', () => expect(parseRetryAfter('soon')).toBeUndefined());
  it('ignores a number too long to be one (it would parse as Infinity)', () => {
    expect(parseRetryAfter('9'.repeat(400))).toBeUndefined();
    expect(retryAfterFromHeaders((name) => (name === 'retry-after-ms' ? '9'.repeat(400) : '2'))).toBe(2000);
  });
  it('prefers retry-after-ms when present', () => {
    const headers = new Headers({ 'retry-after': '10', 'retry-after-ms': '250' });
    expect(retryAfterFromHeaders((name) => headers.get(name))).toBe(250);
  });
});

describe('backoff', () => {
  it('grows exponentially, stays within [half, full] of the step and never exceeds the cap', () => {
    const policy = { ...DEFAULT_RETRY_POLICY, baseDelayMs: 100, maxBackoffMs: 1000 };
    expect(backoffDelayMs(1, policy, () => 0)).toBe(50);
    expect(backoffDelayMs(1, policy, () => 1)).toBe(100);
    expect(backoffDelayMs(3, policy, () => 1)).toBe(400);
    expect(backoffDelayMs(10, policy, () => 1)).toBe(1000);
  });
});

describe('withRetry', () => {
  it('retries a 429 and a 503, then returns the answer', async () => {
    const server = failing([429, 503]);
    const { sleep, delays } = recordingSleep();
    await expect(withRetry(server.call, { toError: (e) => e as ModelError, sleep })).resolves.toBe('ok');
    expect(server.calls()).toBe(3);
    expect(delays).toHaveLength(2);
  });

  it('waits exactly what Retry-After asks for', async () => {
    const server = failing([429], 2500);
    const { sleep, delays } = recordingSleep();
    await withRetry(server.call, { toError: (e) => e as ModelError, sleep });
    expect(delays).toEqual([2500]);
  });

  it('does not retry a 400', async () => {
    const server = failing([400]);
    const { sleep } = recordingSleep();
    await expect(withRetry(server.call, { toError: (e) => e as ModelError, sleep })).rejects.toMatchObject({
      retryable: false,
    });
    expect(server.calls()).toBe(1);
  });

  it('gives up after maxAttempts with a retryable ModelError saying so', async () => {
    const server = failing([500, 500, 500, 500, 500]);
    const { sleep } = recordingSleep();
    const error = await withRetry(server.call, {
      toError: (e) => e as ModelError,
      sleep,
      policy: { maxAttempts: 3 },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).retryable).toBe(true);
    expect((error as ModelError).message).toMatch(/gave up after 3 attempts/);
    expect(server.calls()).toBe(3);
  });

  it('refuses to wait longer than maxRetryAfterMs', async () => {
    const server = failing([429], 120_000);
    const { sleep, delays } = recordingSleep();
    await expect(withRetry(server.call, { toError: (e) => e as ModelError, sleep })).rejects.toThrow(
      /asked to wait 2m00s, more than the 1m00s we wait/,
    );
    expect(delays).toEqual([]);
  });

  it('stops waiting with Interrupted when the signal aborts during the backoff', async () => {
    const server = failing([503]);
    const controller = new AbortController();
    const pending = withRetry(server.call, {
      toError: (e) => e as ModelError,
      signal: controller.signal,
      policy: { baseDelayMs: 60_000, maxBackoffMs: 60_000 },
    });
    const outcome = pending.then(
      () => 'finished',
      (error: unknown) => error,
    );
    // The first call failed and the 60 s backoff is running: abort now.
    await until(() => server.calls() === 1, 'the first call failed');
    controller.abort();
    expect(await outcome).toBeInstanceOf(Interrupted);
    expect(server.calls()).toBe(1);
  });
});
