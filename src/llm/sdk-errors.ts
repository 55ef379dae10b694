/**
 * Both official SDKs (Stainless-generated) throw the same family of errors; this maps it
 * once to ours: an abort is an interruption, a connection failure and an HTTP status are
 * model errors whose retryability `modelErrorFromHttp` decides.
 */
import { HarnessError, Interrupted, ModelError, errorMessage } from '../errors.js';
import { modelErrorFromHttp, retryAfterFromHeaders } from './retry.js';

type ErrorClass = abstract new (...args: never[]) => Error;

export interface SdkErrorClasses {
  APIUserAbortError: ErrorClass;
  APIConnectionError: ErrorClass;
  APIError: ErrorClass;
}

interface ApiErrorShape {
  status?: unknown;
  headers?: unknown;
  apiMessage?: string;
  message: string;
}

export function sdkErrorToHarness(error: unknown, sdk: SdkErrorClasses, provider: string): HarnessError {
  if (error instanceof HarnessError) return error;
  if (error instanceof sdk.APIUserAbortError)
    return new Interrupted('model call interrupted', { cause: error });
  if (error instanceof sdk.APIConnectionError) {
    return modelErrorFromHttp({ provider, connection: true, message: error.message, cause: error });
  }
  if (error instanceof sdk.APIError) {
    const api = error as ApiErrorShape;
    if (typeof api.status === 'number') {
      const headers = api.headers instanceof Headers ? api.headers : undefined;
      const retryAfterMs = headers ? retryAfterFromHeaders((name) => headers.get(name)) : undefined;
      return modelErrorFromHttp({
        provider,
        status: api.status,
        message: api.apiMessage ?? api.message,
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        cause: error,
      });
    }
  }
  return new ModelError(`${provider} client failed: ${errorMessage(error)}`, false, { cause: error });
}
