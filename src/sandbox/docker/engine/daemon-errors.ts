/**
 * The daemon's failures in the harness's words: an engine that cannot be reached or that
 * dropped the connection is `SandboxUnavailable` (with the cause), a container that is gone
 * or stopped is `SandboxDead`, and the two conditions a caller acts on have their own types.
 */
import { HarnessError, SandboxDead, SandboxUnavailable } from '../../../errors.js';

type DaemonError = Error & {
  statusCode?: number;
  json?: { message?: string };
  reason?: string;
  code?: string;
};

/** What the daemon said (its JSON message when it sent one), else the error's own message. */
export function daemonMessage(error: unknown): string {
  const e = error as DaemonError;
  const fromJson = e.json && typeof e.json === 'object' ? e.json.message : undefined;
  return (fromJson ?? e.message ?? String(error)).toString().trim();
}

export function statusOf(error: unknown): number | undefined {
  return (error as DaemonError | undefined)?.statusCode;
}

/**
 * The connection failed or broke off: nothing the daemon decided. A connection dropped in
 * the middle of an answer (`ECONNRESET` "aborted", a premature close) is one too.
 */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ENOENT',
  'EACCES',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

export function isConnectionError(error: unknown): boolean {
  const code = (error as DaemonError | undefined)?.code;
  return code !== undefined && CONNECTION_CODES.has(code);
}

function describeDaemon(where?: string): string {
  if (where) return `the Docker engine at ${where}`;
  return process.env.DOCKER_HOST
    ? `the Docker daemon at DOCKER_HOST=${process.env.DOCKER_HOST}`
    : 'the Docker daemon at /var/run/docker.sock';
}

/**
 * Translates a daemon failure into our error family; `context` says what we were doing,
 * `where` names an engine given by endpoint (default: the local one from the environment).
 */
export function translateDaemonError(error: unknown, context: string, where?: string): HarnessError {
  if (error instanceof HarnessError) return error;
  if (isConnectionError(error)) {
    const code = (error as DaemonError).code ?? '';
    // Reached, then lost: a reset, a broken pipe, an answer cut off.
    const lost = ['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE'].includes(code);
    return new SandboxUnavailable(
      `${context}: ${lost ? 'lost the connection to' : 'cannot reach'} ${describeDaemon(where)} (${code})`,
      {
        hint: where
          ? `Check that the engine at ${where} runs and that this machine reaches it; \`sandbox-harness doctor --engine ...\` shows what is wrong.`
          : 'Start the engine with `sandbox-harness setup` (Debian, root) or check DOCKER_HOST; `sandbox-harness doctor` shows what is wrong.',
        cause: error,
      },
    );
  }
  return new SandboxUnavailable(`${context}: ${daemonMessage(error)}`, { cause: error });
}

/** A failure of a call on one container: gone or stopped is `SandboxDead`, anything else translated. */
export function containerFailure(
  error: unknown,
  id: string,
  doing: string,
  where: string | undefined,
): HarnessError {
  if (error instanceof HarnessError) return error;
  const status = statusOf(error);
  const message = daemonMessage(error);
  // 409 when the exec is made on a stopped sandbox; 500 "container not running" when it
  // stopped between the exec's creation and its start (a fork bomb ending a gVisor sandbox).
  if (
    status === 404 ||
    (status === 409 && /is not running|is paused|restarting/i.test(message)) ||
    (status === 500 && /container not running|is not running/i.test(message))
  ) {
    return new SandboxDead(`sandbox ${id.slice(0, 12)} is gone or not running (${doing} it): ${message}`, {
      cause: error,
    });
  }
  return translateDaemonError(error, `${doing} sandbox ${id.slice(0, 12)}`, where);
}

/** The subnet or name of a new network is taken (another run chose it first); try another. */
export class NetworkConflict extends HarnessError {
  constructor(message: string) {
    super('NETWORK_CONFLICT', 'infrastructure', message);
  }
}

/** The storage driver cannot enforce a writable-layer quota; the backend watches the size instead. */
export class StorageQuotaUnsupported extends HarnessError {
  constructor(message: string) {
    super('STORAGE_QUOTA_UNSUPPORTED', 'infrastructure', message);
  }
}
