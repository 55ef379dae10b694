import { createHash } from 'node:crypto';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startViewServer, type ViewServer } from '../../../src/view/server.js';
import { openViewSource } from '../../../src/view/source.js';
import { tempDir, writeRun } from './fixtures.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A raw request, so the Host header and the method are exactly what the test says. */
function send(
  port: number,
  path: string,
  options: { method?: string; host?: string; agent?: Agent } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        agent: options.agent ?? false,
        headers: { host: options.host ?? `127.0.0.1:${port}` },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

let server: ViewServer;
let remove: () => Promise<void>;
const token = 'test-token-0123456789abcdefABCDEF';

beforeAll(async () => {
  const temp = await tempDir();
  remove = temp.remove;
  await writeRun(join(temp.dir, 'runs'), 'run-1');
  server = await startViewServer(await openViewSource(join(temp.dir, 'runs')), { token });
});
afterAll(async () => {
  await server.close();
  await remove();
});

describe('view server: only the holder of the token, only from this machine, only reads', () => {
  it('listens on 127.0.0.1 at the port it reports, with the token in the URL', () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/${token}/`);
    expect(server.port).toBeGreaterThan(0);
  });

  it('serves pages under the token', async () => {
    const index = await send(server.port, `/${token}/`);
    expect(index.status).toBe(200);
    expect(index.body).toContain('<a href="runs/run-1.html">run-1</a>');
    const run = await send(server.port, `/${token}/runs/run-1.html`);
    expect(run.status).toBe(200);
    expect(run.body).toContain('<h1>Run run-1');
  });

  it('refuses a request without the token, or with a wrong one, and names nothing', async () => {
    for (const path of [
      '/',
      '/index.html',
      '/runs/run-1.html',
      `/${token.slice(0, -1)}/`,
      `/${token}x/`,
      `/x${token}/`,
      `/${token.toUpperCase()}/`,
    ]) {
      const reply = await send(server.port, path);
      expect(reply.status, path).toBe(403);
      expect(reply.body).not.toContain('run-1');
    }
  });

  it('refuses a Host other than the loopback address (DNS rebinding)', async () => {
    const reply = await send(server.port, `/${token}/`, { host: `attacker.example:${server.port}` });
    expect(reply.status).toBe(403);
    expect((await send(server.port, `/${token}/`, { host: `localhost:${server.port}` })).status).toBe(200);
  });

  it('answers GET and HEAD only', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const reply = await send(server.port, `/${token}/`, { method });
      expect(reply.status, method).toBe(405);
      expect(reply.headers.allow).toBe('GET, HEAD');
    }
    const head = await send(server.port, `/${token}/`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(Number(head.headers['content-length'])).toBeGreaterThan(1000);
  });

  it('sends the security headers on every answer', async () => {
    for (const path of [`/${token}/`, '/', `/${token}/nope.html`]) {
      const reply = await send(server.port, path);
      expect(reply.headers['content-security-policy']).toMatch(
        /^default-src 'none'; style-src 'sha256-[^']+'; script-src 'sha256-[^']+'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'$/,
      );
      expect(reply.headers['x-content-type-options']).toBe('nosniff');
      expect(reply.headers['referrer-policy']).toBe('no-referrer');
      expect(reply.headers['cache-control']).toBe('no-store');
    }
  });

  it("allows exactly the page's own inline style and script by their hashes", async () => {
    const reply = await send(server.port, `/${token}/`);
    const policy = String(reply.headers['content-security-policy']);
    const hash = (s: string) => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;
    const style = /<style>([\s\S]*?)<\/style>/.exec(reply.body)?.[1] ?? '';
    const script = /<script>([\s\S]*?)<\/script>/.exec(reply.body)?.[1] ?? '';
    expect(policy).toContain(`style-src ${hash(style)};`);
    expect(policy).toContain(`script-src ${hash(script)};`);
    expect(reply.body.match(/<script/g)).toHaveLength(1);
    expect(reply.body.match(/<style/g)).toHaveLength(1);
    expect(reply.body).not.toMatch(/\sstyle="/);
  });

  it('answers 404 for anything that is not one of its pages, files of the run folder included', async () => {
    // Dot segments are resolved before routing: they leave the token behind (403 above).
    expect((await send(server.port, `/${token}/runs/../../etc/passwd`)).status).toBe(403);
    for (const path of [
      '/nope.html',
      '/runs/run-2.html',
      '/runs/run-1/run.json',
      '/runs/..%2F..%2Fetc%2Fpasswd.html',
      '/runs/%252e%252e.html',
      '/eval.html',
    ]) {
      const reply = await send(server.port, `/${token}${path}`);
      expect(reply.status, path).toBe(404);
    }
  });

  it('redirects the bare token to its folder, so relative links work', async () => {
    const reply = await send(server.port, `/${token}`);
    expect(reply.status).toBe(302);
    expect(reply.headers.location).toBe(`/${token}/`);
  });

  it('makes a fresh token each time', async () => {
    const temp = await tempDir();
    await writeRun(temp.dir, 'run-1');
    const source = await openViewSource(temp.dir);
    const a = await startViewServer(source);
    const b = await startViewServer(source);
    try {
      expect(a.token).not.toBe(b.token);
      expect(a.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect((await send(a.port, `/${b.token}/`)).status).toBe(403);
    } finally {
      await a.close();
      await b.close();
      await temp.remove();
    }
  });

  it('stops listening when closed, even with a connection kept alive', async () => {
    const temp = await tempDir();
    await writeRun(temp.dir, 'run-1');
    try {
      const s = await startViewServer(await openViewSource(temp.dir));
      const agent = new Agent({ keepAlive: true });
      expect((await send(s.port, `/${s.token}/`, { agent })).status).toBe(200);
      await s.close();
      agent.destroy();
      await expect(send(s.port, `/${s.token}/`)).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      await temp.remove();
    }
  });
});
