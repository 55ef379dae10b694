/**
 * The provider side of the bridge against a local HTTP server: a redirect is never followed
 * (its target never sees the key, the agent never sees where it pointed), an answer the server
 * compressed anyway reaches the agent decoded, and kept-alive connections are reused.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckedRequest } from '../../../src/model-bridge/checks.js';
import { HttpUpstream } from '../../../src/model-bridge/upstream.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function server(handler: (request: IncomingMessage, response: ServerResponse) => void) {
  const seen: { path: string; headers: IncomingMessage['headers']; port: number }[] = [];
  const http = createServer((request, response) => {
    seen.push({ path: request.url ?? '', headers: request.headers, port: request.socket.remotePort ?? 0 });
    request.resume();
    request.on('end', () => handler(request, response));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, seen };
}

const call: CheckedRequest = {
  api: 'anthropic-messages',
  path: '/v1/messages',
  query: '',
  model: 'm',
  stream: false,
  body: Buffer.from('{"model":"m"}'),
  json: { model: 'm' },
};

async function text(body: AsyncIterable<Uint8Array>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString();
}

describe('HttpUpstream', () => {
  it('never follows a redirect, and the agent never learns where it pointed', async () => {
    const elsewhere = await server((_request, response) => response.end('{"stolen":true}'));
    const provider = await server((_request, response) => {
      response.writeHead(307, {
        location: `${elsewhere.url}/v1/messages`,
        'content-type': 'application/json',
      });
      response.end('{"type":"error","error":{"message":"moved"}}');
    });
    const upstream = new HttpUpstream({ anthropic: { baseUrl: provider.url, apiKey: 'sk-real' } });
    const answer = await upstream.send(call, new AbortController().signal);
    expect(answer.status).toBe(307);
    expect(answer.headers.map(([name]) => name)).not.toContain('location');
    expect(await text(answer.body)).toContain('moved');
    expect(elsewhere.seen).toEqual([]);
    upstream.close();
  });

  it('decodes an answer the server compressed although asked not to', async () => {
    const provider = await server((request, response) => {
      expect(request.headers['accept-encoding']).toBe('identity');
      response.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      response.end(gzipSync('{"usage":{"input_tokens":1,"output_tokens":2}}'));
    });
    const upstream = new HttpUpstream({ anthropic: { baseUrl: provider.url, apiKey: 'sk-real' } });
    const answer = await upstream.send(call, new AbortController().signal);
    expect(await text(answer.body)).toBe('{"usage":{"input_tokens":1,"output_tokens":2}}');
    upstream.close();
  });

  it('reuses one kept-alive connection for calls in a row, with the OpenAI path under the base URL', async () => {
    const provider = await server((_request, response) => response.end('{}'));
    const upstream = new HttpUpstream({ openai: { baseUrl: `${provider.url}/v1/`, apiKey: 'sk-real' } });
    for (let i = 0; i < 3; i++) {
      const answer = await upstream.send(
        { ...call, api: 'openai-responses', path: '/v1/responses' },
        new AbortController().signal,
      );
      await text(answer.body);
    }
    expect(provider.seen.map((s) => s.path)).toEqual(['/v1/responses', '/v1/responses', '/v1/responses']);
    expect(new Set(provider.seen.map((s) => s.port)).size).toBe(1);
    expect(provider.seen[0]!.headers.authorization).toBe('Bearer sk-real');
    upstream.close();
  });

  it('refuses a base URL that is not http or https', () => {
    expect(() => new HttpUpstream({ anthropic: { baseUrl: 'file:///etc/passwd', apiKey: 'k' } })).toThrow(
      /must be http or https/,
    );
    expect(() => new HttpUpstream({ anthropic: { baseUrl: 'not a url', apiKey: 'k' } })).toThrow(/not a URL/);
  });
});
