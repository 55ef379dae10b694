/**
 * An engine over ssh:// for real, without touching the machine's ssh set-up: an ssh server
 * in this process on loopback (the ssh2 library's server: its own host key, one authorized
 * client key) that answers `docker system dial-stdio` the way the docker CLI does on a
 * remote host, by piping the channel to the local engine's socket. The harness side is the
 * real thing: endpoint parsing, known_hosts, the key file, dockerode's ssh transport.
 */
import { timingSafeEqual } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, utils, type Connection } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, SandboxUnavailable } from '../../src/errors.js';
import { localEndpoint, parseEngineUrl } from '../../src/sandbox/docker/engine/endpoint.js';
import { DockerEngine, dockerEngine } from '../../src/sandbox/docker/engine/index.js';

let dir: string;
let server: Server;
let port: number;
let knownHost: string;
const seen = { authentications: 0, commands: [] as string[], users: [] as string[] };
const connections = new Set<Connection>();

beforeAll(async () => {
  await dockerEngine().ping(5000);
  const local = await localEndpoint();
  if (local.transport !== 'unix')
    throw new Error('this test pipes to the local engine socket; unset DOCKER_HOST');
  dir = await mkdtemp(join(tmpdir(), 'sh-fleet-ssh-'));
  const hostKey = utils.generateKeyPairSync('ed25519');
  const clientKey = utils.generateKeyPairSync('ed25519');
  const allowed = utils.parseKey(clientKey.public);
  if (allowed instanceof Error) throw allowed;
  await writeFile(join(dir, 'client_key'), clientKey.private, { mode: 0o600 });

  server = new Server({ hostKeys: [hostKey.private] }, (client) => {
    connections.add(client);
    client.on('close', () => connections.delete(client));
    client.on('error', () => undefined);
    client.on('authentication', (ctx) => {
      seen.authentications++;
      const key = ctx.method === 'publickey' ? ctx.key : undefined;
      const same =
        key !== undefined &&
        key.algo === allowed.type &&
        key.data.length === allowed.getPublicSSH().length &&
        timingSafeEqual(key.data, allowed.getPublicSSH());
      if (ctx.method !== 'publickey' || !same) return ctx.reject(['publickey']);
      if (ctx.signature && ctx.blob && allowed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) !== true) {
        return ctx.reject(['publickey']);
      }
      seen.users.push(ctx.username);
      ctx.accept();
    });
    client.on('ready', () => {
      client.on('session', (acceptSession) => {
        acceptSession().on('exec', (accept, reject, info) => {
          seen.commands.push(info.command);
          if (info.command !== 'docker system dial-stdio') return reject();
          const channel = accept();
          const socket = connect(local.socketPath);
          channel.pipe(socket).pipe(channel);
          socket.on('error', () => channel.close());
          channel.on('close', () => socket.destroy());
        });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  knownHost = `[127.0.0.1]:${port} ${hostKey.public.trim()}`;
});

afterAll(async () => {
  for (const client of connections) client.end();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A HOME whose known_hosts says `line`. */
async function home(name: string, line: string): Promise<NodeJS.ProcessEnv> {
  const path = join(dir, name);
  await mkdir(join(path, '.ssh'), { recursive: true });
  await writeFile(join(path, '.ssh', 'known_hosts'), `${line}\n`);
  return { HOME: path };
}

describe('an engine over ssh://', () => {
  it('answers through ssh with the key file of this process, once the host key is the known one', async () => {
    const endpoint = await parseEngineUrl(`ssh://ci@127.0.0.1:${port}`, {
      env: await home('good', knownHost),
      identityFile: join(dir, 'client_key'),
    });
    const engine = new DockerEngine(endpoint);
    await engine.ping(15_000);
    const [remote, local] = await Promise.all([engine.info(), dockerEngine().info()]);
    // The "remote" side's dial-stdio lands on this machine's engine.
    expect(remote.dockerRootDir).toBe(local.dockerRootDir);
    expect(engine.where).toBe(`ssh://ci@127.0.0.1:${port}`);
    expect(seen.users).toContain('ci');
    expect(new Set(seen.commands)).toEqual(new Set(['docker system dial-stdio']));
  }, 60_000);

  it('never offers the key to a host whose key is not the one known_hosts lists', async () => {
    const impostorKey = utils.generateKeyPairSync('ed25519').public.trim();
    const endpoint = await parseEngineUrl(`ssh://ci@127.0.0.1:${port}`, {
      env: await home('impostor', `[127.0.0.1]:${port} ${impostorKey}`),
      identityFile: join(dir, 'client_key'),
    });
    const before = seen.authentications;
    await expect(new DockerEngine(endpoint).ping(15_000)).rejects.toBeInstanceOf(SandboxUnavailable);
    expect(seen.authentications).toBe(before);
  }, 60_000);

  it('refuses a host known_hosts does not list before connecting at all', async () => {
    const error = await parseEngineUrl(`ssh://ci@127.0.0.1:${port}`, {
      env: await home('unknown', `[127.0.0.1]:1 ${knownHost.split(' ').slice(1).join(' ')}`),
      identityFile: join(dir, 'client_key'),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(/host key is not in/);
  });

  it('fails as infrastructure when the engine host refuses the key', async () => {
    const stranger = utils.generateKeyPairSync('ed25519');
    await writeFile(join(dir, 'stranger_key'), stranger.private, { mode: 0o600 });
    const endpoint = await parseEngineUrl(`ssh://ci@127.0.0.1:${port}`, {
      env: await home('stranger', knownHost),
      identityFile: join(dir, 'stranger_key'),
    });
    await expect(new DockerEngine(endpoint).ping(15_000)).rejects.toBeInstanceOf(SandboxUnavailable);
  }, 60_000);
});
