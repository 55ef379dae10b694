import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryEventSink } from '../../../src/agent/events.js';
import { runAgentLoop, type AgentLoopOptions } from '../../../src/agent/loop.js';
import {
  createDefaultToolRegistry,
  DEFAULT_TOOLS,
  ToolRegistry,
} from '../../../src/agent/tools/tool-registry.js';
import { defineTool } from '../../../src/agent/tools/types.js';
import { ConfigError, SandboxDead } from '../../../src/errors.js';
import { createProvider } from '../../../src/llm/provider-registry.js';
import { loadCassette, ReplayProvider } from '../../../src/llm/replay.js';
import type { ModelProvider } from '../../../src/llm/types.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';
import { until } from '../../helpers/poll.js';
import {
  ollamaTextReply,
  startFakeModelServer,
  type FakeModelServer,
  type ScriptStep,
} from '../../fake-model-server/server.js';
import { LoopingProvider, scripted, text, toolUse } from './helpers.js';
import {
  runSharedLoopScenario,
  SCENARIO_TURNS,
  scenarioCassette,
  scenarioExecHandler,
  toolResults,
} from './shared-loop-scenario.js';
import { z } from 'zod';

const FAST_RETRY = { baseDelayMs: 1, maxBackoffMs: 5 };

let server: FakeModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function sdkProvider(name: 'anthropic' | 'openai', script: ScriptStep[]): Promise<ModelProvider> {
  server = await startFakeModelServer(script);
  const env =
    name === 'anthropic'
      ? { ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: server.anthropicBaseUrl }
      : { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: server.openaiBaseUrl };
  return createProvider({ name, model: 'test-model', env, retry: FAST_RETRY });
}

function loopOptions(
  overrides: Partial<AgentLoopOptions> & Pick<AgentLoopOptions, 'provider' | 'sandbox'>,
): AgentLoopOptions {
  return {
    tools: createDefaultToolRegistry(),
    system: 'system',
    firstUserMessage: 'Fix the ticket.',
    limits: { maxTurns: 20 },
    events: new MemoryEventSink(),
    ...overrides,
  };
}

describe.each(['anthropic', 'openai'] as const)('the %s SDK against the fake server', (name) => {
  it('completes the shared tool-using scenario on a MemorySandbox', async () => {
    const provider = await sdkProvider(
      name,
      SCENARIO_TURNS.map((reply) => ({ reply })),
    );
    const sandbox = new MemorySandbox({}, scenarioExecHandler);
    const result = await runSharedLoopScenario({ sandbox, provider });
    expect(result.usage).toEqual({ inputTokens: 2600, outputTokens: 110 });
    // The model saw the file content in the second request, in its own wire format.
    const second = JSON.stringify(server?.modelRequests()[1]?.body);
    expect(second).toContain('Hello, wrld!');
    expect(second).toContain('toolu_scn_1');
  });

  it('retries a 429 and a 500 without running any tool twice', async () => {
    const provider = await sdkProvider(name, [
      { error: { status: 429, retryAfter: '0' } },
      { reply: { content: [toolUse('t1', 'run_command', { command: 'make check' })] } },
      { error: { status: 429, retryAfter: '0' } },
      { error: { status: 500 } },
      { reply: { content: [text('All good.')] } },
    ]);
    const sandbox = new MemorySandbox({}, () => ({ exitCode: 0, stdout: 'ok\n' }));
    const result = await runAgentLoop(loopOptions({ provider, sandbox }));
    expect(result.status).toBe('completed');
    expect(sandbox.commands).toEqual(['make check']);
    expect(server?.modelRequests()).toHaveLength(5);
    expect(toolResults(result.messages)).toHaveLength(1);
  });
});

describe('a tool call written as text (Ollama) through the OpenAI SDK', () => {
  it('is executed as a tool call, and its result goes back as the answer to that call', async () => {
    const provider = await sdkProvider('openai', [
      ollamaTextReply(
        'I will read the file first.\n```json\n{"name": "read_file", "arguments": {"path": "src/a.ts"}}\n```',
      ),
      ollamaTextReply('The constant is 50.'),
    ]);
    const sandbox = new MemorySandbox({ 'src/a.ts': 'export const LIMIT = 50;\n' });
    const events = new MemoryEventSink();
    const result = await runAgentLoop(loopOptions({ provider, sandbox, events }));
    expect(result.status).toBe('completed');
    expect(result.finalText).toBe('The constant is 50.');
    expect(events.ofKind('tool_call')).toMatchObject([{ tool: 'read_file', isError: false }]);
    const [read] = toolResults(result.messages);
    expect(read).toMatchObject({ isError: false });
    expect(read?.content).toContain('export const LIMIT = 50;');
    // The server sees its own call back as a structured call, answered by a tool message.
    const second = server?.modelRequests()[1]?.body as { messages: Record<string, unknown>[] };
    expect(second.messages.slice(-2)).toMatchObject([
      {
        role: 'assistant',
        content: 'I will read the file first.',
        tool_calls: [{ id: 'call_recovered_1', function: { name: 'read_file' } }],
      },
      { role: 'tool', tool_call_id: 'call_recovered_1' },
    ]);
  });
});

describe('replay provider in the loop', () => {
  it('drives the shared scenario, the same way every time', async () => {
    const first = new ReplayProvider(scenarioCassette());
    const second = new ReplayProvider(scenarioCassette());
    const a = await runSharedLoopScenario({
      sandbox: new MemorySandbox({}, scenarioExecHandler),
      provider: first,
    });
    const b = await runSharedLoopScenario({
      sandbox: new MemorySandbox({}, scenarioExecHandler),
      provider: second,
    });
    expect(first.requests).toHaveLength(4);
    expect(first.requests).toEqual(second.requests);
    expect(a.messages).toEqual(b.messages);
    expect(first.requests[0]?.tools.map((tool) => tool.name)).toEqual([
      'read_file',
      'write_file',
      'edit_file',
      'list_files',
      'search',
      'run_command',
    ]);
  });
});

describe('tool failures are results, and the loop goes on', () => {
  const explode = defineTool({
    name: 'explode',
    description: 'always throws',
    input: z.object({}),
    async run() {
      throw new Error('kaboom at /home/someone/secret/path');
    },
  });

  it('gives error results for an unknown tool, bad arguments and a throwing tool', async () => {
    const provider = scripted([
      { content: [toolUse('a', 'launch_missiles', {})] },
      { content: [toolUse('b', 'read_file', { file: 'x.ts' })] },
      { content: [toolUse('c', 'explode', {})] },
      { content: [text('I give up on those.')] },
    ]);
    const sandbox = new MemorySandbox();
    const result = await runAgentLoop(
      loopOptions({ provider, sandbox, tools: new ToolRegistry([...DEFAULT_TOOLS, explode]) }),
    );
    expect(result.status).toBe('completed');
    expect(result.turns).toBe(4);
    const [unknown, badArgs, thrown] = toolResults(result.messages);
    expect(unknown).toMatchObject({ toolUseId: 'a', isError: true });
    expect(unknown?.content).toMatch(
      /unknown tool "launch_missiles"; the available tools are: read_file, write_file/,
    );
    expect(badArgs).toMatchObject({ toolUseId: 'b', isError: true });
    expect(badArgs?.content).toMatch(/invalid input for read_file: path: .*expected string/);
    expect(thrown).toMatchObject({ toolUseId: 'c', isError: true });
    expect(thrown?.content).toMatch(/unexpected internal error/);
    expect(thrown?.content).not.toContain('/home/someone');
  });

  it('reports arguments that were not JSON at all (OpenAI-compatible servers)', async () => {
    const provider = await sdkProvider('openai', [
      { reply: { content: [toolUse('call_1', 'read_file', '{"path": "a.ts"')] } },
      { reply: { content: [text('ok')] } },
    ]);
    const result = await runAgentLoop(loopOptions({ provider, sandbox: new MemorySandbox() }));
    const [bad] = toolResults(result.messages);
    expect(bad?.isError).toBe(true);
    expect(bad?.content).toMatch(/not a JSON object: \{"path": "a.ts"/);
    // The broken arguments go back verbatim with the error, so the model can see its mistake.
    expect(JSON.stringify(server?.modelRequests()[1]?.body)).toContain('ERROR: invalid input for read_file');
  });
});

describe('limits', () => {
  it('stops a model that never finishes with status max-turns', async () => {
    const provider = new LoopingProvider();
    const sandbox = new MemorySandbox();
    const result = await runAgentLoop(loopOptions({ provider, sandbox, limits: { maxTurns: 3 } }));
    expect(result.status).toBe('max-turns');
    expect(result.turns).toBe(3);
    expect(provider.calls).toBe(3);
    expect(sandbox.commands).toEqual(['true', 'true', 'true']);
  });

  it('stops with token-budget once the budget is spent', async () => {
    const provider = scripted(
      Array.from({ length: 5 }, (_, i) => ({
        content: [toolUse(`t${i}`, 'list_files', {})],
        usage: { inputTokens: 500, outputTokens: 100 },
      })),
    );
    const result = await runAgentLoop(
      loopOptions({ provider, sandbox: new MemorySandbox(), limits: { maxTurns: 10, tokenBudget: 1_000 } }),
    );
    expect(result.status).toBe('token-budget');
    expect(result.turns).toBe(2);
    expect(result.usage).toEqual({ inputTokens: 1_000, outputTokens: 200 });
  });

  it('ends with timeout when the attempt deadline passes during a slow model call', async () => {
    const provider = await sdkProvider('anthropic', [
      { reply: { content: [text('late')] }, delayMs: 10_000 },
    ]);
    const started = Date.now();
    const result = await runAgentLoop(
      loopOptions({
        provider,
        sandbox: new MemorySandbox(),
        limits: { maxTurns: 5, attemptDeadlineMs: 200 },
      }),
    );
    expect(result.status).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('ends with timeout when a tool hangs past the deadline, even if the sandbox ignores the signal', async () => {
    const provider = scripted([{ content: [toolUse('t1', 'run_command', { command: 'sleep 1000' })] }]);
    const sandbox = new MemorySandbox({}, () => new Promise(() => {}));
    const result = await runAgentLoop(
      loopOptions({ provider, sandbox, limits: { maxTurns: 5, attemptDeadlineMs: 100 } }),
    );
    expect(result.status).toBe('timeout');
    expect(result.turns).toBe(1);
  });

  it('ends with interrupted when the caller aborts', async () => {
    const provider = await sdkProvider('openai', [{ reply: { content: [text('late')] }, delayMs: 10_000 }]);
    const controller = new AbortController();
    const pending = runAgentLoop(
      loopOptions({ provider, sandbox: new MemorySandbox(), signal: controller.signal }),
    );
    // Abort while the model call is in flight, not at a guessed moment.
    await until(() => (server?.modelRequests().length ?? 0) === 1, 'the model call arrived');
    controller.abort();
    const result = await pending;
    expect(result.status).toBe('interrupted');
  });
});

describe('errors that end the attempt', () => {
  it('stops as sandbox-stopped when a tool meets a dead sandbox, instead of telling the model', async () => {
    const provider = scripted([
      { content: [toolUse('t1', 'read_file', { path: 'a.ts' })] },
      { content: [text('x')] },
    ]);
    const sandbox = new MemorySandbox({ 'a.ts': 'x' });
    sandbox.kill();
    const result = await runAgentLoop(loopOptions({ provider, sandbox }));
    expect(result.status).toBe('sandbox-stopped');
    expect(result.sandboxError).toBeInstanceOf(SandboxDead);
    expect(result.turns).toBe(1);
    expect(provider.requests).toHaveLength(1);
  });

  it('propagates an error of the model provider (here: the cassette running out)', async () => {
    const provider = scripted([{ content: [toolUse('t1', 'list_files', {})] }]);
    await expect(
      runAgentLoop(loopOptions({ provider, sandbox: new MemorySandbox() })),
    ).rejects.toBeInstanceOf(ConfigError);
  });
});

describe('conversation handling', () => {
  it('asks the model to continue when a reply is cut at the output limit', async () => {
    const provider = scripted([
      { content: [text('Here is the whole fi')], stopReason: 'max_tokens' },
      { content: [text('Done.')] },
    ]);
    const result = await runAgentLoop(loopOptions({ provider, sandbox: new MemorySandbox() }));
    expect(result.status).toBe('completed');
    expect(result.turns).toBe(2);
    expect(JSON.stringify(provider.requests[1]?.messages.at(-1))).toMatch(/cut off at the output limit/);
  });

  it('trims old exchanges near the context window but keeps the first message and the transcript whole', async () => {
    const big = 'x'.repeat(8_000);
    const provider = scripted([
      ...Array.from({ length: 6 }, (_, i) => ({
        content: [toolUse(`t${i}`, 'read_file', { path: 'big.txt' })],
      })),
      { content: [text('done')] },
    ]);
    const events = new MemoryEventSink();
    const result = await runAgentLoop(
      loopOptions({
        provider,
        sandbox: new MemorySandbox({ 'big.txt': big }),
        events,
        contextWindowTokens: 10_000,
      }),
    );
    expect(result.status).toBe('completed');
    expect(result.messages).toHaveLength(1 + 6 * 2 + 1);
    const last = provider.requests.at(-1);
    expect(last?.messages.length).toBeLessThan(result.messages.length);
    expect(last?.messages[0]?.content[0]).toEqual({ type: 'text', text: 'Fix the ticket.' });
    expect(events.ofKind('history_trimmed').length).toBeGreaterThan(0);
  });

  it('logs model and tool calls with tokens, durations and exit codes', async () => {
    const provider = scripted([
      {
        content: [toolUse('t1', 'run_command', { command: 'exit 3' })],
        usage: { inputTokens: 7, outputTokens: 3 },
      },
      { content: [text('done')] },
    ]);
    const events = new MemoryEventSink();
    await runAgentLoop(
      loopOptions({ provider, sandbox: new MemorySandbox({}, () => ({ exitCode: 3 })), events, attempt: 2 }),
    );
    expect(events.events.map((event) => event.kind)).toEqual([
      'model_call',
      'tool_call',
      'model_call',
      'loop_end',
    ]);
    expect(events.ofKind('model_call')[0]).toMatchObject({
      attempt: 2,
      turn: 1,
      tokens: { input: 7, output: 3 },
      stopReason: 'tool_use',
    });
    expect(events.ofKind('tool_call')[0]).toMatchObject({ tool: 'run_command', exitCode: 3, isError: false });
    expect(typeof events.ofKind('tool_call')[0]?.durationMs).toBe('number');
    expect(events.ofKind('loop_end')[0]).toMatchObject({ status: 'completed' });
  });
});

describe('the checked-in cassette', () => {
  const file = fileURLToPath(new URL('../../fixtures/cassettes/shared-scenario.json', import.meta.url));

  it('is the shared scenario, and replays it from the file', async () => {
    expect(await loadCassette(file)).toEqual(scenarioCassette());
    const provider = await createProvider({ name: 'replay', cassette: file, env: {} });
    expect(provider.model).toBe('scenario');
    await runSharedLoopScenario({ sandbox: new MemorySandbox({}, scenarioExecHandler), provider });
  });

  it('fails naming the file and turn 5 when a second attempt asks for more', async () => {
    const provider = await createProvider({ name: 'replay', cassette: file, env: {} });
    await runSharedLoopScenario({ sandbox: new MemorySandbox({}, scenarioExecHandler), provider });
    const error = await runAgentLoop(loopOptions({ provider, sandbox: new MemorySandbox() })).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain(file);
    expect((error as ConfigError).message).toMatch(/turn 5 was requested/);
  });
});
