/**
 * What the bridge lets through, as pure functions of the relayed request and the run's
 * policy: a known endpoint, a size, a JSON body, an allowed model, no tool the provider would
 * run against the network, and a budget not yet spent. A refusal carries the HTTP status
 * and the API error the agent sees, and for a spent budget the stop the harness records.
 *
 * Nothing of the sandbox's request reaches the provider but its body and two validated
 * protocol headers (`anthropic-version`, `anthropic-beta`): the bridge builds every other
 * header itself, so no header can carry a key, a host variable or a smuggled credential.
 */
import type { LoopStop } from '../outcomes.js';

/** The wire APIs the bridge speaks. */
export type ApiKind = 'anthropic-messages' | 'anthropic-count-tokens' | 'openai-chat' | 'openai-responses';

/** The provider family an API belongs to (which key and base URL it uses). */
export type ProviderFamily = 'anthropic' | 'openai';

export function familyOf(api: ApiKind): ProviderFamily {
  return api.startsWith('anthropic') ? 'anthropic' : 'openai';
}

/** The one path each API is served at in the sandbox (the relay's root is the API's base URL). */
const ENDPOINTS: ReadonlyMap<string, ApiKind> = new Map([
  ['/v1/messages', 'anthropic-messages'],
  ['/v1/messages/count_tokens', 'anthropic-count-tokens'],
  ['/v1/chat/completions', 'openai-chat'],
  ['/v1/responses', 'openai-responses'],
]);

/** A request as the relay framed it: the sandbox's word. */
export interface RelayedRequest {
  method: string;
  /** Path and query as the client sent them. */
  path: string;
  headers: readonly (readonly [string, string])[];
  body: Buffer;
}

/** A request the bridge will send, with what it learnt from checking it. */
export interface CheckedRequest {
  api: ApiKind;
  /** The canonical path (`/v1/messages`), never the sandbox's spelling. */
  path: string;
  /** Query string to forward (`?beta=true` or empty): only values the bridge knows. */
  query: string;
  model: string;
  stream: boolean;
  /** The body exactly as the sandbox sent it (checked, not rewritten). */
  body: Buffer;
  json: Record<string, unknown>;
  /** Validated protocol headers, for Anthropic. */
  anthropicVersion?: string;
  anthropicBeta?: string;
}

export type RefusalKind =
  | 'unknown-endpoint'
  | 'too-large'
  | 'encoded-body'
  | 'bad-json'
  | 'model-not-allowed'
  | 'network-tool'
  | 'no-provider'
  | 'budget-spent';

export interface Refusal {
  kind: RefusalKind;
  status: number;
  /** The API error type the agent sees. */
  errorType: string;
  message: string;
  /** For a spent budget: the stop the harness records for the agent's run. */
  stop?: Extract<LoopStop, 'max-turns' | 'token-budget' | 'budget'>;
}

export interface BridgePolicy {
  /** Model names the run allows, exactly as the agent must send them. */
  allowedModels: readonly string[];
  maxRequestBytes: number;
  /** Families with a configured provider (a request for another is refused). */
  families: ReadonlySet<ProviderFamily>;
}

export type CheckResult = { ok: true; request: CheckedRequest } | { ok: false; refusal: Refusal };

const refuse = (kind: RefusalKind, status: number, errorType: string, message: string): CheckResult => ({
  ok: false,
  refusal: { kind, status, errorType, message: `sandbox-harness: ${message}` },
});

/** The API a method and path name, or undefined. */
export function endpointOf(method: string, path: string): ApiKind | undefined {
  if (method !== 'POST') return undefined;
  const [bare] = path.split('?', 1);
  return ENDPOINTS.get(bare ?? '');
}

function header(request: RelayedRequest, name: string): string | undefined {
  for (const [key, value] of request.headers) if (key.toLowerCase() === name) return value;
  return undefined;
}

/** `anthropic-version` is a date; anything else is dropped (the bridge sends its default). */
const ANTHROPIC_VERSION = /^\d{4}-\d{2}-\d{2}$/;
/** `anthropic-beta` is a comma list of feature names; a malformed one is dropped whole. */
const ANTHROPIC_BETA = /^[a-z0-9][a-z0-9-]{0,79}(,\s*[a-z0-9][a-z0-9-]{0,79}){0,31}$/;

/**
 * Tool types a provider runs itself. Every one of them reaches the network or the
 * provider's own compute on the agent's behalf (a search, a fetch of any URL, an MCP server
 * at any address, a code container), which the run's "no network" rules out; the agent
 * sees why and goes on without. A client-side tool (one the agent runs) is plain data.
 */
const OPENAI_CLIENT_TOOLS = new Set([
  'function',
  'custom',
  'namespace',
  'local_shell',
  'shell',
  'apply_patch',
]);
/** Anthropic tools without a type are the client's own; typed ones the agent runs have these prefixes. */
const ANTHROPIC_CLIENT_TOOL = /^(custom|bash_\d+|text_editor_\d+|computer_\d+|memory_\d+)$/;
/** Top-level fields that have the provider act outside the call (MCP servers, containers, searches, background work). */
const NETWORK_FIELDS: Record<ProviderFamily, readonly string[]> = {
  anthropic: ['mcp_servers', 'container'],
  openai: ['web_search_options', 'background'],
};

function networkTool(api: ApiKind, json: Record<string, unknown>): string | undefined {
  const family = familyOf(api);
  for (const field of NETWORK_FIELDS[family]) {
    if (json[field] !== undefined && json[field] !== null && json[field] !== false)
      return `the field "${field}"`;
  }
  const tools = json.tools;
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) return 'a "tools" field that is not a list';
  for (const tool of tools as unknown[]) {
    if (typeof tool !== 'object' || tool === null) return 'a tool that is not an object';
    const type = (tool as { type?: unknown }).type;
    if (family === 'anthropic') {
      if (type === undefined) continue;
      if (typeof type === 'string' && ANTHROPIC_CLIENT_TOOL.test(type)) continue;
    } else if (typeof type === 'string' && OPENAI_CLIENT_TOOLS.has(type)) {
      continue;
    }
    return `the hosted tool ${JSON.stringify(String(type)).slice(0, 80)}`;
  }
  return undefined;
}

/** Checks one relayed request against the policy (budgets are the bridge's, asked separately). */
export function checkRequest(request: RelayedRequest, policy: BridgePolicy): CheckResult {
  const api = endpointOf(request.method, request.path);
  if (!api) {
    return refuse(
      'unknown-endpoint',
      404,
      'not_found_error',
      `${request.method.slice(0, 16)} ${request.path.slice(0, 200)} is not a model API this bridge serves (POST /v1/messages, /v1/messages/count_tokens, /v1/chat/completions, /v1/responses)`,
    );
  }
  if (request.body.length > policy.maxRequestBytes) {
    return refuse(
      'too-large',
      413,
      'request_too_large',
      `the request is ${request.body.length} bytes, over the bridge's limit of ${policy.maxRequestBytes}`,
    );
  }
  const encoding = header(request, 'content-encoding');
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    return refuse('encoded-body', 415, 'invalid_request_error', 'compressed request bodies are not accepted');
  }
  let json: unknown;
  try {
    json = JSON.parse(request.body.toString('utf8'));
  } catch {
    return refuse('bad-json', 400, 'invalid_request_error', 'the request body is not JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return refuse('bad-json', 400, 'invalid_request_error', 'the request body is not a JSON object');
  }
  const body = json as Record<string, unknown>;
  const model = body.model;
  if (typeof model !== 'string' || !policy.allowedModels.includes(model)) {
    const named = typeof model === 'string' ? JSON.stringify(model.slice(0, 200)) : 'no model';
    return refuse(
      'model-not-allowed',
      400,
      'invalid_request_error',
      `${named} is not a model this run allows (allowed: ${policy.allowedModels.join(', ')})`,
    );
  }
  const reaching = networkTool(api, body);
  if (reaching) {
    return refuse(
      'network-tool',
      400,
      'invalid_request_error',
      `${reaching} would have the provider act for the agent outside the sandbox (a hosted search, fetch, MCP server or container); this run allows none, so the request is refused`,
    );
  }
  const family = familyOf(api);
  if (!policy.families.has(family)) {
    return refuse(
      'no-provider',
      400,
      'invalid_request_error',
      `this run has no ${family} provider for ${api}`,
    );
  }
  const checked: CheckedRequest = {
    api,
    path: request.path.split('?', 1)[0]!,
    query: api === 'anthropic-messages' && /[?&]beta=true(&|$)/.test(request.path) ? '?beta=true' : '',
    model,
    stream: body.stream === true,
    body: request.body,
    json: body,
  };
  if (family === 'anthropic') {
    const version = header(request, 'anthropic-version');
    if (version !== undefined && ANTHROPIC_VERSION.test(version)) checked.anthropicVersion = version;
    const beta = header(request, 'anthropic-beta');
    if (beta !== undefined && ANTHROPIC_BETA.test(beta)) checked.anthropicBeta = beta;
  }
  return { ok: true, request: checked };
}

/** The refusal a spent budget gives, in the API's words. */
export function budgetRefusal(stop: NonNullable<Refusal['stop']>): Refusal {
  const what =
    stop === 'budget'
      ? "the run's cost limit is reached"
      : stop === 'token-budget'
        ? "the run's token budget is spent"
        : "the run's model calls are used up";
  return {
    kind: 'budget-spent',
    status: 400,
    errorType: 'invalid_request_error',
    message: `sandbox-harness: ${what}; no further model call is allowed. Stop here.`,
    stop,
  };
}

/** The body of an error the bridge answers itself: readable by Anthropic and OpenAI clients alike. */
export function errorBody(errorType: string, message: string): Buffer {
  return Buffer.from(JSON.stringify({ type: 'error', error: { type: errorType, message, code: errorType } }));
}
