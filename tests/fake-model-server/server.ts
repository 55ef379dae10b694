/**
 * A local stand-in for model APIs, for tests: speaks the Anthropic Messages API
 * (`POST /v1/messages`) and OpenAI Chat Completions (`POST /v1/chat/completions`), both
 * non-streaming, on 127.0.0.1 with a random port. It serves scripted steps in our neutral
 * form (translated to whichever wire format was asked for), records every request
 * (headers and body) and can answer with an error status, a Retry-After, or slowly.
 *
 * Point the Anthropic SDK at `anthropicBaseUrl` and the OpenAI SDK at `openaiBaseUrl`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AssistantContent, StopReason, Usage } from '../../src/llm/types.js';

export interface ScriptedReply {
  content: AssistantContent[];
  /** Default: `tool_use` when the content has a tool call, else `end_turn`. */
  stopReason?: StopReason;
  usage?: Usage;
  model?: string;
}

interface StepTiming {
  /** Wait this long before answering (for timeouts and aborts). */
  delayMs?: number;
}

export type ScriptStep =
  | ({ reply: ScriptedReply } & StepTiming)
  | ({ error: { status: number; retryAfter?: string; message?: string } } & StepTiming)
  /** Sent as the 200 body exactly as given, whatever the API. */
  | ({ raw: unknown } & StepTiming)
  /** Sent as the 200 body's text exactly as given (JSON that JSON.stringify cannot make, such as 1e400). */
  | ({ text: string } & StepTiming);

export type WireApi = 'anthropic' | 'openai' | 'anthropic-count-tokens' | 'unknown';

export interface RecordedRequest {
  api: WireApi;
  method: string;
  path: string;
  headers: Record<string, string>;
  /** Parsed JSON, or the raw text when the body was not JSON. */
  body: unknown;
  rawBody: string;
}

export interface FakeModelServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  anthropicBaseUrl: string;
  openaiBaseUrl: string;
  /** Every request received, in order (count-tokens requests included, marked by `api`). */
  requests: RecordedRequest[];
  /** Model requests only (messages and chat completions). */
  modelRequests(): RecordedRequest[];
  /** Steps not served yet. */
  remaining(): number;
  close(): Promise<void>;
}

function defaultStopReason(reply: ScriptedReply): StopReason {
  return (
    reply.stopReason ?? (reply.content.some((block) => block.type === 'tool_use') ? 'tool_use' : 'end_turn')
  );
}

function anthropicStopReason(reason: StopReason): string {
  return reason === 'other' ? 'refusal' : reason;
}

function openaiFinishReason(reason: StopReason): string {
  switch (reason) {
    case 'tool_use':
      return 'tool_calls';
    case 'end_turn':
      return 'stop';
    case 'max_tokens':
      return 'length';
    case 'other':
      return 'content_filter';
  }
}

export function toAnthropicWire(reply: ScriptedReply, index: number): unknown {
  return {
    id: `msg_fake_${index}`,
    type: 'message',
    role: 'assistant',
    model: reply.model ?? 'fake-claude',
    content: reply.content.map((block) =>
      block.type === 'text'
        ? { type: 'text', text: block.text }
        : { type: 'tool_use', id: block.id, name: block.name, input: block.input },
    ),
    stop_reason: anthropicStopReason(defaultStopReason(reply)),
    stop_sequence: null,
    usage: { input_tokens: reply.usage?.inputTokens ?? 100, output_tokens: reply.usage?.outputTokens ?? 20 },
  };
}

export function toOpenAIWire(reply: ScriptedReply, index: number): unknown {
  const text = reply.content
    .filter((block) => block.type === 'text')
    .map((block) => block.text)
    .join('\n');
  const toolCalls = reply.content
    .filter((block) => block.type === 'tool_use')
    .map((block) => ({
      id: block.id,
      type: 'function',
      function: {
        name: block.name,
        // A string input is sent verbatim, to imitate a model emitting broken JSON.
        arguments: typeof block.input === 'string' ? block.input : JSON.stringify(block.input),
      },
    }));
  const inputTokens = reply.usage?.inputTokens ?? 100;
  const outputTokens = reply.usage?.outputTokens ?? 20;
  return {
    id: `chatcmpl-fake-${index}`,
    object: 'chat.completion',
    created: 1_700_000_000 + index,
    model: reply.model ?? 'fake-gpt',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text === '' ? null : text,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: openaiFinishReason(defaultStopReason(reply)),
        logprobs: null,
      },
    ],
    usage: {
      prompt_tokens: inputTokens,
      completion_tokens: outputTokens,
      total_tokens: inputTokens + outputTokens,
    },
  };
}

/**
 * A step answering the way Ollama's OpenAI-compatible endpoint does when a small model writes
 * its tool call as text: the call is in `content`, there are no `tool_calls`, and
 * `finish_reason` is "stop".
 */
export function ollamaTextReply(content: string, model = 'llama3.2:3b'): ScriptStep {
  return {
    raw: {
      id: 'chatcmpl-523',
      object: 'chat.completion',
      created: 1_741_570_042,
      model,
      system_fingerprint: 'fp_ollama',
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1200, completion_tokens: 31, total_tokens: 1231 },
    },
  };
}

function errorBody(api: WireApi, status: number, message: string): unknown {
  if (api === 'openai')
    return { error: { message, type: status === 429 ? 'rate_limit_exceeded' : 'server_error', code: null } };
  const type =
    status === 429
      ? 'rate_limit_error'
      : status === 529
        ? 'overloaded_error'
        : status >= 500
          ? 'api_error'
          : 'invalid_request_error';
  return { type: 'error', error: { type, message } };
}

function apiFor(method: string, path: string): WireApi {
  if (method !== 'POST') return 'unknown';
  if (path === '/v1/messages') return 'anthropic';
  if (path === '/v1/messages/count_tokens') return 'anthropic-count-tokens';
  if (path === '/v1/chat/completions') return 'openai';
  return 'unknown';
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (response.destroyed) return;
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

export async function startFakeModelServer(script: readonly ScriptStep[]): Promise<FakeModelServer> {
  const requests: RecordedRequest[] = [];
  let next = 0;

  const server = createServer((request, response) => {
    void (async () => {
      const rawBody = await readBody(request);
      const path = (request.url ?? '/').split('?')[0] ?? '/';
      const method = request.method ?? 'GET';
      const api = apiFor(method, path);
      let body: unknown = rawBody;
      try {
        body = rawBody === '' ? undefined : JSON.parse(rawBody);
      } catch {
        // Kept as text: a test may want to see exactly what was sent.
      }
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(request.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      requests.push({ api, method, path, headers, body, rawBody });

      if (api === 'unknown')
        return sendJson(response, 404, {
          error: { message: `fake model server: no route ${method} ${path}` },
        });
      if (api === 'anthropic-count-tokens')
        return sendJson(response, 200, { input_tokens: Math.ceil(rawBody.length / 4) });

      const index = next;
      const step = script[index];
      if (!step) {
        return sendJson(
          response,
          400,
          errorBody(api, 400, `fake model server: script exhausted after ${script.length} steps`),
        );
      }
      next++;
      if (step.delayMs !== undefined && step.delayMs > 0) {
        const delay = step.delayMs;
        const cancelled = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), delay);
          response.on('close', () => {
            clearTimeout(timer);
            resolve(true);
          });
        });
        if (cancelled) return;
      }
      if ('error' in step) {
        const { status, retryAfter, message } = step.error;
        return sendJson(
          response,
          status,
          errorBody(api, status, message ?? `fake model server: scripted HTTP ${status}`),
          retryAfter === undefined ? {} : { 'retry-after': retryAfter },
        );
      }
      if ('raw' in step) return sendJson(response, 200, step.raw);
      if ('text' in step) {
        response.writeHead(200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(step.text),
        });
        return void response.end(step.text);
      }
      return sendJson(
        response,
        200,
        api === 'openai' ? toOpenAIWire(step.reply, index) : toAnthropicWire(step.reply, index),
      );
    })().catch((error: unknown) => {
      sendJson(response, 500, { error: { message: `fake model server crashed: ${String(error)}` } });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    anthropicBaseUrl: url,
    openaiBaseUrl: `${url}/v1`,
    requests,
    modelRequests: () =>
      requests.filter((request) => request.api === 'anthropic' || request.api === 'openai'),
    remaining: () => script.length - next,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
