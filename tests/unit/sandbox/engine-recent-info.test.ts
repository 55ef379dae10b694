/**
 * `recentInfo`: every run of an eval asks the engine for its runtimes and data root at its
 * start; one request answers all of them for a few seconds, a failed answer is never kept,
 * and `info()` still asks the engine each time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DockerEngine } from '../../../src/sandbox/docker/engine/index.js';
import { json, startFakeEngine, type FakeEngineServer } from '../../helpers/fake-engine-server.js';

let server: FakeEngineServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const infoRequests = () => server!.requests.filter((r) => r.url.split('?')[0]!.endsWith('/info')).length;

describe('DockerEngine.recentInfo', () => {
  it('shares one answer between callers within its age, asks again after it, and info() always asks', async () => {
    server = await startFakeEngine();
    const engine = new DockerEngine({ transport: 'tcp', host: '127.0.0.1', port: server.port });
    const [a, b] = await Promise.all([engine.recentInfo(), engine.recentInfo()]);
    expect(a).toBe(b);
    expect(await engine.recentInfo()).toBe(a);
    expect(infoRequests()).toBe(1);
    // Older than asked for: a new request.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await engine.recentInfo(10)).not.toBe(a);
    expect(infoRequests()).toBe(2);
    await engine.info();
    expect(infoRequests()).toBe(3);
  });

  it('keeps no failed answer: the next call asks the engine again', async () => {
    let fail = true;
    server = await startFakeEngine((req, _body, res) => {
      if (!req.url?.split('?')[0]!.endsWith('/info') || !fail) return false;
      fail = false;
      return json(res, 500, { message: 'engine busy' });
    });
    const engine = new DockerEngine({ transport: 'tcp', host: '127.0.0.1', port: server.port });
    await expect(engine.recentInfo()).rejects.toThrow();
    expect((await engine.recentInfo()).serverVersion).toBe('20.10.24');
    expect(infoRequests()).toBe(2);
  });
});
