/**
 * A Docker Engine API endpoint on loopback that records every request (method, path, body) and
 * answers the few calls a test needs: enough of an engine to see what the harness's engine
 * client sends, byte for byte, and to make it misbehave (a reset mid-answer, a redirect)
 * without a real daemon. Nothing leaves loopback.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** The request target exactly as it arrived (path and query, nothing decoded). */
  url: string;
  body: Buffer;
}

/** Answers a request itself (true), or leaves it to the default routes (false/undefined). */
export type FakeRoute = (req: IncomingMessage, body: Buffer, res: ServerResponse) => boolean | void;

export interface FakeEngineServer {
  port: number;
  /** `tcp://127.0.0.1:PORT`: loopback needs no TLS. */
  url: string;
  requests: RecordedRequest[];
  /** Images `GET /images/<name>/json` finds, by the name as it appears in the path. */
  images: Map<string, Record<string, unknown>>;
  /** What `GET /info` says beyond the defaults. */
  info: Record<string, unknown>;
  close(): Promise<void>;
}

export function json(res: ServerResponse, status: number, value: unknown): true {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
  return true;
}

export async function startFakeEngine(route?: FakeRoute): Promise<FakeEngineServer> {
  const requests: RecordedRequest[] = [];
  const images = new Map<string, Record<string, unknown>>();
  const info: Record<string, unknown> = {};
  let created = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => undefined);
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const url = req.url ?? '';
      requests.push({ method: req.method ?? '', url, body });
      if (route?.(req, body, res)) return;
      const path = url.split('?')[0] ?? '';
      if (path === '/_ping') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('OK');
        return;
      }
      if (path === '/version') return json(res, 200, { Version: '20.10.24', ApiVersion: '1.41' });
      if (path === '/info') {
        return json(res, 200, {
          Driver: 'overlay2',
          DefaultRuntime: 'runc',
          Runtimes: { runc: { path: 'runc' } },
          NCPU: 2,
          MemTotal: 8 * 1024 ** 3,
          Name: 'fake-engine',
          ...info,
        });
      }
      const image = /^\/images\/(.+)\/json$/.exec(path)?.[1];
      if (req.method === 'GET' && image !== undefined) {
        const found = images.get(image);
        return found
          ? json(res, 200, found)
          : json(res, 404, { message: `No such image: ${decodeURIComponent(image)}` });
      }
      if (req.method === 'GET' && (path === '/containers/json' || path === '/networks'))
        return json(res, 200, []);
      if (req.method === 'POST' && path === '/containers/create') {
        created += 1;
        return json(res, 201, { Id: `${String(created).padStart(4, '0')}${'c'.repeat(60)}`, Warnings: [] });
      }
      if (req.method === 'PUT' && /^\/containers\/[^/]+\/archive$/.test(path)) return json(res, 200, {});
      if (req.method === 'POST' && /^\/containers\/[^/]+\/(start|stop|restart)$/.test(path)) {
        res.writeHead(204);
        res.end();
        return;
      }
      if (req.method === 'DELETE' && /^\/containers\/[^/]+$/.test(path)) {
        res.writeHead(204);
        res.end();
        return;
      }
      json(res, 404, { message: `the fake engine has no route for ${req.method} ${path}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `tcp://127.0.0.1:${port}`,
    requests,
    images,
    info,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An image as `GET /images/<name>/json` answers it. */
export function imageJson(id: string, tags: string[] = []): Record<string, unknown> {
  return { Id: id, RepoTags: tags, Size: 1024, Config: { User: '', Env: [], Labels: {}, Volumes: null } };
}
