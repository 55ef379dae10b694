/**
 * Where a checked request goes: the configured provider over HTTPS (here), or a recording
 * (bridge-replay.ts). The provider gets the request body as the sandbox sent it and headers the
 * bridge builds from nothing: the real key, the API version, the content type. What comes
 * back to the sandbox is the status, the answer's bytes as they arrive, and a few headers a
 * client acts on (its content type, request id, retry-after), never the provider's others.
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { familyOf, type CheckedRequest, type ProviderFamily } from './checks.js';

export interface UpstreamResponse {
  status: number;
  contentType?: string;
  /** Headers the agent may see, already filtered. */
  headers: [string, string][];
  body: AsyncIterable<Uint8Array>;
}

export interface Upstream {
  /** The provider families it can answer for. */
  readonly families: ReadonlySet<ProviderFamily>;
  /** Rejects when no answer could be had (the bridge answers the agent with a 502). */
  send(request: CheckedRequest, signal: AbortSignal): Promise<UpstreamResponse>;
}

export interface ProviderEndpoint {
  /**
   * The API's base URL as its SDK spells it: `https://api.anthropic.com` for Anthropic (the
   * path `/v1/messages` is added), `https://api.openai.com/v1` for OpenAI-compatible servers
   * (`/chat/completions`, `/responses` are added).
   */
  baseUrl: string;
  apiKey: string;
}

export interface HttpUpstreamOptions {
  /** Longest a call may take, answer included (default 10 minutes). */
  timeoutMs?: number;
}

const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';
/** Error answers are read whole (to take the key out of any echo); more than this is cut. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;
const PASSED_HEADERS = ['request-id', 'x-request-id', 'retry-after'] as const;
const SAFE_HEADER_VALUE = /^[\w .,:;=/+-]{1,200}$/;

/** Pieces already in hand, as a stream. */
export async function* fromChunks<T extends Uint8Array>(chunks: readonly T[]): AsyncGenerator<T> {
  for (const chunk of chunks) yield chunk;
}

/** `text` with every occurrence of each secret replaced. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (secret.length > 0) out = out.split(secret).join('[redacted]');
  return out;
}

async function readCapped(body: AsyncIterable<Uint8Array>, cap: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const piece = Buffer.from(chunk);
    chunks.push(piece.subarray(0, Math.max(0, cap - size)));
    size += piece.length;
    if (size >= cap) break;
  }
  return Buffer.concat(chunks);
}

/**
 * The answer's bytes as the provider meant them. The bridge asks for no compression; a
 * server that compresses anyway is decoded here, since the agent never sees the encoding.
 */
function decoded(response: IncomingMessage): Readable {
  const encoding = String(response.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  const decoder =
    encoding === 'gzip' || encoding === 'x-gzip'
      ? zlib.createGunzip()
      : encoding === 'deflate'
        ? zlib.createInflate()
        : encoding === 'br'
          ? zlib.createBrotliDecompress()
          : undefined;
  if (!decoder) return response;
  // Errors of either side end the stream the bridge reads (a broken answer, not a hang).
  return pipeline(response, decoder, () => undefined);
}

/**
 * The configured providers over HTTP(S), with kept-alive connections (Node's `http`: a
 * model call pays no more than a request on a warm socket). Redirects are never followed.
 */
export class HttpUpstream implements Upstream {
  readonly families: ReadonlySet<ProviderFamily>;
  private readonly secrets: string[];
  private readonly agents = {
    'http:': new http.Agent({ keepAlive: true }),
    'https:': new https.Agent({ keepAlive: true }),
  };

  constructor(
    private readonly providers: Partial<Record<ProviderFamily, ProviderEndpoint>>,
    private readonly options: HttpUpstreamOptions = {},
  ) {
    for (const [family, endpoint] of Object.entries(providers)) {
      let url: URL;
      try {
        url = new URL(endpoint.baseUrl);
      } catch {
        throw new TypeError(`the ${family} base URL is not a URL`);
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:') {
        throw new TypeError(`the ${family} base URL must be http or https`);
      }
    }
    this.families = new Set(Object.keys(providers) as ProviderFamily[]);
    this.secrets = Object.values(providers).map((endpoint) => endpoint.apiKey);
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }

  async send(request: CheckedRequest, signal: AbortSignal): Promise<UpstreamResponse> {
    const family = familyOf(request.api);
    const endpoint = this.providers[family];
    if (!endpoint) throw new Error(`no ${family} provider`);
    const base = endpoint.baseUrl.replace(/\/+$/, '');
    const path = family === 'openai' ? request.path.replace(/^\/v1/, '') : request.path;
    const url = new URL(`${base}${path}${request.query}`);
    const keyed: Record<string, string> =
      family === 'anthropic'
        ? {
            'x-api-key': endpoint.apiKey,
            'anthropic-version': request.anthropicVersion ?? DEFAULT_ANTHROPIC_VERSION,
            ...(request.anthropicBeta ? { 'anthropic-beta': request.anthropicBeta } : {}),
          }
        : { authorization: `Bearer ${endpoint.apiKey}` };
    const headers = {
      ...keyed,
      'content-type': 'application/json',
      'content-length': String(request.body.length),
      accept: request.stream ? 'text/event-stream' : 'application/json',
      'accept-encoding': 'identity',
    };
    const deadline = AbortSignal.any([signal, AbortSignal.timeout(this.options.timeoutMs ?? 600_000)]);
    const attempt = () =>
      new Promise<IncomingMessage>((resolve, reject) => {
        const client = url.protocol === 'https:' ? https : http;
        const outgoing = client.request(url, {
          method: 'POST',
          headers,
          agent: this.agents[url.protocol as 'http:' | 'https:'],
          signal: deadline,
        });
        outgoing.once('response', resolve);
        outgoing.once('error', (error: NodeJS.ErrnoException) =>
          reject(Object.assign(error, { reused: outgoing.reusedSocket })),
        );
        outgoing.end(request.body);
      });
    let response: IncomingMessage;
    try {
      response = await attempt();
    } catch (error) {
      // A kept-alive connection the server closed just as it was reused: the request never
      // reached it, so it is sent once more on a fresh one (Node's documented pattern).
      const { code, reused } = error as NodeJS.ErrnoException & { reused?: boolean };
      if (!reused || code !== 'ECONNRESET' || deadline.aborted) throw error;
      response = await attempt();
    }
    const passed: [string, string][] = [];
    for (const name of PASSED_HEADERS) {
      const value = response.headers[name];
      if (typeof value === 'string' && SAFE_HEADER_VALUE.test(value)) passed.push([name, value]);
    }
    const contentType = response.headers['content-type'];
    const status = response.statusCode ?? 502;
    const body = decoded(response);
    if (status >= 200 && status < 300) {
      return { status, ...(contentType ? { contentType } : {}), headers: passed, body };
    }
    // A provider's error may echo what it was sent (a key, in part or whole); it is read
    // whole, capped, and the keys taken out before the agent sees it. A redirect is an error
    // here too: its target never gets the key, and the agent never gets its Location.
    const text = redact((await readCapped(body, MAX_ERROR_BODY_BYTES)).toString('utf8'), this.secrets);
    body.destroy();
    return {
      status,
      ...(contentType ? { contentType } : {}),
      headers: passed,
      body: fromChunks([Buffer.from(text)]),
    };
  }
}
