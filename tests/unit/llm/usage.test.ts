/**
 * A model server's token counts are checked before they are believed, on both wire formats
 * through the real SDKs (the local fake server): negative, string, fractional, infinite and
 * huge counts refuse the answer (a retryable ModelError), the call is still counted by the
 * harness's own estimate, and the cost limit still stops a run whose server lies.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ModelError } from '../../../src/errors.js';
import { createProvider } from '../../../src/llm/provider-registry.js';
import { CostMeter } from '../../../src/llm/cost.js';
import { estimateRequestTokens } from '../../../src/llm/tokens.js';
import type { CompletionRequest, ModelProvider, Usage } from '../../../src/llm/types.js';
import {
  startFakeModelServer,
  toAnthropicWire,
  toOpenAIWire,
  type FakeModelServer,
  type ScriptStep,
  type ScriptedReply,
} from '../../fake-model-server/server.js';
import { memoryRun, type MemoryRun } from '../../helpers/memory-run.js';

type Wire = 'anthropic' | 'openai';

const request: CompletionRequest = {
  system: 'You fix tickets.',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Fix the bug in src/shipping.ts, please.' }] }],
  tools: [],
  maxTokens: 256,
};

const reply: ScriptedReply = { content: [{ type: 'text', text: 'done' }], model: 'gpt-4.1' };

let server: FakeModelServer | undefined;
const runs: MemoryRun[] = [];
afterEach(async () => {
  await server?.close();
  server = undefined;
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

async function provider(wire: Wire, script: ScriptStep[], maxAttempts = 1): Promise<ModelProvider> {
  server = await startFakeModelServer(script);
  return createProvider({
    name: wire,
    model: 'gpt-4.1',
    env:
      wire === 'anthropic'
        ? { ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: server.anthropicBaseUrl }
        : { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: server.openaiBaseUrl },
    retry: { maxAttempts, baseDelayMs: 1, maxBackoffMs: 2 },
  });
}

/** A well-formed answer of `wire` whose usage is replaced by `usage` (as JSON text, so 1e400 stays 1e400). */
function withUsage(wire: Wire, usage: string): ScriptStep {
  const body = (wire === 'anthropic' ? toAnthropicWire(reply, 0) : toOpenAIWire(reply, 0)) as Record<
    string,
    unknown
  >;
  const text = JSON.stringify({ ...body, usage: '__USAGE__' });
  return { text: text.replace('"__USAGE__"', usage) };
}

const impossible: Record<Wire, [string, string, RegExp][]> = {
  anthropic: [
    [
      'negative',
      '{"input_tokens": -1000000, "output_tokens": 20}',
      /input_tokens: expected 0 or more, got -1000000/,
    ],
    [
      'a string',
      '{"input_tokens": "100", "output_tokens": 20}',
      /input_tokens: expected a number, got string "100"/,
    ],
    [
      'a fraction',
      '{"input_tokens": 100, "output_tokens": 2.5}',
      /output_tokens: expected a whole number, got 2.5/,
    ],
    ['infinite', '{"input_tokens": 1e400, "output_tokens": 20}', /input_tokens: expected a finite number/],
    ['huge', '{"input_tokens": 100, "output_tokens": 1e15}', /output_tokens: expected at most 10000000/],
    [
      'negative cache reads',
      '{"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": -5}',
      /cache_read_input_tokens: expected 0 or more/,
    ],
    [
      'parts that add up past the cap',
      '{"input_tokens": 9000000, "output_tokens": 20, "cache_read_input_tokens": 9000000}',
      /input tokens with cache: expected at most 10000000/,
    ],
    ['not an object', '"lots"', /usage: expected an object, got string/],
  ],
  openai: [
    [
      'negative',
      '{"prompt_tokens": -1000000, "completion_tokens": 20}',
      /prompt_tokens: expected 0 or more, got -1000000/,
    ],
    [
      'a string',
      '{"prompt_tokens": 100, "completion_tokens": "20"}',
      /completion_tokens: expected a number, got string "20"/,
    ],
    [
      'a fraction',
      '{"prompt_tokens": 100.5, "completion_tokens": 20}',
      /prompt_tokens: expected a whole number/,
    ],
    [
      'infinite',
      '{"prompt_tokens": 100, "completion_tokens": -1e400}',
      /completion_tokens: expected a finite number/,
    ],
    ['huge', '{"prompt_tokens": 1e15, "completion_tokens": 20}', /prompt_tokens: expected at most 10000000/],
    [
      'more cached than prompt tokens',
      '{"prompt_tokens": 10, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 500}}',
      /cached_tokens: 500 cached of 10 prompt tokens/,
    ],
    ['a list', '[1, 2]', /usage: expected an object, got a list/],
  ],
};

describe.each(['anthropic', 'openai'] as const)('%s: token counts from the server', (wire) => {
  it.each(impossible[wire])(
    'refuses an answer whose usage is %s, and counts the call by estimate',
    async (_what, usage, why) => {
      const model = await provider(wire, [withUsage(wire, usage)]);
      const refused: Usage[] = [];
      const error = await model
        .complete({ ...request, onRefusedUsage: (u) => refused.push(u) })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ModelError);
      expect((error as ModelError).retryable).toBe(true);
      expect((error as Error).message).toMatch(why);
      expect(refused).toEqual([
        { inputTokens: estimateRequestTokens(request), outputTokens: expect.any(Number) },
      ]);
      expect(refused[0]!.inputTokens).toBeGreaterThan(0);
    },
  );

  it('tries again after an answer refused for its counts, and counts both calls', async () => {
    const good =
      wire === 'anthropic'
        ? '{"input_tokens": 300, "output_tokens": 7}'
        : '{"prompt_tokens": 300, "completion_tokens": 7}';
    const bad =
      wire === 'anthropic'
        ? '{"input_tokens": -1, "output_tokens": 7}'
        : '{"prompt_tokens": -1, "completion_tokens": 7}';
    const model = await provider(wire, [withUsage(wire, bad), withUsage(wire, good)], 2);
    const meter = new CostMeter({ 'gpt-4.1': { input: 2, output: 8 } });
    const completion = await meter.meter(model, 'main').complete(request);
    expect(completion.usage).toEqual({ inputTokens: 300, outputTokens: 7 });
    const main = meter.byRole.get('main')!;
    expect(main.calls).toBe(2);
    expect(main.inputTokens).toBe(300 + estimateRequestTokens(request));
    expect(meter.totalUsd).toBeGreaterThan(0);
  });

  it('counts by estimate what the server leaves out, or reports as 0 for a non-empty call', async () => {
    for (const usage of [
      'null',
      '{}',
      wire === 'anthropic'
        ? '{"input_tokens": 0, "output_tokens": 0}'
        : '{"prompt_tokens": 0, "completion_tokens": 0}',
    ]) {
      const model = await provider(wire, [withUsage(wire, usage)]);
      const completion = await model.complete(request);
      expect(completion.usage.inputTokens, usage).toBe(estimateRequestTokens(request));
      expect(completion.usage.outputTokens, usage).toBeGreaterThan(0);
      await server?.close();
      server = undefined;
    }
  });
});

describe('the cost limit when a server lies about its usage', () => {
  it('still stops the run: refused answers are counted by estimate, never as negative dollars', async () => {
    // Every other answer claims minus a million prompt tokens; the rest claim a single token.
    const listFiles = (n: number): ScriptedReply => ({
      content: [{ type: 'tool_use', id: `t${n}`, name: 'list_files', input: {} }],
      model: 'gpt-4.1',
    });
    const script: ScriptStep[] = [];
    for (let n = 0; n < 40; n++) {
      const body = toOpenAIWire(listFiles(n), n) as Record<string, unknown>;
      script.push({
        raw: {
          ...body,
          usage:
            n % 2 === 0
              ? { prompt_tokens: -1_000_000, completion_tokens: 10 }
              : { prompt_tokens: 1, completion_tokens: 1 },
        },
      });
    }
    const model = await provider('openai', script, 4);
    const run = await memoryRun({ provider: model, overrides: { costLimitUsd: 0.02 } });
    runs.push(run);
    expect(run.result.outcome).toBe('budget');
    const cost = run.result.record.cost!;
    expect(cost.usd).toBeGreaterThanOrEqual(0.02);
    expect(cost.usd).toBeLessThan(1);
    // It stopped well before the script ran out: the limit ended it, not the server.
    expect(server!.remaining()).toBeGreaterThan(10);
  });
});
