/**
 * The in-sandbox half of the model bridge: a loopback HTTP/1.1 server (keep-alive, chunked
 * and streamed answers) that an agent CLI takes for its model API. It holds no key and makes
 * no decision: each request is framed whole onto its stdout, and the answer frames the host
 * writes to its stdin are played back to the client as they arrive (server-sent events
 * included). It runs as the sandbox user with `node -e`, needs nothing but Node's own
 * `http`, and carries the frame codec's source (frames.ts) so both ends parse alike.
 *
 * It is the sandbox's program, so the host believes nothing it sends (bridge-session.ts
 * checks every frame); the limits here only keep a well-behaved agent from being cut off
 * by the host's: requests over the size cap are answered 413 here, and requests past the
 * concurrency cap wait here for a free slot instead of breaking the bridge.
 */
import { encodeFrame, FRAME, frameDecoder } from './frames.js';

export interface RelayConfig {
  /** 0: any free port; the hello frame says which. */
  port: number;
  maxRequestBytes: number;
  maxConcurrent: number;
  /** Largest frame the host sends (a head or a body chunk). */
  maxHostFrameBytes: number;
  frames: typeof FRAME;
}

interface RelayLib {
  http: typeof import('node:http');
  encodeFrame: typeof encodeFrame;
  frameDecoder: typeof frameDecoder;
}

/**
 * The relay's whole program. Self-contained (only its arguments and Node's globals): its
 * source text is what runs in the sandbox.
 */
function relayMain(config: RelayConfig, lib: RelayLib): void {
  const T = config.frames;
  const empty = Buffer.alloc(0);
  interface Job {
    id: number;
    frame: Buffer;
    res: import('node:http').ServerResponse;
  }
  const live = new Map<number, Job>();
  const waiting: Job[] = [];
  let nextId = 0;
  let closing = false;

  const out = (type: number, id: number, payload: Uint8Array) =>
    process.stdout.write(lib.encodeFrame(type, id, payload));

  const localError = (
    res: import('node:http').ServerResponse,
    status: number,
    type: string,
    message: string,
  ) => {
    const body = JSON.stringify({ type: 'error', error: { type, message } });
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };

  const send = (job: Job) => {
    live.set(job.id, job);
    out(T.request, job.id, job.frame);
  };

  const finished = (id: number) => {
    if (!live.delete(id)) return;
    const next = waiting.shift();
    if (next) send(next);
  };

  const server = lib.http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > config.maxRequestBytes) over = true;
      if (!over) chunks.push(chunk);
      else chunks.length = 0;
    });
    req.on('end', () => {
      if (over) {
        localError(
          res,
          413,
          'request_too_large',
          `sandbox-harness: the request is over ${config.maxRequestBytes} bytes`,
        );
        return;
      }
      if (closing) {
        localError(res, 503, 'api_error', 'sandbox-harness: the model bridge is closed');
        return;
      }
      nextId += 1;
      const headers: [string, string][] = [];
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
        headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      const head = Buffer.from(JSON.stringify({ method: req.method, path: req.url, headers }));
      const length = Buffer.alloc(4);
      length.writeUInt32BE(head.length, 0);
      const job: Job = { id: nextId, frame: Buffer.concat([length, head, ...chunks]), res };
      res.on('close', () => {
        const queued = waiting.indexOf(job);
        if (queued >= 0) waiting.splice(queued, 1);
        else if (live.has(job.id)) {
          out(T.cancel, job.id, empty);
          finished(job.id);
        }
      });
      if (live.size < config.maxConcurrent) send(job);
      else waiting.push(job);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.headersTimeout = 60_000;
  server.requestTimeout = 120_000;

  const shutdown = (why?: string) => {
    if (closing) return;
    closing = true;
    if (why) process.stderr.write(`sandbox-harness relay: ${why}\n`);
    for (const job of live.values()) job.res.destroy();
    live.clear();
    waiting.length = 0;
    server.close();
    server.closeAllConnections();
    process.stdin.destroy();
  };

  const decode = lib.frameDecoder(config.maxHostFrameBytes, (type, id, payload) => {
    const job = live.get(id);
    // An answer to a request the client already left: nothing to do.
    if (!job) return;
    if (type === T.head) {
      const head = JSON.parse(payload.toString('utf8')) as { status: number; headers: [string, string][] };
      const headers: Record<string, string> = {};
      for (const [name, value] of head.headers) headers[name] = value;
      // Not flushed alone: the head goes out with the first bytes of the answer.
      job.res.writeHead(head.status, headers);
    } else if (type === T.body) {
      job.res.write(payload);
    } else if (type === T.end) {
      job.res.end();
      finished(id);
    } else if (type === T.abort) {
      job.res.destroy();
      finished(id);
    }
  });
  process.stdin.on('data', (chunk: Buffer) => {
    try {
      decode(chunk);
    } catch (error) {
      shutdown(`the host sent a bad frame: ${String(error)}`);
    }
  });
  // The host closed the bridge: stop serving, so the process ends.
  process.stdin.on('end', () => shutdown());
  server.on('error', (error) => {
    process.exitCode = 2;
    shutdown(`cannot listen on 127.0.0.1:${config.port}: ${String(error)}`);
  });
  server.listen(config.port, '127.0.0.1', () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    out(T.hello, 0, Buffer.from(JSON.stringify({ port })));
  });
}

/** Defaults of the relay's own limits (the host checks its own, which are the same or lower). */
export const RELAY_DEFAULTS = {
  maxRequestBytes: 16 * 1024 * 1024,
  maxConcurrent: 8,
  maxHostFrameBytes: 1024 * 1024,
} as const;

/** The script `node -e` runs; its one argument is the `RelayConfig` as JSON. */
export function relayScript(): string {
  return [
    '"use strict";',
    // A transpiler that keeps function names (tsx, esbuild's keepNames) wraps functions in
    // calls to its `__name` helper, which lives outside the functions' own text.
    'var __name = (target) => target;',
    `const encodeFrame = ${encodeFrame.toString()};`,
    `const frameDecoder = ${frameDecoder.toString()};`,
    `(${relayMain.toString()})(JSON.parse(process.argv[1]), { http: require("node:http"), encodeFrame, frameDecoder });`,
  ].join('\n');
}

/** The relay's command line in the sandbox; `node` is the image's own unless a path is given. */
export function relayArgv(config: Partial<Omit<RelayConfig, 'frames'>> = {}, node = 'node'): string[] {
  const full: RelayConfig = { port: 0, ...RELAY_DEFAULTS, ...config, frames: FRAME };
  return [node, '-e', relayScript(), JSON.stringify(full)];
}
