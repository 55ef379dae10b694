/**
 * The real SDKs against the local fake model server (127.0.0.1 only): wire shapes,
 * credentials in headers, our retry policy being the only one, errors and aborts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Interrupted, ModelError } from '../../../src/errors.js';
import { until } from '../../helpers/poll.js';
import { createProvider } from '../../../src/llm/provider-registry.js';
import type { CompletionRequest, ModelProvider } from '../../../src/llm/types.js';
import {
  startFakeModelServer,
  type FakeModelServer,
  type ScriptStep,
} from '../../fake-model-server/server.js';

const FAST_RETRY = { baseDelayMs: 1, maxBackoffMs: 5 };
const READ_FILE_TOOL = {
  name: 'read_file',
  description: 'Read a file',
  inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
};

const request: CompletionRequest = {
  system: 'You fix tickets.',
  messages: [
    { role: 'user', content: [{ type: 'text', text: 'Fix the bug' }] },
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 't1', name: 'read_file', input: { path: 'a.ts' } }],
    },
    {
      role: 'user',
      content: [{ type: 'tool_result', toolUseId: 't1', content: 'const a = 1;', isError: false }],
    },
  ],
  tools: [READ_FILE_TOOL],
  maxTokens: 256,
};

const done: ScriptStep = { reply: { content: [{ type: 'text', text: 'done' }] } };

let server: FakeModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function providerFor(
  name: 'anthropic' | 'openai',
  script: ScriptStep[],
  extra: { env?: Record<string, string>; requestTimeoutMs?: number } = {},
): Promise<{ provider: ModelProvider; server: FakeModelServer }> {
  server = await startFakeModelServer(script);
  const env =
    extra.env ??
    (name === 'anthropic'
      ? { ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: server.anthropicBaseUrl }
      : { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: server.openaiBaseUrl });
  const provider = await createProvider({
    name,
    model: `${name}-test-model`,
    env,
    retry: FAST_RETRY,
    ...(extra.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: extra.requestTimeoutMs }),
  });
  return { provider, server };
}

describe('anthropic provider against the fake server', () => {
  it('sends the Messages API shape with the key, and maps the answer', async () => {
    const { provider, server } = await providerFor('anthropic', [
      {
        reply: { content: [{ type: 'tool_use', id: 'toolu_9', name: 'read_file', input: { path: 'b.ts' } }] },
      },
    ]);
    const completion = await provider.complete(request);
    expect(completion).toMatchObject({
      content: [{ type: 'tool_use', id: 'toolu_9', name: 'read_file', input: { path: 'b.ts' } }],
      stopReason: 'tool_use',
      usage: { inputTokens: 100, outputTokens: 20 },
    });
    const [sent] = server.modelRequests();
    expect(sent?.path).toBe('/v1/messages');
    expect(JSON.stringify(sent?.headers)).toContain('sk-ant-test');
    expect(sent?.body).toMatchObject({
      model: 'anthropic-test-model',
      system: 'You fix tickets.',
      max_tokens: 256,
      tools: [{ name: 'read_file', input_schema: { type: 'object' } }],
      messages: [
        { role: 'user' },
        { role: 'assistant' },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 't1', content: 'const a = 1;', is_error: false }],
        },
      ],
    });
  });

  it('honours Retry-After on a 429, then succeeds with exactly one more request', async () => {
    const { provider, server } = await providerFor('anthropic', [
      { error: { status: 429, retryAfter: '1' } },
      done,
    ]);
    const started = Date.now();
    await expect(provider.complete(request)).resolves.toMatchObject({ stopReason: 'end_turn' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(server.modelRequests()).toHaveLength(2);
  });

  it('gives up after 4 tries on repeated 500s: the SDK does not retry on its own', async () => {
    const { provider, server } = await providerFor(
      'anthropic',
      Array.from({ length: 10 }, () => ({ error: { status: 500 } })),
    );
    const error = await provider.complete(request).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).retryable).toBe(true);
    expect((error as ModelError).message).toMatch(/HTTP 500.*gave up after 4 attempts/);
    expect(server.modelRequests()).toHaveLength(4);
  });

  it('does not retry a 400 and marks it not retryable', async () => {
    const { provider, server } = await providerFor('anthropic', [
      { error: { status: 400, message: 'bad model' } },
      done,
    ]);
    const error = await provider.complete(request).catch((e: unknown) => e);
    expect(error).toMatchObject({ retryable: false });
    expect((error as ModelError).message).toMatch(/HTTP 400/);
    expect(server.modelRequests()).toHaveLength(1);
  });
});

describe('openai provider against the fake server', () => {
  it('sends Chat Completions with the key as a bearer token and max_tokens for a local server', async () => {
    const { provider, server } = await providerFor('openai', [done]);
    await expect(provider.complete(request)).resolves.toMatchObject({
      content: [{ type: 'text', text: 'done' }],
    });
    const [sent] = server.modelRequests();
    expect(sent?.path).toBe('/v1/chat/completions');
    expect(sent?.headers['authorization']).toBe('Bearer sk-test');
    expect(sent?.body).toMatchObject({
      model: 'openai-test-model',
      max_tokens: 256,
      tools: [{ type: 'function', function: { name: 'read_file' } }],
      messages: [
        { role: 'system', content: 'You fix tickets.' },
        { role: 'user', content: 'Fix the bug' },
        { role: 'assistant', tool_calls: [{ id: 't1', function: { name: 'read_file' } }] },
        { role: 'tool', tool_call_id: 't1', content: 'const a = 1;' },
      ],
    });
  });

  it('works without OPENAI_API_KEY for a local server, sending a placeholder key', async () => {
    const fake = await startFakeModelServer([done]);
    server = fake;
    const provider = await createProvider({
      name: 'openai',
      env: { OPENAI_BASE_URL: fake.openaiBaseUrl },
      retry: FAST_RETRY,
    });
    await provider.complete(request);
    expect(fake.modelRequests()[0]?.headers['authorization']).toBe('Bearer sandbox-harness-no-key');
  });

  it('recovers a tool call sent as JSON text through the real SDK', async () => {
    const { provider } = await providerFor('openai', [
      {
        reply: {
          content: [
            { type: 'text', text: '```json\n{"name": "read_file", "arguments": {"path": "c.ts"}}\n```' },
          ],
        },
      },
    ]);
    const completion = await provider.complete(request);
    expect(completion.stopReason).toBe('tool_use');
    expect(completion.content).toEqual([
      { type: 'tool_use', id: 'call_recovered_1', name: 'read_file', input: { path: 'c.ts' } },
    ]);
  });

  it('retries a 503 and a request that times out, then succeeds', async () => {
    const { provider, server } = await providerFor(
      'openai',
      [{ error: { status: 503 } }, { ...done, delayMs: 2_000 }, done],
      { requestTimeoutMs: 200 },
    );
    await expect(provider.complete(request)).resolves.toMatchObject({ stopReason: 'end_turn' });
    expect(server.modelRequests()).toHaveLength(3);
  });

  it('turns an abort during a slow answer into Interrupted, promptly', async () => {
    const { provider, server: fake } = await providerFor('openai', [{ ...done, delayMs: 10_000 }]);
    const controller = new AbortController();
    const pending = provider.complete({ ...request, signal: controller.signal });
    const outcome = pending.then(
      () => 'answered',
      (error: unknown) => error,
    );
    // Abort once the server holds the request, so the abort hits a slow answer in flight.
    await until(() => fake.modelRequests().length === 1, 'the request reached the server');
    const aborted = Date.now();
    controller.abort();
    expect(await outcome).toBeInstanceOf(Interrupted);
    expect(Date.now() - aborted).toBeLessThan(5_000);
  });

  it('reports an unreachable server as a retryable connection failure', async () => {
    const fake = await startFakeModelServer([]);
    const url = fake.openaiBaseUrl;
    await fake.close();
    const provider = await createProvider({
      name: 'openai',
      env: { OPENAI_BASE_URL: url },
      retry: FAST_RETRY,
    });
    const error = await provider.complete(request).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true });
    expect((error as ModelError).message).toMatch(/could not be reached/);
  });
});
