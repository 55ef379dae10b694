/**
 * `sandbox-harness view`: a read-only web server for one person on this machine. It binds
 * 127.0.0.1 only, answers GET and HEAD only, and every page lives under a random token
 * (`/<token>/...`), so another local user, or a web page in the browser trying its luck on
 * localhost ports, gets nothing. The Host header must name the loopback address too, which
 * closes DNS rebinding. Pages are rendered per request from the run folders, so a running
 * eval's new trials appear on reload.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CONTENT_SECURITY_POLICY } from './layout.js';
import { renderPage } from './site.js';
import type { ViewSource } from './source.js';

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

export interface ViewServerOptions {
  /** 0 (the default): a free port chosen by the system. */
  port?: number;
  /** For tests; a fresh random token otherwise. */
  token?: string;
  /** Called with an error that rendering a page threw (the visitor sees a 500). */
  onError?: (error: unknown) => void;
}

export interface ViewServer {
  url: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

function send(
  response: ServerResponse,
  status: number,
  body: string,
  head: boolean,
  extra: Record<string, string> = {},
): void {
  const bytes = Buffer.from(body, 'utf8');
  response.writeHead(status, {
    ...SECURITY_HEADERS,
    'Content-Type': status === 200 ? 'text/html; charset=utf-8' : 'text/plain; charset=utf-8',
    'Content-Length': String(bytes.length),
    ...extra,
  });
  response.end(head ? undefined : bytes);
}

function sameToken(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

export async function startViewServer(
  source: ViewSource,
  options: ViewServerOptions = {},
): Promise<ViewServer> {
  const token = options.token ?? randomBytes(24).toString('base64url');
  let port = 0;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const head = request.method === 'HEAD';
    if (request.method !== 'GET' && !head) {
      send(response, 405, 'Only GET and HEAD: this viewer is read-only.\n', head, { Allow: 'GET, HEAD' });
      return;
    }
    const host = (request.headers.host ?? '').toLowerCase();
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) {
      send(response, 403, 'Forbidden: this viewer answers only to 127.0.0.1.\n', head);
      return;
    }
    let url: URL;
    try {
      url = new URL(request.url ?? '/', `http://127.0.0.1:${port}`);
    } catch {
      send(response, 400, 'Bad request.\n', head);
      return;
    }
    const [, first = '', ...rest] = url.pathname.split('/');
    if (!sameToken(first, token)) {
      send(
        response,
        403,
        'Forbidden: open the URL that `sandbox-harness view` printed, token included.\n',
        head,
      );
      return;
    }
    // Relative links need the trailing slash.
    if (rest.length === 0) {
      send(response, 302, 'Found.\n', head, { Location: `/${token}/` });
      return;
    }
    const html = await renderPage(source, rest.join('/'), url.searchParams, { exported: false });
    if (html === undefined) send(response, 404, 'No such page.\n', head);
    else send(response, 200, html, head);
  };

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      options.onError?.(error);
      if (!response.headersSent)
        send(response, 500, 'The page could not be rendered.\n', request.method === 'HEAD');
      else response.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: options.port ?? 0 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/${token}/`,
    port,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
