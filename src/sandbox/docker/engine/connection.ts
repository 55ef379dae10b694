/**
 * The connection to one engine: a dockerode client for exactly the endpoint asked for (or
 * the local engine the environment names), logging every call under SANDBOX_HARNESS_DEBUG.
 */
import Docker from 'dockerode';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { formatDuration } from '../../../format.js';
import { daemonMessage } from './daemon-errors.js';
import { describeEndpoint, type EngineEndpoint } from './endpoint.js';
import { hostKeyAccepted } from './known-hosts.js';

export interface EngineConnection {
  docker: Docker;
  /** Names the engine in messages; undefined for the local default (the environment decides). */
  where: string | undefined;
  /** Whether the engine runs on this machine (its data root can be measured from here). */
  local: boolean;
}

/**
 * Without an endpoint: the local engine, as DOCKER_HOST / DOCKER_TLS_VERIFY /
 * DOCKER_CERT_PATH say (docker-modem reads them). With one: exactly that engine, whatever
 * the environment says.
 */
export function connect(endpoint?: EngineEndpoint): EngineConnection {
  guardTransport();
  const docker = endpoint ? withoutDockerEnvironment(() => new Docker(modemOptions(endpoint))) : new Docker();
  const where = endpoint ? describeEndpoint(endpoint) : undefined;
  if (process.env.SANDBOX_HARNESS_DEBUG) logEveryCall(docker, where ?? 'local');
  const host = process.env.DOCKER_HOST;
  const local = endpoint
    ? endpoint.transport === 'unix'
    : host === undefined || host.trim() === '' || host.startsWith('unix://');
  return { docker, where, local };
}

const DOCKER_ENV = [
  'DOCKER_HOST',
  'DOCKER_TLS_VERIFY',
  'DOCKER_CERT_PATH',
  'DOCKER_CLIENT_TIMEOUT',
  'DOCKER_PATH_PREFIX',
];

/**
 * docker-modem reads (and validates, and reads the certificates of) the DOCKER_* variables
 * in its constructor even when given an endpoint; a broken local setting must not break a
 * remote engine. The constructor is synchronous, so nothing else sees the variables gone.
 */
function withoutDockerEnvironment<T>(make: () => T): T {
  const saved = DOCKER_ENV.map((name) => [name, process.env[name]] as const);
  for (const name of DOCKER_ENV) delete process.env[name];
  try {
    return make();
  } finally {
    for (const [name, value] of saved) if (value !== undefined) process.env[name] = value;
  }
}

/**
 * dockerode options for exactly this endpoint. docker-modem merges its options over what it
 * reads from DOCKER_HOST and DOCKER_CERT_PATH, so every field the environment could set is
 * given here, if only as undefined: a remote engine must never get the local TLS files.
 */
function modemOptions(endpoint: EngineEndpoint): Docker.DockerOptions {
  const none = {
    socketPath: undefined,
    host: undefined,
    port: undefined,
    protocol: undefined,
    ca: undefined,
    cert: undefined,
    key: undefined,
    username: undefined,
    timeout: undefined,
    pathPrefix: '/',
  };
  switch (endpoint.transport) {
    case 'unix':
      return { ...none, socketPath: endpoint.socketPath, protocol: 'http' };
    case 'tcp':
      return endpoint.tls
        ? {
            ...none,
            host: endpoint.host,
            port: endpoint.port,
            protocol: 'https',
            ca: endpoint.tls.ca,
            cert: endpoint.tls.cert,
            key: endpoint.tls.key,
          }
        : { ...none, host: endpoint.host, port: endpoint.port, protocol: 'http' };
    case 'ssh': {
      const keys = endpoint.ssh.hostKeys;
      return {
        ...none,
        host: endpoint.host,
        port: endpoint.port,
        protocol: 'ssh',
        username: endpoint.username,
        sshOptions: {
          ...(endpoint.ssh.agent ? { agent: endpoint.ssh.agent } : {}),
          ...(endpoint.ssh.privateKey ? { privateKey: endpoint.ssh.privateKey } : {}),
          // Only a key known_hosts lists for this host: the ssh library accepts any otherwise.
          hostVerifier: (key: Buffer) => hostKeyAccepted(keys, key),
          readyTimeout: 10_000,
        },
      };
    }
  }
}

/**
 * With SANDBOX_HARNESS_DEBUG set: one stderr line per Engine API request, with its method,
 * path and how long the engine took to answer (every daemon call goes through `dial`).
 */
function logEveryCall(docker: Docker, where: string): void {
  const modem = docker.modem as unknown as {
    dial(
      options: { method?: string; path?: string },
      callback: (error: unknown, data: unknown) => void,
    ): unknown;
  };
  const dial = modem.dial.bind(modem);
  modem.dial = (options, callback) => {
    const started = Date.now();
    return dial(options, (error, data) => {
      process.stderr.write(
        `[engine ${where}] ${options.method ?? 'GET'} ${options.path ?? ''} ${formatDuration(Date.now() - started)}${error ? ` (${daemonMessage(error)})` : ''}\n`,
      );
      callback(error, data);
    });
  };
}

/** A label filter of a list call: `key` alone matches any value. */
export function labelFilter(labels: Record<string, string | true>): string[] {
  return Object.entries(labels).map(([k, v]) => (v === true ? k : `${k}=${v}`));
}

type RequestFn = (options: unknown, callback?: unknown, redirect?: unknown) => ClientRequest;
interface ModemHttp {
  maxRedirects: number;
  http: { request: RequestFn };
  https: { request: RequestFn };
}

let guarded = false;

/**
 * Two things docker-modem's HTTP layer (`docker-modem/lib/http.js`, the one dockerode uses for
 * every transport, ssh included) does that no engine client may:
 * - it follows redirects, to any host, with a request nothing listens to for errors: a
 *   redirect from an endpoint (or the daemon's own answer to an unclean path) sent this
 *   client to another address, and a reset there killed the process. An Engine API never
 *   redirects, so none is followed and one is an error of the call that got it.
 * - an answer whose connection drops after its headers (`ECONNRESET` "aborted", a premature
 *   close) ends without a word: the call's callback never runs and the process may exit 0
 *   with nothing done. Such an answer is now an error of that call (`ECONNRESET`), which
 *   `translateDaemonError` makes `SandboxUnavailable` with the cause.
 */
function guardTransport(): void {
  if (guarded) return;
  guarded = true;
  const fromDockerode = createRequire(createRequire(import.meta.url).resolve('dockerode'));
  const modemHttp = fromDockerode('docker-modem/lib/http.js') as Partial<ModemHttp>;
  if (
    typeof modemHttp.maxRedirects !== 'number' ||
    typeof modemHttp.http?.request !== 'function' ||
    typeof modemHttp.https?.request !== 'function'
  ) {
    throw new Error('docker-modem/lib/http.js is not what this client guards (dockerode was upgraded?)');
  }
  modemHttp.maxRedirects = 0;
  for (const transport of [modemHttp.http, modemHttp.https]) {
    const request = transport.request;
    transport.request = function (this: unknown, options, callback, redirect) {
      const req = request.call(this, options, callback, redirect);
      // Before the library's own listener, so the call fails with these words.
      req.prependListener('response', (res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400 && res.headers.location !== undefined) {
          res.resume();
          req.emit('error', engineRedirected(res.headers.location));
          return;
        }
        res.once('close', () => {
          if (!res.complete) req.emit('error', connectionDropped());
        });
      });
      return req;
    };
  }
}

function engineRedirected(location: string): Error {
  return Object.assign(
    new Error(
      `the endpoint answered with a redirect to ${JSON.stringify(location.slice(0, 200))}; an engine never redirects, so it was not followed`,
    ),
    { code: 'EREDIRECT' },
  );
}

function connectionDropped(): Error {
  return Object.assign(new Error('the connection closed in the middle of the answer'), {
    code: 'ECONNRESET',
  });
}
