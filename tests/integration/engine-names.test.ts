/**
 * The built CLI against a fake engine endpoint on loopback (DOCKER_HOST=tcp://127.0.0.1:PORT):
 * an image name made of `../` segments, from a flag, a catalog or a repo's own recipe, is a
 * configuration error (exit 2) that names where it came from, and no request the endpoint
 * received was built from it; an endpoint that drops the connection in the middle of an answer,
 * or answers with a redirect, is an unavailable engine (exit 3) with a message that says so,
 * never an unhandled error, a stack trace or a request somewhere else.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runCli } from '../helpers/cli.js';
import { startFakeEngine, type FakeEngineServer, type FakeRoute } from '../helpers/fake-engine-server.js';

const EVIL = '../../../../evil';

let dir: string;
let repo: string;
const servers: FakeEngineServer[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sh-engine-names-'));
  repo = join(dir, 'repo');
  await mkdir(repo);
  await writeFile(join(repo, 'hello.txt'), 'hello\n');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  while (servers.length > 0) await servers.pop()!.close();
});

async function fakeEngine(route?: FakeRoute): Promise<FakeEngineServer> {
  const server = await startFakeEngine(route);
  servers.push(server);
  return server;
}

function cli(server: FakeEngineServer, args: string[], cwd = dir) {
  return runCli(args, { cwd, env: cleanEnv({ DOCKER_HOST: server.url, HOME: dir }) });
}

/** Nothing the endpoint received carries the hostile name, raw or escaped. */
function expectNoRequestFrom(server: FakeEngineServer): void {
  for (const r of server.requests) {
    const text = `${r.method} ${decodeURIComponent(r.url)} ${r.body.toString('latin1')}`;
    expect(text).not.toMatch(/evil|\.\.\//);
  }
}

function expectNoCrash(stderr: string): void {
  expect(stderr).not.toMatch(/internal error|Unhandled|at .*\.js:\d+/);
}

describe('an image name that is not a name', () => {
  it('exec --base-image: exit 2, the flag named, nothing sent', async () => {
    const server = await fakeEngine();
    const r = await cli(server, ['exec', '--repo', repo, '--base-image', EVIL, '--', 'true']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /the base image \(sandbox\.baseImage, --base-image\): expected an image reference .*got "\.\.\/\.\.\/\.\.\/\.\.\/evil"/,
    );
    expectNoRequestFrom(server);
    expectNoCrash(r.stderr);
  });

  it('exec --image: exit 2, nothing sent', async () => {
    const server = await fakeEngine();
    const r = await cli(server, ['exec', '--image', EVIL, '--', 'true']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/image: expected an image reference/);
    expectNoRequestFrom(server);
    expectNoCrash(r.stderr);
  });

  it("a repo's Dockerfile.sandbox with such an ARG BASE_IMAGE default: exit 2 at its file and line, nothing sent", async () => {
    const server = await fakeEngine();
    const own = join(dir, 'recipe-repo');
    await mkdir(own);
    await writeFile(
      join(own, 'Dockerfile.sandbox'),
      `# the repo's recipe\nARG BASE_IMAGE=${EVIL}\nFROM \${BASE_IMAGE}\n`,
    );
    const r = await cli(server, ['exec', '--repo', own, '--', 'true']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /Dockerfile\.sandbox:2: the recipe's ARG BASE_IMAGE default: expected an image reference/,
    );
    expectNoRequestFrom(server);
    expectNoCrash(r.stderr);
  });

  it("a catalog's sandbox.image: exit 2 at the catalog's line, before the engine is asked anything", async () => {
    const server = await fakeEngine();
    const catalog = join(dir, 'catalog.yaml');
    await writeFile(
      catalog,
      [
        'version: 1',
        'service: demo',
        'sandbox:',
        `  image: "${EVIL}"`,
        'testCommand: "true"',
        'editable: ["src/**"]',
        '',
      ].join('\n'),
    );
    const r = await cli(server, ['exec', '--catalog', catalog, '--', 'true']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/catalog\.yaml:4:\d+.*sandbox\.image.*expected an image reference/s);
    expect(server.requests).toEqual([]);
    expectNoCrash(r.stderr);
  });
});

describe('an engine endpoint that misbehaves', () => {
  it('drops the connection in the middle of an answer: exit 3, the cause in the message', async () => {
    const server = await fakeEngine((req, _body, res) => {
      if (req.method === 'GET' && req.url?.startsWith('/images/')) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '4096' });
        res.write('{"Id":"sha256:');
        setTimeout(() => req.socket.destroy(), 20);
        return true;
      }
    });
    const r = await cli(server, ['exec', '--repo', repo, '--', 'true']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(
      /^error: inspecting image \S+: lost the connection to the Docker daemon at DOCKER_HOST=tcp:\/\/127\.0\.0\.1:\d+ \(ECONNRESET\)$/m,
    );
    expectNoCrash(r.stderr);
  });

  it('resets the connection before answering: exit 3', async () => {
    const server = await fakeEngine((req) => {
      if (req.url === '/info') {
        req.socket.destroy();
        return true;
      }
    });
    const r = await cli(server, ['exec', '--repo', repo, '--', 'true']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(
      /^error: reading Docker engine info: lost the connection to .*\((ECONNRESET|EPIPE)\)$/m,
    );
    expectNoCrash(r.stderr);
  });

  it('answers with a redirect: exit 3, and nothing reaches where it pointed', async () => {
    const trap = await fakeEngine();
    const server = await fakeEngine((req, _body, res) => {
      if (req.url?.startsWith('/images/')) {
        res.writeHead(301, { location: `http://127.0.0.1:${trap.port}/images/evil/json` });
        res.end();
        return true;
      }
    });
    const r = await cli(server, ['exec', '--repo', repo, '--', 'true']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/redirect to .*; an engine never redirects, so it was not followed/);
    expect(trap.requests).toEqual([]);
    expectNoCrash(r.stderr);
  });
});
