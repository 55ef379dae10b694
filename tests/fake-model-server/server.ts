/**
 * A local stand-in for model APIs, for tests: speaks the Anthropic Messages API
 * (`POST /v1/messages`), OpenAI Chat Completions (`POST /v1/chat/completions`) and the
 * OpenAI Responses API (`POST /v1/responses`), each as JSON or, when the request says
 * `"stream": true`, as server-sent events the way the providers stream them (text deltas,
 * tool calls as `tool_use` blocks with `input_json_delta`, or `function_call` items with
 * argument deltas), on 127.0.0.1 with a random port. It serves scripted steps in our neutral
 * form (translated to whichever wire format was asked for), records every request
 * (headers and body) and can answer with an error status, a Retry-After, or slowly. That is
 * enough to drive a real agent CLI (Claude Code, Codex) through a multi-turn, tool-using
 * session that edits files and stops.
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

export type WireApi = 'anthropic' | 'openai' | 'openai-responses' | 'anthropic-count-tokens' | 'unknown';

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
  /** Model requests only (messages, chat completions and responses). */
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
  if (api === 'openai' || api === 'openai-responses')
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
  if (path === '/v1/responses') return 'openai-responses';
  return 'unknown';
}

/** One server-sent event, the way the providers write them. */
function sse(event: string | undefined, data: unknown): string {
  return `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`;
}

/** The input of a tool call as the wire carries it (a string input is sent verbatim). */
function argumentsOf(input: unknown): string {
  return typeof input === 'string' ? input : JSON.stringify(input);
}

/** An Anthropic Messages answer as its event stream: message_start, one block at a time, message_delta, message_stop. */
export function toAnthropicStream(reply: ScriptedReply, index: number): string {
  const usage = { input: reply.usage?.inputTokens ?? 100, output: reply.usage?.outputTokens ?? 20 };
  const events = [
    sse('message_start', {
      type: 'message_start',
      message: {
        id: `msg_fake_${index}`,
        type: 'message',
        role: 'assistant',
        model: reply.model ?? 'fake-claude',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: usage.input, output_tokens: 1 },
      },
    }),
  ];
  reply.content.forEach((block, i) => {
    if (block.type === 'text') {
      events.push(
        sse('content_block_start', {
          type: 'content_block_start',
          index: i,
          content_block: { type: 'text', text: '' },
        }),
        sse('content_block_delta', {
          type: 'content_block_delta',
          index: i,
          delta: { type: 'text_delta', text: block.text },
        }),
      );
    } else {
      events.push(
        sse('content_block_start', {
          type: 'content_block_start',
          index: i,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        }),
        sse('content_block_delta', {
          type: 'content_block_delta',
          index: i,
          delta: { type: 'input_json_delta', partial_json: argumentsOf(block.input) },
        }),
      );
    }
    events.push(sse('content_block_stop', { type: 'content_block_stop', index: i }));
  });
  events.push(
    sse('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: anthropicStopReason(defaultStopReason(reply)), stop_sequence: null },
      usage: { output_tokens: usage.output },
    }),
    sse('message_stop', { type: 'message_stop' }),
  );
  return events.join('');
}

/** The output items of a Responses API answer. */
function responseItems(reply: ScriptedReply, index: number): Record<string, unknown>[] {
  return reply.content.map((block, i) =>
    block.type === 'text'
      ? {
          type: 'message',
          id: `msg_fake_${index}_${i}`,
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: block.text, annotations: [] }],
        }
      : {
          type: 'function_call',
          id: `fc_fake_${index}_${i}`,
          call_id: block.id,
          name: block.name,
          arguments: argumentsOf(block.input),
          status: 'completed',
        },
  );
}

function responseObject(
  reply: ScriptedReply,
  index: number,
  status: string,
  output: unknown[],
): Record<string, unknown> {
  const input = reply.usage?.inputTokens ?? 100;
  const outputTokens = reply.usage?.outputTokens ?? 20;
  return {
    id: `resp_fake_${index}`,
    object: 'response',
    created_at: 1_700_000_000 + index,
    status,
    model: reply.model ?? 'fake-gpt',
    output,
    ...(status === 'completed'
      ? {
          usage: {
            input_tokens: input,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: outputTokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: input + outputTokens,
          },
        }
      : {}),
  };
}

/** A Responses API answer as JSON. */
export function toResponsesWire(reply: ScriptedReply, index: number): unknown {
  return responseObject(reply, index, 'completed', responseItems(reply, index));
}

/** A Responses API answer as its event stream: created, each item added, its deltas, done, completed. */
export function toResponsesStream(reply: ScriptedReply, index: number): string {
  let sequence = 0;
  const event = (type: string, data: Record<string, unknown>) =>
    sse(type, { type, sequence_number: sequence++, ...data });
  const items = responseItems(reply, index);
  const events = [
    event('response.created', { response: responseObject(reply, index, 'in_progress', []) }),
    event('response.in_progress', { response: responseObject(reply, index, 'in_progress', []) }),
  ];
  items.forEach((item, i) => {
    if (item.type === 'message') {
      const text = (item.content as { text: string }[])[0]!.text;
      events.push(
        event('response.output_item.added', {
          output_index: i,
          item: { ...item, status: 'in_progress', content: [] },
        }),
        event('response.content_part.added', {
          item_id: item.id,
          output_index: i,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [] },
        }),
        event('response.output_text.delta', {
          item_id: item.id,
          output_index: i,
          content_index: 0,
          delta: text,
        }),
        event('response.output_text.done', { item_id: item.id, output_index: i, content_index: 0, text }),
        event('response.content_part.done', {
          item_id: item.id,
          output_index: i,
          content_index: 0,
          part: { type: 'output_text', text, annotations: [] },
        }),
      );
    } else {
      events.push(
        event('response.output_item.added', {
          output_index: i,
          item: { ...item, status: 'in_progress', arguments: '' },
        }),
        event('response.function_call_arguments.delta', {
          item_id: item.id,
          output_index: i,
          delta: item.arguments,
        }),
        event('response.function_call_arguments.done', {
          item_id: item.id,
          output_index: i,
          arguments: item.arguments,
        }),
      );
    }
    events.push(event('response.output_item.done', { output_index: i, item }));
  });
  events.push(event('response.completed', { response: responseObject(reply, index, 'completed', items) }));
  return events.join('');
}

/** A chat completion as its chunk stream (usage in a last chunk when the request asked for it). */
export function toOpenAIStream(reply: ScriptedReply, index: number, includeUsage: boolean): string {
  const whole = toOpenAIWire(reply, index) as {
    id: string;
    created: number;
    model: string;
    choices: { message: { content: string | null; tool_calls?: unknown[] }; finish_reason: string }[];
    usage: unknown;
  };
  const choice = whole.choices[0]!;
  const chunk = (delta: unknown, finish: string | null) =>
    sse(undefined, {
      id: whole.id,
      object: 'chat.completion.chunk',
      created: whole.created,
      model: whole.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  const events = [chunk({ role: 'assistant', content: '' }, null)];
  if (choice.message.content) events.push(chunk({ content: choice.message.content }, null));
  (choice.message.tool_calls ?? []).forEach((call, i) =>
    events.push(chunk({ tool_calls: [{ index: i, ...(call as object) }] }, null)),
  );
  events.push(chunk({}, choice.finish_reason));
  if (includeUsage) {
    events.push(
      sse(undefined, {
        id: whole.id,
        object: 'chat.completion.chunk',
        created: whole.created,
        model: whole.model,
        choices: [],
        usage: whole.usage,
      }),
    );
  }
  events.push('data: [DONE]\n\n');
  return events.join('');
}

function sendEvents(response: ServerResponse, text: string): void {
  if (response.destroyed) return;
  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
  });
  // One write per event, as a provider streams them.
  for (const event of text.split(/(?<=\n\n)/)) if (event !== '') response.write(event);
  response.end();
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
      const asked = (typeof body === 'object' && body !== null ? body : {}) as {
        stream?: unknown;
        stream_options?: { include_usage?: unknown };
      };
      if (asked.stream === true) {
        if (api === 'anthropic') return sendEvents(response, toAnthropicStream(step.reply, index));
        if (api === 'openai-responses') return sendEvents(response, toResponsesStream(step.reply, index));
        return sendEvents(
          response,
          toOpenAIStream(step.reply, index, asked.stream_options?.include_usage === true),
        );
      }
      return sendJson(
        response,
        200,
        api === 'openai'
          ? toOpenAIWire(step.reply, index)
          : api === 'openai-responses'
            ? toResponsesWire(step.reply, index)
            : toAnthropicWire(step.reply, index),
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
      requests.filter(
        (request) =>
          request.api === 'anthropic' || request.api === 'openai' || request.api === 'openai-responses',
      ),
    remaining: () => script.length - next,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
