import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, SandboxUnavailable } from '../../../src/errors.js';
import {
  contextId,
  describeEndpoint,
  localEndpoint,
  parseEngineUrl,
  resolveContext,
  resolveEngineRef,
} from '../../../src/sandbox/docker/engine/endpoint.js';
import { DockerEngine } from '../../../src/sandbox/docker/engine/index.js';

const HOST_KEY = 'AAAAC3NzaC1lZDI1NTE5AAAAIJZKOkoU4T0kFRbMTuXxLXbM4dnpYHsgCHMHnL9kOc67';

let home: string;
let env: NodeJS.ProcessEnv;

async function tlsDir(dir: string, parts = ['ca', 'cert', 'key']): Promise<string> {
  await mkdir(dir, { recursive: true });
  for (const part of parts) await writeFile(path.join(dir, `${part}.pem`), `${part} of ${dir}`);
  return dir;
}

async function context(name: string, host: string, options: { tls?: boolean; skipVerify?: boolean } = {}) {
  const id = contextId(name);
  const meta = path.join(home, '.docker', 'contexts', 'meta', id);
  await mkdir(meta, { recursive: true });
  await writeFile(
    path.join(meta, 'meta.json'),
    JSON.stringify({
      Name: name,
      Metadata: {},
      Endpoints: { docker: { Host: host, SkipTLSVerify: options.skipVerify === true } },
    }),
  );
  if (options.tls) await tlsDir(path.join(home, '.docker', 'contexts', 'tls', id, 'docker'));
}

async function failure(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return error as ConfigError;
}

beforeEach(async () => {
  home = await mkdtemp(path.join(tmpdir(), 'endpoint-'));
  env = { HOME: home };
});

afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

describe('engine URLs', () => {
  it('reads a unix socket path', async () => {
    expect(await parseEngineUrl('unix:///run/other.sock', { env })).toEqual({
      transport: 'unix',
      socketPath: '/run/other.sock',
    });
    await failure(parseEngineUrl('unix://relative.sock', { env }));
  });

  it('reads tcp:// with mutual TLS from the cert folder and defaults to port 2376 then', async () => {
    const certs = await tlsDir(path.join(home, 'certs'));
    const endpoint = await parseEngineUrl('tcp://10.0.0.5', { env, certDir: certs });
    expect(endpoint).toMatchObject({ transport: 'tcp', host: '10.0.0.5', port: 2376 });
    expect(endpoint.transport === 'tcp' && endpoint.tls?.cert.toString()).toBe(`cert of ${certs}`);
    expect(describeEndpoint(endpoint)).toBe('tcp://10.0.0.5:2376 (TLS)');
  });

  it('takes TLS files from DOCKER_CERT_PATH as the docker CLI does', async () => {
    const certs = await tlsDir(path.join(home, 'elsewhere'));
    const endpoint = await parseEngineUrl('tcp://build-box:2376', {
      env: { ...env, DOCKER_CERT_PATH: certs },
    });
    expect(endpoint.transport === 'tcp' && endpoint.tls?.files.key).toBe(path.join(certs, 'key.pem'));
  });

  it('refuses a remote tcp:// engine without TLS, saying why and how to fix it', async () => {
    const error = await failure(parseEngineUrl('tcp://10.0.0.5:2375', { env }));
    expect(error.message).toMatch(
      /10\.0\.0\.5:2375 without TLS is refused: anyone who reaches that port controls the engine/,
    );
    expect(error.hint).toMatch(/docker context create/);
  });

  it('allows plain tcp:// on loopback only, on port 2375 by default', async () => {
    expect(await parseEngineUrl('tcp://127.0.0.1', { env })).toEqual({
      transport: 'tcp',
      host: '127.0.0.1',
      port: 2375,
    });
    expect(await parseEngineUrl('http://localhost:2400', { env })).toMatchObject({ port: 2400 });
  });

  it('refuses incomplete TLS folders, naming the missing files', async () => {
    const certs = await tlsDir(path.join(home, 'half'), ['ca']);
    const error = await failure(parseEngineUrl('tcp://10.0.0.5:2376', { env, certDir: certs }));
    expect(error.message).toContain(
      `missing ${path.join(certs, 'cert.pem')}, ${path.join(certs, 'key.pem')}`,
    );
  });

  it('refuses other schemes, paths and credentials in the URL', async () => {
    expect((await failure(parseEngineUrl('npipe:////./pipe/docker', { env }))).message).toMatch(
      /unsupported scheme npipe/,
    );
    expect((await failure(parseEngineUrl('docker-host:2376', { env }))).message).toMatch(/expected a URL/);
    expect((await failure(parseEngineUrl('tcp://127.0.0.1:2375/v1.41', { env }))).message).toMatch(/no path/);
    expect((await failure(parseEngineUrl('ssh://ci:secret@runner-3', { env }))).message).toMatch(/password/);
  });

  it('reaches ssh:// engines only with a known host key, with the key or agent of this process', async () => {
    await writeFile(path.join(home, 'id_test'), 'PRIVATE KEY');
    const unknown = await failure(
      parseEngineUrl('ssh://ci@runner-3', { env, identityFile: path.join(home, 'id_test') }),
    );
    expect(unknown.message).toMatch(/host key is not in .*known_hosts.* impostor/);
    expect(unknown.hint).toMatch(/ssh-keyscan runner-3/);

    await mkdir(path.join(home, '.ssh'));
    await writeFile(path.join(home, '.ssh', 'known_hosts'), `[runner-3]:2222 ssh-ed25519 ${HOST_KEY}\n`);
    const endpoint = await parseEngineUrl('ssh://ci@runner-3:2222', {
      env,
      identityFile: path.join(home, 'id_test'),
    });
    expect(endpoint).toMatchObject({ transport: 'ssh', host: 'runner-3', port: 2222, username: 'ci' });
    expect(endpoint.transport === 'ssh' && endpoint.ssh.privateKey?.toString()).toBe('PRIVATE KEY');
    expect(endpoint.transport === 'ssh' && endpoint.ssh.hostKeys).toHaveLength(1);

    const agent = await parseEngineUrl('ssh://ci@runner-3:2222', {
      env: { ...env, SSH_AUTH_SOCK: '/tmp/agent.sock' },
    });
    expect(agent.transport === 'ssh' && agent.ssh.agent).toBe('/tmp/agent.sock');

    const none = await failure(parseEngineUrl('ssh://ci@runner-3:2222', { env }));
    expect(none.message).toMatch(/no ssh agent .* and no ssh key/);
  });
});

describe('the local engine', () => {
  it('is /var/run/docker.sock without DOCKER_HOST', async () => {
    expect(await localEndpoint(env)).toEqual({ transport: 'unix', socketPath: '/var/run/docker.sock' });
  });

  it('follows DOCKER_HOST, with TLS from DOCKER_CERT_PATH when DOCKER_TLS_VERIFY is set', async () => {
    const certs = await tlsDir(path.join(home, 'certs'));
    const endpoint = await localEndpoint({
      ...env,
      DOCKER_HOST: 'tcp://10.1.2.3:2376',
      DOCKER_TLS_VERIFY: '1',
      DOCKER_CERT_PATH: certs,
    });
    expect(describeEndpoint(endpoint)).toBe('tcp://10.1.2.3:2376 (TLS)');
  });
});

describe('docker contexts by name', () => {
  it('resolves a context to its host and its TLS files, as docker context create stores them', async () => {
    await context('build-box', 'tcp://10.0.0.7:2376', { tls: true });
    const endpoint = await resolveContext('build-box', { env });
    expect(describeEndpoint(endpoint)).toBe('tcp://10.0.0.7:2376 (TLS)');
    expect(endpoint.transport === 'tcp' && endpoint.tls?.files.ca).toBe(
      path.join(home, '.docker', 'contexts', 'tls', contextId('build-box'), 'docker', 'ca.pem'),
    );
  });

  it('uses only the context TLS files, never DOCKER_CERT_PATH', async () => {
    await context('bare', 'tcp://10.0.0.8:2376');
    const certs = await tlsDir(path.join(home, 'certs'));
    const error = await failure(resolveContext('bare', { env: { ...env, DOCKER_CERT_PATH: certs } }));
    expect(error.message).toMatch(
      /docker context bare \(tcp:\/\/10\.0\.0\.8:2376\): .* without TLS is refused/,
    );
  });

  it('honours DOCKER_CONFIG', async () => {
    await context('moved', 'unix:///run/moved.sock');
    const endpoint = await resolveContext('moved', {
      env: { DOCKER_CONFIG: path.join(home, '.docker'), HOME: '/nonexistent' },
    });
    expect(endpoint).toEqual({ transport: 'unix', socketPath: '/run/moved.sock' });
  });

  it('takes `default` as the local engine', async () => {
    expect(await resolveContext('default', { env })).toEqual({
      transport: 'unix',
      socketPath: '/var/run/docker.sock',
    });
  });

  it('names the known contexts when one is missing', async () => {
    await context('alpha', 'unix:///a.sock');
    await context('beta', 'unix:///b.sock');
    const error = await failure(resolveContext('gamma', { env }));
    expect(error.message).toMatch(/no docker context named "gamma"/);
    expect(error.hint).toBe('Known contexts: default, alpha, beta (`docker context ls`).');
  });

  it('refuses a context that skips TLS verification', async () => {
    await context('lax', 'tcp://10.0.0.9:2376', { tls: true, skipVerify: true });
    expect((await failure(resolveContext('lax', { env }))).message).toMatch(/skips TLS verification/);
  });

  it('tells --engine values apart: a URL, else a context name', async () => {
    await context('box', 'unix:///box.sock');
    expect(await resolveEngineRef('box', { env })).toEqual({ transport: 'unix', socketPath: '/box.sock' });
    expect(await resolveEngineRef('unix:///x.sock', { env })).toEqual({
      transport: 'unix',
      socketPath: '/x.sock',
    });
  });
});

describe('DockerEngine with an endpoint', () => {
  it('talks to exactly that engine whatever DOCKER_HOST says, and names it in errors', async () => {
    const saved = { host: process.env.DOCKER_HOST, certs: process.env.DOCKER_CERT_PATH };
    process.env.DOCKER_HOST = 'tcp://127.0.0.1:9';
    process.env.DOCKER_CERT_PATH = await tlsDir(path.join(home, 'env-certs'));
    try {
      const engine = new DockerEngine({ transport: 'unix', socketPath: path.join(home, 'absent.sock') });
      const error = await engine.ping(2000).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SandboxUnavailable);
      expect((error as Error).message).toBe(
        `Docker engine check: cannot reach the Docker engine at unix://${path.join(home, 'absent.sock')} (ENOENT)`,
      );
    } finally {
      if (saved.host === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved.host;
      if (saved.certs === undefined) delete process.env.DOCKER_CERT_PATH;
      else process.env.DOCKER_CERT_PATH = saved.certs;
    }
  });
});
