/**
 * The whole bridge without a container: the real relay script runs as a child process with
 * an empty environment (the "sandbox"), the client speaks HTTP to it on loopback as an agent
 * CLI would, and the bridge forwards to the fake model server with the real key. What the
 * relay's stdin receives is everything the sandbox would ever see from the host.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { CostMeter } from '../../../src/llm/cost.js';
import { ModelBridge, TokenBudget, type ModelBridgeOptions } from '../../../src/model-bridge/bridge.js';
import type { CheckedRequest } from '../../../src/model-bridge/checks.js';
import { ReplayUpstream } from '../../../src/model-bridge/bridge-replay.js';
import { startRelay, type BridgeConnection } from '../../../src/model-bridge/session.js';
import { FileTranscript, MemoryTranscript, readTranscript } from '../../../src/model-bridge/transcript.js';
import { HttpUpstream, type Upstream, type UpstreamResponse } from '../../../src/model-bridge/upstream.js';
import type { SandboxProcess } from '../../../src/sandbox/types.js';
import {
  startFakeModelServer,
  toAnthropicStream,
  toResponsesStream,
  type FakeModelServer,
  type ScriptedReply,
  type ScriptStep,
} from '../../fake-model-server/server.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';
import { localSpawn } from '../../helpers/local-process.js';

const REAL_ANTHROPIC_KEY = 'sk-ant-REAL-4f8a0c2e9b7d6a5f3e1c0b9a8d7e6f5a';
const REAL_OPENAI_KEY = 'sk-proj-REAL-9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b';
const PLACEHOLDER = 'sandbox-harness-placeholder';

const toolTurn: ScriptedReply = {
  content: [
    { type: 'text', text: 'Reading the file.' },
    { type: 'tool_use', id: 'toolu_1', name: 'Read', input: { file_path: '/workspace/src/limit.js' } },
  ],
  usage: { inputTokens: 1234, outputTokens: 56 },
  model: 'claude-test',
};
const doneTurn: ScriptedReply = { content: [{ type: 'text', text: 'Done.' }], model: 'claude-test' };

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Rig {
  bridge: ModelBridge;
  connection: BridgeConnection;
  transcript: MemoryTranscript;
  server: FakeModelServer | undefined;
  /** Every byte written to the relay's stdin: all the sandbox ever gets from the host. */
  received: () => Buffer;
  relayProcess: () => SandboxProcess;
}

async function rig(
  options: Partial<ModelBridgeOptions> & { script?: ScriptStep[]; limits?: { maxConcurrent?: number } } = {},
): Promise<Rig> {
  let server: FakeModelServer | undefined;
  let upstream = options.upstream;
  if (!upstream) {
    server = await startFakeModelServer(options.script ?? []);
    const started = server;
    cleanups.push(() => started.close().catch(() => undefined));
    upstream = new HttpUpstream({
      anthropic: { baseUrl: server.anthropicBaseUrl, apiKey: REAL_ANTHROPIC_KEY },
      openai: { baseUrl: server.openaiBaseUrl, apiKey: REAL_OPENAI_KEY },
    });
  }
  const transcript = new MemoryTranscript();
  const bridge = new ModelBridge({
    allowedModels: ['claude-test', 'gpt-test'],
    transcript,
    ...options,
    upstream,
  });
  const sandbox = new MemorySandbox({});
  const received: Buffer[] = [];
  let relay: SandboxProcess | undefined;
  sandbox.onSpawn = (argv, io) => {
    const inner = localSpawn(argv, io);
    relay = inner;
    const tee = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        received.push(chunk);
        inner.input.write(chunk, () => callback());
      },
    });
    return { ...inner, input: tee };
  };
  const connection = await startRelay(sandbox, bridge, options.limits ? { limits: options.limits } : {});
  cleanups.push(async () => {
    connection.close();
    await relay?.exited;
  });
  return {
    bridge,
    connection,
    transcript,
    server,
    received: () => Buffer.concat(received),
    relayProcess: () => relay!,
  };
}

/**
 * A provider that answers every call 200 with what `body` yields for it (given the call's
 * signal); `sending` runs first, for tests that count or hold calls.
 */
function upstreamOf(
  body: (signal: AbortSignal) => AsyncGenerator<Buffer>,
  options: { contentType?: string; sending?: (signal: AbortSignal) => Promise<void> | void } = {},
): Upstream {
  return {
    families: new Set(['anthropic']),
    async send(_request: CheckedRequest, signal: AbortSignal): Promise<UpstreamResponse> {
      await options.sending?.(signal);
      return {
        status: 200,
        contentType: options.contentType ?? 'text/event-stream',
        headers: [],
        body: body(signal),
      };
    },
  };
}

function post(
  connection: BridgeConnection,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${connection.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

const messages = (extra: object = {}) => ({
  model: 'claude-test',
  max_tokens: 100,
  messages: [{ role: 'user', content: 'Fix the limit.' }],
  ...extra,
});

describe('the model bridge, relay to provider and back', () => {
  it('streams a Messages call through, event for event, with the real key added and usage metered', async () => {
    const r = await rig({ script: [{ reply: toolTurn }] });
    const response = await post(r.connection, '/v1/messages?beta=true', messages({ stream: true }), {
      'x-api-key': PLACEHOLDER,
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219',
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await response.text()).toBe(toAnthropicStream(toolTurn, 0));
    const seen = r.server!.modelRequests()[0]!;
    expect(seen.path).toBe('/v1/messages');
    expect(seen.headers['x-api-key']).toBe(REAL_ANTHROPIC_KEY);
    expect(seen.headers['anthropic-beta']).toBe('claude-code-20250219');
    expect(r.transcript.exchanges).toMatchObject([
      {
        seq: 1,
        api: 'anthropic-messages',
        model: 'claude-test',
        stream: true,
        outcome: 'answered',
        usage: { inputTokens: 1234, outputTokens: 56, source: 'reported' },
        response: { status: 200, text: toAnthropicStream(toolTurn, 0) },
        request: { body: messages({ stream: true }) },
      },
    ]);
  });

  it('streams a Responses call and answers a chat completion as JSON, over one kept-alive connection', async () => {
    const reply: ScriptedReply = {
      content: [{ type: 'tool_use', id: 'call_1', name: 'exec_command', input: { cmd: 'ls' } }],
      model: 'gpt-test',
    };
    const r = await rig({ script: [{ reply }, { reply: doneTurn }] });
    const streamed = await post(r.connection, '/v1/responses', {
      model: 'gpt-test',
      stream: true,
      input: 'hi',
    });
    expect(await streamed.text()).toBe(toResponsesStream(reply, 0));
    const json = await post(r.connection, '/v1/chat/completions', { model: 'gpt-test', messages: [] });
    expect(
      ((await json.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
    ).toBe('Done.');
    const seen = r.server!.modelRequests();
    expect(seen.map((q) => [q.path, q.headers.authorization])).toEqual([
      ['/v1/responses', `Bearer ${REAL_OPENAI_KEY}`],
      ['/v1/chat/completions', `Bearer ${REAL_OPENAI_KEY}`],
    ]);
  });

  it('never forwards a header of the sandbox, and never lets the real key or a host variable into the sandbox', async () => {
    const canary = `CANARY-${Date.now()}-host-secret`;
    process.env.SANDBOX_HARNESS_TEST_CANARY = canary;
    cleanups.push(() => void delete process.env.SANDBOX_HARNESS_TEST_CANARY);
    const r = await rig({
      script: [
        { reply: doneTurn },
        // A provider that echoes the key it was sent (some do, in part or whole).
        { error: { status: 401, message: `invalid x-api-key ${REAL_ANTHROPIC_KEY}` } },
      ],
    });
    const smuggling = {
      'x-api-key': '${ANTHROPIC_API_KEY}',
      authorization: 'Bearer $ANTHROPIC_API_KEY',
      'x-goog-api-key': 'ANTHROPIC_API_KEY',
      cookie: 'session=ANTHROPIC_API_KEY',
      'x-forwarded-for': '169.254.169.254',
      'proxy-authorization': 'Basic ANTHROPIC_API_KEY',
      'x-sandbox-harness-canary': 'SANDBOX_HARNESS_TEST_CANARY',
    };
    const first = await post(r.connection, '/v1/messages', messages(), smuggling);
    expect(first.status).toBe(200);
    const second = await post(r.connection, '/v1/messages', messages(), smuggling);
    expect(second.status).toBe(401);
    expect(await second.text()).toContain('invalid x-api-key [redacted]');
    for (const seen of r.server!.modelRequests()) {
      // Exactly the headers the bridge builds, and the real key.
      expect(Object.keys(seen.headers).sort()).toEqual([
        'accept',
        'accept-encoding',
        'anthropic-version',
        'connection',
        'content-length',
        'content-type',
        'host',
        'x-api-key',
      ]);
      expect(seen.headers['x-api-key']).toBe(REAL_ANTHROPIC_KEY);
      expect(seen.headers['anthropic-version']).toBe('2023-06-01');
      expect(JSON.stringify(seen.headers)).not.toMatch(/ANTHROPIC_API_KEY|169\.254|CANARY/);
    }
    const sandboxSaw = r.received().toString('latin1');
    expect(sandboxSaw).toContain('invalid x-api-key');
    expect(sandboxSaw).not.toContain(REAL_ANTHROPIC_KEY);
    expect(sandboxSaw).not.toContain(REAL_OPENAI_KEY);
    expect(sandboxSaw).not.toContain(canary);
    expect(JSON.stringify(r.transcript.exchanges)).not.toContain(REAL_ANTHROPIC_KEY);
  });

  it('refuses a model the run does not allow, before the provider hears of it', async () => {
    const r = await rig({ script: [{ reply: doneTurn }] });
    const response = await post(r.connection, '/v1/messages', messages({ model: 'claude-opus-9' }));
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: expect.stringMatching(/"claude-opus-9" is not a model this run allows/),
      },
    });
    expect(r.server!.requests).toEqual([]);
    expect(r.transcript.exchanges).toMatchObject([
      { outcome: 'refused', refusal: { kind: 'model-not-allowed' } },
    ]);
  });

  it('stops at the token budget: the agent reads why, the harness reads token-budget', async () => {
    const r = await rig({
      script: [{ reply: toolTurn }, { reply: doneTurn }],
      budget: new TokenBudget({ maxTokens: 1000 }),
    });
    expect((await post(r.connection, '/v1/messages', messages())).status).toBe(200);
    const refused = await post(r.connection, '/v1/messages', messages());
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("the run's token budget is spent");
    expect(r.bridge.stopReason).toBe('token-budget');
    expect(r.server!.modelRequests()).toHaveLength(1);
  });

  it('stops at the cost limit (budget), priced by the run table; a limit needs every allowed model priced', async () => {
    const costs = new CostMeter({ 'claude-test': { input: 1000, output: 1000 } }, 1);
    const r = await rig({
      script: [{ reply: toolTurn }, { reply: doneTurn }],
      costs,
      allowedModels: ['claude-test'],
    });
    await (await post(r.connection, '/v1/messages', messages())).text();
    expect(r.transcript.exchanges[0]!.costUsd).toBeCloseTo(1.29, 5);
    const refused = await post(r.connection, '/v1/messages', messages());
    expect(await refused.text()).toContain("the run's cost limit is reached");
    expect(r.bridge.stopReason).toBe('budget');
    expect(
      () =>
        new ModelBridge({
          upstream: new ReplayUpstream([]),
          allowedModels: ['claude-test', 'unpriced-model'],
          costs: new CostMeter({ 'claude-test': { input: 1, output: 1 } }, 5),
        }),
    ).toThrow(ConfigError);
  });

  it('passes each event on as it arrives, not when the answer ends', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const upstream = upstreamOf(async function* () {
      yield Buffer.from('event: ping\ndata: {"type":"ping"}\n\n');
      await held;
      yield Buffer.from('event: message_stop\ndata: {"type":"message_stop"}\n\n');
    });
    const r = await rig({ upstream });
    const response = await post(r.connection, '/v1/messages', messages({ stream: true }));
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toContain('"ping"');
    release();
    let rest = '';
    for (let next = await reader.read(); !next.done; next = await reader.read())
      rest += Buffer.from(next.value).toString();
    expect(rest).toContain('message_stop');
  });

  it('an agent that leaves midway cancels the provider call and the record says so', async () => {
    let upstreamSignal: AbortSignal | undefined;
    const upstream = upstreamOf(
      async function* (signal) {
        yield Buffer.from('event: ping\ndata: {}\n\n');
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
      },
      { sending: (signal) => void (upstreamSignal = signal) },
    );
    const r = await rig({ upstream });
    const controller = new AbortController();
    const response = await post(
      r.connection,
      '/v1/messages',
      messages({ stream: true }),
      {},
      controller.signal,
    );
    await response.body!.getReader().read();
    controller.abort();
    await expect.poll(() => upstreamSignal?.aborted).toBe(true);
    await expect.poll(() => r.transcript.exchanges[0]?.outcome).toBe('cancelled');
    expect(r.connection.session.closedReason).toBeUndefined();
  });

  it('the relay holds requests past the concurrency cap until a slot frees; all are answered', async () => {
    let inFlight = 0;
    let most = 0;
    const upstream = upstreamOf(
      async function* () {
        inFlight -= 1;
        yield Buffer.from('{"usage":{"input_tokens":1,"output_tokens":1}}');
      },
      {
        contentType: 'application/json',
        sending: async () => {
          inFlight += 1;
          most = Math.max(most, inFlight);
          await new Promise((resolve) => setTimeout(resolve, 30));
        },
      },
    );
    const r = await rig({ upstream, limits: { maxConcurrent: 2 } });
    const answers = await Promise.all(
      Array.from({ length: 7 }, () => post(r.connection, '/v1/messages', messages())),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(7).fill(200));
    expect(most).toBeLessThanOrEqual(2);
    expect(r.connection.session.closedReason).toBeUndefined();
  });

  it('the relay answers a request over the size cap itself (413); the host never holds it', async () => {
    const r = await rig({ script: [{ reply: doneTurn }], maxRequestBytes: 2048 });
    const response = await post(r.connection, '/v1/messages', messages({ pad: 'x'.repeat(5000) }));
    expect(response.status).toBe(413);
    expect(r.transcript.exchanges).toEqual([]);
    expect(r.server!.requests).toEqual([]);
  });

  it('answers an unknown path with 404 locally, and a provider that is down with a 502 that names nothing of the host', async () => {
    const r = await rig({ script: [] });
    const lost = await fetch(`${r.connection.baseUrl}/api/hello`, { method: 'HEAD' });
    expect(lost.status).toBe(404);
    await r.server!.close();
    const down = await post(r.connection, '/v1/messages', messages());
    expect(down.status).toBe(502);
    const text = await down.text();
    expect(text).toContain('the model provider could not be reached');
    expect(text).not.toContain('127.0.0.1');
    expect(r.bridge.problems[0]).toMatch(/model call 2 \(anthropic-messages claude-test\)/);
  });

  it('a broken relay closes its bridge: the process is killed, the host goes on', async () => {
    const r = await rig({ script: [{ reply: doneTurn }] });
    r.connection.session.receive(Buffer.from('not a frame, but plenty of bytes'));
    expect(r.connection.session.closedReason).toMatch(/^the relay sent a bad frame/);
    expect(await r.relayProcess().exited).not.toBe(0);
    expect(r.bridge.problems.join('\n')).toMatch(/model relay of sandbox .*: the relay sent a bad frame/);
  });
});

describe('a recorded bridge session replays offline', () => {
  it('answers the same calls byte for byte with no provider, and refuses a call that departs from it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bridge-replay-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = new FileTranscript(join(dir, 'bridge.jsonl'));
    const recording = await rig({ script: [{ reply: toolTurn }, { reply: doneTurn }], transcript: file });
    const calls = [messages({ stream: true }), messages()];
    const live: string[] = [];
    for (const call of calls)
      live.push(await (await post(recording.connection, '/v1/messages', call)).text());
    expect((await post(recording.connection, '/v1/messages', messages({ model: 'nope' }))).status).toBe(400);
    await file.close();
    await recording.server!.close();

    const exchanges = await readTranscript(file.path);
    expect(exchanges.map((e) => e.outcome)).toEqual(['answered', 'answered', 'refused']);
    const replay = new ReplayUpstream(exchanges);
    const offline = await rig({ upstream: replay });
    const replayed: string[] = [];
    for (const call of calls)
      replayed.push(await (await post(offline.connection, '/v1/messages', call)).text());
    expect(replayed).toEqual(live);
    expect(replay.remaining()).toBe(0);
    expect(offline.transcript.exchanges.map((e) => e.usage)).toEqual(
      exchanges.slice(0, 2).map((e) => e.usage),
    );

    const extra = await post(offline.connection, '/v1/messages', messages());
    expect(extra.status).toBe(502);
    expect(await extra.text()).toContain(
      'replay mismatch: model call 3: the recording holds only 2 answered call(s)',
    );
    expect(offline.bridge.problems.join('\n')).toContain('replay mismatch');
  });

  it('a call for another model than the one recorded in its place is a mismatch, not an answer', async () => {
    const recorded = new ReplayUpstream([
      {
        seq: 1,
        startedAt: new Date(0).toISOString(),
        durationMs: 1,
        method: 'POST',
        path: '/v1/responses',
        api: 'openai-responses',
        model: 'gpt-test',
        stream: true,
        outcome: 'answered',
        request: { bytes: 2 },
        response: { status: 200, contentType: 'text/event-stream', bytes: 0, text: '' },
      },
    ]);
    const r = await rig({ upstream: recorded });
    const response = await post(r.connection, '/v1/responses', { model: 'gpt-test', input: 'x' });
    expect(await response.text()).toContain(
      'the agent asked openai-responses gpt-test; the recording holds openai-responses gpt-test (streamed)',
    );
  });

  it('a transcript line that is not an exchange is refused with its line number', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bridge-replay-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'bad.jsonl');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path, '{"seq":1}\n');
    await expect(readTranscript(path)).rejects.toThrow(/bad\.jsonl:1: /);
  });
});
