import { expect } from 'vitest';

/**
 * The error `promise` rejects with, checked to be a `type`; the test fails when the promise
 * resolves or rejects with something else.
 */
export async function rejection<T extends Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => T,
): Promise<T> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(type);
  return error as T;
}
