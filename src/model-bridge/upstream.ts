/**
 * Where a checked request goes: the configured provider over HTTPS (here), or a recording
 * (replay.ts). The provider gets the request body as the sandbox sent it and headers the
 * bridge builds from nothing: the real key, the API version, the content type. What comes
 * back to the sandbox is the status, the answer's bytes as they arrive, and a few headers a
 * client acts on (its content type, request id, retry-after), never the provider's others.
 */
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
  /** For tests: the fetch to use. */
  fetch?: typeof fetch;
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

async function readCapped(body: ReadableStream<Uint8Array> | null, cap: number): Promise<Buffer> {
  if (!body) return Buffer.alloc(0);
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

export class HttpUpstream implements Upstream {
  readonly families: ReadonlySet<ProviderFamily>;
  private readonly fetch: typeof fetch;
  private readonly secrets: string[];

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
    this.fetch = options.fetch ?? fetch;
    this.secrets = Object.values(providers).map((endpoint) => endpoint.apiKey);
  }

  async send(request: CheckedRequest, signal: AbortSignal): Promise<UpstreamResponse> {
    const family = familyOf(request.api);
    const endpoint = this.providers[family];
    if (!endpoint) throw new Error(`no ${family} provider`);
    const base = endpoint.baseUrl.replace(/\/+$/, '');
    const path = family === 'openai' ? request.path.replace(/^\/v1/, '') : request.path;
    const accept = request.stream ? 'text/event-stream' : 'application/json';
    const headers: Record<string, string> =
      family === 'anthropic'
        ? {
            'x-api-key': endpoint.apiKey,
            'anthropic-version': request.anthropicVersion ?? DEFAULT_ANTHROPIC_VERSION,
            ...(request.anthropicBeta ? { 'anthropic-beta': request.anthropicBeta } : {}),
          }
        : { authorization: `Bearer ${endpoint.apiKey}` };
    const response = await this.fetch(`${base}${path}${request.query}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept, 'accept-encoding': 'identity' },
      body: request.body,
      // A redirect would carry the key wherever the server points; none is followed.
      redirect: 'error',
      signal: AbortSignal.any([signal, AbortSignal.timeout(this.options.timeoutMs ?? 600_000)]),
    });
    const passed: [string, string][] = [];
    for (const name of PASSED_HEADERS) {
      const value = response.headers.get(name);
      if (value !== null && SAFE_HEADER_VALUE.test(value)) passed.push([name, value]);
    }
    const contentType = response.headers.get('content-type') ?? undefined;
    if (response.ok) {
      return {
        status: response.status,
        ...(contentType ? { contentType } : {}),
        headers: passed,
        body: response.body ?? fromChunks([]),
      };
    }
    // A provider's error may echo what it was sent (a key, in part or whole); it is read
    // whole, capped, and the keys taken out before the agent sees it.
    const text = redact(
      (await readCapped(response.body, MAX_ERROR_BODY_BYTES)).toString('utf8'),
      this.secrets,
    );
    return {
      status: response.status,
      ...(contentType ? { contentType } : {}),
      headers: passed,
      body: fromChunks([Buffer.from(text)]),
    };
  }
}
