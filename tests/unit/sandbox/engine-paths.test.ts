/**
 * What the engine client sends, seen by a fake engine on loopback: a name that is not a name
 * never becomes a request (no path, no query, nothing sent at all); a valid name goes into the
 * path exactly as before; an endpoint that redirects is not followed; an answer whose
 * connection drops, or that is not JSON, is `SandboxUnavailable` with the cause, never a hang,
 * an unhandled error or a build that seems to have finished.
 */
import { PassThrough, Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, SandboxUnavailable } from '../../../src/errors.js';
import { hardenedContainer, IDLE_CONTAINER_LIMITS } from '../../../src/sandbox/container/container-spec.js';
import { DockerEngine } from '../../../src/sandbox/docker/engine/index.js';
import { startFakeEngine, type FakeEngineServer } from '../../helpers/fake-engine-server.js';

const HOSTILE = [
  '../../evil',
  '../../../../containers/json',
  'a/../../b',
  'x%2f..%2f..%2fy',
  'x?all=1',
  'x#y',
  '-x',
  ' x',
  'x\r\nHost: elsewhere',
  '..',
  '',
];

let server: FakeEngineServer;
let engine: DockerEngine;
let trap: FakeEngineServer | undefined;

async function serve(route?: Parameters<typeof startFakeEngine>[0]): Promise<void> {
  await server?.close();
  server = await startFakeEngine(route);
  engine = new DockerEngine({ transport: 'tcp', host: '127.0.0.1', port: server.port });
}

beforeEach(async () => {
  await serve();
});
afterEach(async () => {
  await server.close();
  await trap?.close();
  trap = undefined;
});

function container(overrides: { image?: string; name?: string } = {}) {
  return hardenedContainer({
    image: overrides.image ?? 'repo:1',
    ...(overrides.name !== undefined ? { name: overrides.name } : {}),
    entrypoint: ['true'],
    cmd: [],
    user: '1000:1000',
    workingDir: '/',
    env: [],
    labels: {},
    ...IDLE_CONTAINER_LIMITS,
  });
}

const out = () => new PassThrough();

describe('a name that is not a name never reaches the engine', () => {
  const calls: [string, (e: DockerEngine, name: string) => Promise<unknown>][] = [
    ['images.inspect', (e, n) => e.images.inspect(n)],
    ['images.remove', (e, n) => e.images.remove(n)],
    ['images.tag (the image)', (e, n) => e.images.tag(n, 'repo', '1')],
    ['images.tag (the new name)', (e, n) => e.images.tag('repo:1', n, '1')],
    ['images.pull', (e, n) => e.images.pull(n)],
    ['images.save', (e, n) => e.images.save(['repo:1', n])],
    ['images.import', (e, n) => e.images.import(Readable.from([]), n, 'latest')],
    [
      'images.build (its tag)',
      (e, n) =>
        e.images.build(Readable.from([]), { tag: n, dockerfile: 'Dockerfile', buildArgs: {}, labels: {} }),
    ],
    ['containers.create (its image)', (e, n) => e.containers.create(container({ image: n }))],
    ['containers.create (its name)', (e, n) => e.containers.create(container({ name: n }))],
    ['containers.inspect', (e, n) => e.containers.inspect(n)],
    ['containers.start', (e, n) => e.containers.start(n)],
    ['containers.stop', (e, n) => e.containers.stop(n)],
    ['containers.remove', (e, n) => e.containers.remove(n)],
    ['containers.restart', (e, n) => e.containers.restart(n)],
    ['containers.rename (the container)', (e, n) => e.containers.rename(n, 'x')],
    ['containers.rename (the new name)', (e, n) => e.containers.rename('abc', n)],
    ['containers.changes', (e, n) => e.containers.changes(n)],
    ['containers.diskUsage', (e, n) => e.containers.diskUsage(n)],
    ['containers.getArchive', (e, n) => e.containers.getArchive(n, '/workspace')],
    ['containers.putArchive', (e, n) => e.containers.putArchive(n, '/', Buffer.alloc(0))],
    ['containers.output', (e, n) => e.containers.output(n)],
    ['containers.commit', (e, n) => e.containers.commit('abc', { repo: n, tag: '1', labels: {} })],
    [
      'exec.start',
      (e, n) =>
        e.exec.start(n, {
          cmd: ['true'],
          user: '1000',
          workingDir: '/',
          env: [],
          stdout: out(),
          stderr: out(),
        }),
    ],
    ['networks.remove', (e, n) => e.networks.remove(n)],
    [
      'networks.create',
      (e, n) =>
        e.networks.create({
          name: n,
          labels: {},
          subnet: '10.1.0.0/29',
          gateway: '10.1.0.1',
          bridgeName: 'b',
        }),
    ],
  ];

  it.each(calls)('%s: refused as a ConfigError before any request', async (_, call) => {
    for (const name of HOSTILE) {
      const error = await call(engine, name).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(name)).toBeInstanceOf(ConfigError);
    }
    expect(server.requests).toEqual([]);
  });

  it('valid names go into the path as they always did', async () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    await engine.images.inspect('sandbox-harness/base-node:20');
    await engine.images.inspect(`localhost:5000/team/app@${digest}`);
    await engine.containers.inspect('sandbox-harness-kept-run-1-attempt-1-abcdef');
    expect(server.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /images/sandbox-harness/base-node:20/json',
      `GET /images/localhost:5000/team/app@${digest}/json`,
      'GET /containers/sandbox-harness-kept-run-1-attempt-1-abcdef/json',
    ]);
  });
});

describe('an endpoint that misbehaves', () => {
  it('a redirect is not followed: the call fails, nothing reaches where it pointed', async () => {
    trap = await startFakeEngine();
    const target = `http://127.0.0.1:${trap.port}/images/evil/json`;
    await serve((req, _body, res) => {
      if (req.url?.startsWith('/images/')) {
        res.writeHead(301, { location: target });
        res.end();
        return true;
      }
    });
    const error = await engine.images.inspect('repo:1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect(String((error as Error).message)).toMatch(
      /inspecting image repo:1: .*redirect to ".*"; an engine never redirects/,
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(trap.requests).toEqual([]);
  }, 10_000);

  it('an answer cut off after its headers is SandboxUnavailable with the cause, not a call that never returns', async () => {
    await serve((req, _body, res) => {
      if (req.url === '/info') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"Driver":');
        setTimeout(() => req.socket.destroy(), 20);
        return true;
      }
    });
    const error = await engine.info().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect((error as Error).message).toMatch(
      /^reading Docker engine info: lost the connection to the Docker engine at tcp:\/\/127\.0\.0\.1:\d+ \(ECONNRESET\)$/,
    );
    expect((error as SandboxUnavailable).cause).toMatchObject({ code: 'ECONNRESET' });
  }, 10_000);

  it('a connection reset before any answer is SandboxUnavailable', async () => {
    await serve((req) => {
      if (req.url?.startsWith('/containers/json')) {
        req.socket.destroy();
        return true;
      }
    });
    await expect(engine.containers.list({})).rejects.toThrow(
      /^listing containers: lost the connection to .*\((ECONNRESET|EPIPE)\)$/,
    );
  }, 10_000);

  it('a progress stream that drops mid-pull is the engine failing, not the image', async () => {
    await serve((req, _body, res) => {
      if (req.url?.startsWith('/images/create')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"status":"Pulling from library/app"}\n');
        setTimeout(() => req.socket.destroy(), 20);
        return true;
      }
    });
    const error = await engine.images.pull('app:1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect((error as Error).message).toMatch(/^pulling app:1: lost the connection to/);
  }, 10_000);

  it('a progress stream that is not JSON is the engine failing, and nothing escapes as an exception', async () => {
    await serve((req, _body, res) => {
      if (req.url?.startsWith('/build')) {
        req.resume();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('<html>not an engine</html>\n');
        return true;
      }
    });
    const error = await engine.images
      .build(Readable.from([Buffer.alloc(10)]), {
        tag: 'repo:1',
        dockerfile: 'Dockerfile',
        buildArgs: {},
        labels: {},
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect((error as Error).message).toMatch(
      /^building repo:1: the engine at .* sent a progress line that is not JSON: "<html>not an engine<\/html>"$/,
    );
  }, 10_000);

  it('a progress line with no end is cut off at a megabyte, not kept growing', async () => {
    await serve((req, _body, res) => {
      if (req.url?.startsWith('/images/create')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, 'x');
        let sent = 0;
        const more = () => {
          if (res.destroyed || sent > 64) return;
          sent++;
          if (res.write(chunk)) setImmediate(more);
          else res.once('drain', more);
        };
        more();
        return true;
      }
    });
    await expect(engine.images.pull('app:1')).rejects.toThrow(/a progress line of more than a megabyte/);
  }, 10_000);
});
