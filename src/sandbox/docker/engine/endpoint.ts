/**
 * Where a Docker engine is and how to reach it, by the names users already have: a URL
 * (`unix://`, `tcp://` with TLS, `ssh://user@host`) or a docker context. Parsing and context
 * resolution only; `connection.ts` turns an endpoint into a client. Credentials (TLS keys, ssh
 * keys) are read here into host memory and go nowhere but the connection to that engine.
 *
 * Trust: the harness drives an engine with full control over it, so it must know it talks
 * to the right one and that nobody else can. A TCP engine therefore needs mutual TLS
 * (server and client certificates), an ssh engine needs its host key in known_hosts, and a
 * context that says `SkipTLSVerify` is refused. Loopback is the one exception to TLS.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../../../errors.js';
import { knownHostKeys, type KnownHostKey } from './known-hosts.js';

export interface TlsMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
  /** Where each part was read from, for messages (never the contents). */
  files: { ca: string; cert: string; key: string };
}

export interface SshAuth {
  /** ssh-agent socket (SSH_AUTH_SOCK of the host process). */
  agent?: string;
  privateKey?: Buffer;
  identityFile?: string;
  /** Keys known_hosts accepts for this host; a connection presenting another key is refused. */
  hostKeys: KnownHostKey[];
  knownHostsFiles: string[];
}

export interface TcpEndpoint {
  transport: 'tcp';
  host: string;
  port: number;
  tls?: TlsMaterial;
}

export type EngineEndpoint =
  | { transport: 'unix'; socketPath: string }
  | TcpEndpoint
  | { transport: 'ssh'; host: string; port: number; username: string; ssh: SshAuth };

/** One line that names the engine in messages; holds no secret. */
export function describeEndpoint(endpoint: EngineEndpoint): string {
  switch (endpoint.transport) {
    case 'unix':
      return `unix://${endpoint.socketPath}`;
    case 'tcp':
      return `tcp://${hostPort(endpoint.host, endpoint.port)}${endpoint.tls ? ' (TLS)' : ''}`;
    case 'ssh':
      return `ssh://${endpoint.username}@${hostPort(endpoint.host, endpoint.port)}`;
  }
}

/** Two endpoints with the same key are the same engine (listing it twice would double its capacity). */
export function endpointKey(endpoint: EngineEndpoint): string {
  switch (endpoint.transport) {
    case 'unix':
      return `unix:${endpoint.socketPath}`;
    case 'tcp':
      return `tcp:${endpoint.host.toLowerCase()}:${endpoint.port}`;
    case 'ssh':
      return `ssh:${endpoint.host.toLowerCase()}:${endpoint.port}`;
  }
}

function hostPort(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export interface ResolveOptions {
  env?: NodeJS.ProcessEnv;
  /** Names the engine in messages (default: the URL). */
  label?: string;
  /** TLS for a `tcp://` URL: given material, `false` for none, or (absent) read from `certDir`. */
  tls?: TlsMaterial | false;
  /** Folder with ca.pem, cert.pem, key.pem; default DOCKER_CERT_PATH, else the docker config folder. */
  certDir?: string;
  /** A private key for `ssh://` (default: the ssh agent, else ~/.ssh/id_ed25519, id_ecdsa, id_rsa). */
  identityFile?: string;
}

const DEFAULT_SOCKET = '/var/run/docker.sock';

function dockerConfigDir(env: NodeJS.ProcessEnv): string {
  const configured = env.DOCKER_CONFIG;
  return configured && configured.trim() !== '' ? configured : join(homeOf(env), '.docker');
}

function homeOf(env: NodeJS.ProcessEnv): string {
  return env.HOME && env.HOME.startsWith('/') ? env.HOME : homedir();
}

export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * The engine the harness uses when none is named: DOCKER_HOST (with DOCKER_CERT_PATH for
 * TLS), else the user's Docker Desktop socket when present, else /var/run/docker.sock.
 * The same choice docker-modem makes, made explicit so the default can be listed beside
 * remote engines.
 */
export async function localEndpoint(env: NodeJS.ProcessEnv = process.env): Promise<EngineEndpoint> {
  const dockerHost = env.DOCKER_HOST?.trim();
  if (dockerHost) {
    const tlsWanted = env.DOCKER_TLS_VERIFY === '1' || (env.DOCKER_CERT_PATH ?? '') !== '';
    return parseEngineUrl(dockerHost, {
      env,
      ...(tlsWanted ? { certDir: env.DOCKER_CERT_PATH || dockerConfigDir(env) } : {}),
    });
  }
  const desktop = join(homeOf(env), '.docker', 'run', 'docker.sock');
  return { transport: 'unix', socketPath: existsSync(desktop) ? desktop : DEFAULT_SOCKET };
}

/**
 * `unix:///path`, `tcp://host:port` (also `https://`, and `http://` for loopback only) or
 * `ssh://[user@]host[:port]`. TLS for tcp comes from `certDir`, else DOCKER_CERT_PATH, else
 * the docker config folder, when ca.pem, cert.pem and key.pem are there.
 */
export async function parseEngineUrl(text: string, options: ResolveOptions = {}): Promise<EngineEndpoint> {
  const env = options.env ?? process.env;
  const where = options.label ?? `engine address ${JSON.stringify(text)}`;
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1]?.toLowerCase();
  if (!scheme) {
    throw new ConfigError(
      `${where}: expected a URL such as tcp://host:2376, ssh://user@host or unix:///path`,
    );
  }
  if (scheme === 'unix') {
    const socketPath = text.slice('unix://'.length);
    if (!isAbsolute(socketPath))
      throw new ConfigError(`${where}: expected an absolute socket path after unix://`);
    return { transport: 'unix', socketPath };
  }
  if (!['tcp', 'https', 'http', 'ssh'].includes(scheme)) {
    throw new ConfigError(
      `${where}: unsupported scheme ${scheme}://; expected unix://, tcp://, https:// or ssh://`,
    );
  }
  let url: URL;
  try {
    // WHATWG URL only parses ports of special schemes reliably; tcp:// is read as http://.
    url = new URL(text.replace(/^[a-z][a-z0-9+.-]*:\/\//i, scheme === 'ssh' ? 'ssh://' : 'http://'));
  } catch {
    throw new ConfigError(`${where}: not a valid URL`);
  }
  if (url.pathname !== '/' && url.pathname !== '') {
    throw new ConfigError(`${where}: expected no path after the host, got ${JSON.stringify(url.pathname)}`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (host === '') throw new ConfigError(`${where}: expected a host name or address`);
  if (scheme === 'ssh') {
    if (url.password) {
      throw new ConfigError(
        `${where}: a password in the URL is not accepted; use an ssh key or the ssh agent`,
      );
    }
    const port = url.port ? Number(url.port) : 22;
    return {
      transport: 'ssh',
      host,
      port,
      username: decodeURIComponent(url.username) || userInfo().username,
      ssh: await sshAuth(host, port, options.identityFile, env),
    };
  }
  if (url.username || url.password) throw new ConfigError(`${where}: expected no user name for ${scheme}://`);
  const tls =
    scheme === 'http' || options.tls === false
      ? undefined
      : (options.tls ??
        (await readTlsDir(options.certDir ?? (env.DOCKER_CERT_PATH || dockerConfigDir(env)))));
  const port = url.port ? Number(url.port) : tls || scheme === 'https' ? 2376 : 2375;
  const endpoint: TcpEndpoint = { transport: 'tcp', host, port, ...(tls ? { tls } : {}) };
  return checkTcp(endpoint, where);
}

/** A TCP engine without mutual TLS lets anyone on the network run anything as root there. */
export function checkTcp<T extends { host: string; port: number; tls?: TlsMaterial }>(
  endpoint: T,
  where: string,
): T {
  if (!endpoint.tls && !isLoopback(endpoint.host)) {
    throw new ConfigError(
      `${where}: ${hostPort(endpoint.host, endpoint.port)} without TLS is refused: anyone who reaches that port controls the engine`,
      [],
      {
        hint: 'Give the engine TLS certificates (dockerd --tlsverify) and name the client files: a docker context (`docker context create NAME --docker "host=tcp://HOST:2376,ca=ca.pem,cert=cert.pem,key=key.pem"`), `tls: {ca, cert, key}` in engines.yaml, or DOCKER_CERT_PATH.',
      },
    );
  }
  return endpoint;
}

/** ca.pem, cert.pem and key.pem of a folder: all three, or undefined when none is there. */
export async function readTlsDir(dir: string): Promise<TlsMaterial | undefined> {
  const files = { ca: join(dir, 'ca.pem'), cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') };
  const present = Object.values(files).filter((f) => existsSync(f));
  if (present.length === 0) return undefined;
  if (present.length < 3) {
    const missing = Object.values(files).filter((f) => !existsSync(f));
    throw new ConfigError(`TLS files in ${dir} are incomplete: missing ${missing.join(', ')}`, [], {
      hint: 'The harness uses mutual TLS: it needs the CA that signed the engine (ca.pem) and a client certificate with its key (cert.pem, key.pem).',
    });
  }
  return readTlsFiles(files);
}

export async function readTlsFiles(files: { ca: string; cert: string; key: string }): Promise<TlsMaterial> {
  const read = async (file: string) => {
    try {
      return await readFile(file);
    } catch (error) {
      throw new ConfigError(
        `cannot read TLS file ${file}: ${(error as NodeJS.ErrnoException).code ?? error}`,
      );
    }
  };
  const [ca, cert, key] = await Promise.all([read(files.ca), read(files.cert), read(files.key)]);
  return { ca, cert, key, files: { ...files } };
}

async function sshAuth(
  host: string,
  port: number,
  identityFile: string | undefined,
  env: NodeJS.ProcessEnv,
): Promise<SshAuth> {
  const home = homeOf(env);
  const knownHostsFiles = [join(home, '.ssh', 'known_hosts'), '/etc/ssh/ssh_known_hosts'];
  const hostKeys = await knownHostKeys(host, port, knownHostsFiles);
  if (!hostKeys.some((k) => !k.revoked)) {
    throw new ConfigError(
      `ssh://${hostPort(host, port)}: its host key is not in ${knownHostsFiles.join(' or ')}, so the engine there cannot be told from an impostor`,
      [],
      {
        hint: `Connect once with \`ssh${port === 22 ? '' : ` -p ${port}`} ${host} true\` and confirm the fingerprint, or add it with \`ssh-keyscan${port === 22 ? '' : ` -p ${port}`} ${host} >> ~/.ssh/known_hosts\` after checking it.`,
      },
    );
  }
  const auth: SshAuth = { hostKeys, knownHostsFiles };
  if (env.SSH_AUTH_SOCK) auth.agent = env.SSH_AUTH_SOCK;
  const keyFile =
    identityFile ??
    (auth.agent
      ? undefined
      : ['id_ed25519', 'id_ecdsa', 'id_rsa'].map((n) => join(home, '.ssh', n)).find((f) => existsSync(f)));
  if (keyFile) {
    try {
      auth.privateKey = await readFile(keyFile);
      auth.identityFile = keyFile;
    } catch (error) {
      throw new ConfigError(
        `cannot read ssh key ${keyFile}: ${(error as NodeJS.ErrnoException).code ?? error}`,
      );
    }
  }
  if (!auth.agent && !auth.privateKey) {
    throw new ConfigError(
      `ssh://${hostPort(host, port)}: no ssh agent (SSH_AUTH_SOCK) and no ssh key found`,
      [],
      {
        hint: 'Start an ssh agent with your key loaded, or name a key (`identityFile:` in engines.yaml).',
      },
    );
  }
  return auth;
}

// ---- docker contexts ---------------------------------------------------------------------

const contextMetaSchema = z.object({
  Name: z.string(),
  Endpoints: z.object({
    docker: z.object({
      Host: z.string().optional(),
      SkipTLSVerify: z.boolean().optional(),
    }),
  }),
});

/** The folder name docker uses for a context: the sha256 of its name. */
export function contextId(name: string): string {
  return createHash('sha256').update(name).digest('hex');
}

/**
 * A docker context by name, as `docker context create` stored it:
 * `<config>/contexts/meta/<sha256(name)>/meta.json` and its TLS files in
 * `<config>/contexts/tls/<sha256(name)>/docker/`. `default` is the local engine.
 */
export async function resolveContext(name: string, options: ResolveOptions = {}): Promise<EngineEndpoint> {
  const env = options.env ?? process.env;
  if (name === 'default') return localEndpoint(env);
  const config = dockerConfigDir(env);
  const id = contextId(name);
  const metaFile = join(config, 'contexts', 'meta', id, 'meta.json');
  let text: string;
  try {
    text = await readFile(metaFile, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new ConfigError(`cannot read docker context ${name} (${metaFile}): ${(error as Error).message}`);
    }
    const known = await listContexts(config);
    throw new ConfigError(`no docker context named ${JSON.stringify(name)} in ${config}`, [], {
      hint: known.length
        ? `Known contexts: default, ${known.join(', ')} (\`docker context ls\`).`
        : 'Create one with `docker context create NAME --docker "host=..."`, or give the engine as a URL.',
    });
  }
  let meta: z.infer<typeof contextMetaSchema>;
  try {
    meta = contextMetaSchema.parse(JSON.parse(text));
  } catch {
    throw new ConfigError(`docker context ${name}: ${metaFile} is not a docker context description`);
  }
  const docker = meta.Endpoints.docker;
  if (!docker.Host) throw new ConfigError(`docker context ${name} has no docker host (${metaFile})`);
  if (docker.SkipTLSVerify) {
    throw new ConfigError(
      `docker context ${name} skips TLS verification: the harness would not know which engine it is driving`,
      [],
      {
        hint: `Give the context the engine's CA: \`docker context update ${name} --docker "host=${docker.Host},ca=ca.pem,cert=cert.pem,key=key.pem"\`.`,
      },
    );
  }
  const tls = await readTlsDir(join(config, 'contexts', 'tls', id, 'docker'));
  return parseEngineUrl(docker.Host, {
    ...options,
    env,
    label: `docker context ${name} (${docker.Host})`,
    tls: tls ?? false,
  });
}

async function listContexts(config: string): Promise<string[]> {
  const dir = join(config, 'contexts', 'meta');
  const names: string[] = [];
  for (const entry of await readdir(dir).catch(() => [] as string[])) {
    try {
      const meta = contextMetaSchema.parse(JSON.parse(await readFile(join(dir, entry, 'meta.json'), 'utf8')));
      names.push(meta.Name);
    } catch {
      // not a context folder
    }
  }
  return names.sort();
}

/** `--engine` on the command line: a URL, or else a docker context name. */
export function resolveEngineRef(ref: string, options: ResolveOptions = {}): Promise<EngineEndpoint> {
  return ref.includes('://') ? parseEngineUrl(ref, options) : resolveContext(ref, options);
}
