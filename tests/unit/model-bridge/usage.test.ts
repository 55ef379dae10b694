/**
 * Tokens read from answers as they stream: each API's usage, JSON and event streams, in any
 * chunking; numbers that are not counts are refused and the call is counted by the bridge.
 */
import { describe, expect, it } from 'vitest';
import { tokenCount, UsageMeter } from '../../../src/model-bridge/bridge-usage.js';
import {
  toAnthropicStream,
  toAnthropicWire,
  toOpenAIStream,
  toOpenAIWire,
  toResponsesStream,
  toResponsesWire,
  type ScriptedReply,
} from '../../fake-model-server/server.js';
import type { ApiKind } from '../../../src/model-bridge/checks.js';

const reply: ScriptedReply = {
  content: [
    { type: 'text', text: 'Reading it.' },
    { type: 'tool_use', id: 'call_1', name: 'Read', input: { file_path: '/workspace/a.js' } },
  ],
  usage: { inputTokens: 1234, outputTokens: 56 },
};

function meter(api: ApiKind, text: string, contentType: string, chunk = 7) {
  const m = new UsageMeter(api, contentType);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += chunk) m.push(bytes.subarray(at, at + chunk));
  return m.finish(10_000);
}

const SSE = 'text/event-stream; charset=utf-8';
const JSON_TYPE = 'application/json';

describe('usage from answers', () => {
  it.each([
    ['anthropic-messages', JSON.stringify(toAnthropicWire(reply, 0)), JSON_TYPE],
    ['anthropic-messages', toAnthropicStream(reply, 0), SSE],
    ['openai-chat', JSON.stringify(toOpenAIWire(reply, 0)), JSON_TYPE],
    ['openai-chat', toOpenAIStream(reply, 0, true), SSE],
    ['openai-responses', JSON.stringify(toResponsesWire(reply, 0)), JSON_TYPE],
    ['openai-responses', toResponsesStream(reply, 0), SSE],
  ] as const)('%s as %s reports its own numbers', (api, text, type) => {
    expect(meter(api, text, type)).toEqual({ inputTokens: 1234, outputTokens: 56, source: 'reported' });
    expect(meter(api, text, type, 1)).toEqual({ inputTokens: 1234, outputTokens: 56, source: 'reported' });
  });

  it("Anthropic's cache reads and writes count as prompt tokens, kept apart", () => {
    const wire = {
      usage: {
        input_tokens: 10,
        output_tokens: 5,
        cache_read_input_tokens: 300,
        cache_creation_input_tokens: 40,
      },
    };
    expect(meter('anthropic-messages', JSON.stringify(wire), JSON_TYPE)).toEqual({
      inputTokens: 350,
      outputTokens: 5,
      cacheReadTokens: 300,
      cacheWriteTokens: 40,
      source: 'reported',
    });
  });

  it("the last message_delta's output count wins (it is cumulative)", () => {
    const text = [
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}\n\n',
      'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":4}}\n\n',
      'event: message_delta\r\ndata: {"type":"message_delta","usage":{"output_tokens":12}}\r\n\r\n',
    ].join('');
    expect(meter('anthropic-messages', text, SSE)).toMatchObject({ inputTokens: 9, outputTokens: 12 });
  });

  it.each([
    ['negative', '-5'],
    ['a number written as text', '"12"'],
    ['not finite (a huge exponent)', '1e400'],
    ['over the per-call cap', '20000000'],
    ['an object', '{"n":1}'],
  ])('refuses a count that is %s and counts the call itself', (_what, value) => {
    const text = `{"usage":{"input_tokens":${value},"output_tokens":5}}`;
    const usage = meter('anthropic-messages', text, JSON_TYPE);
    expect(usage).toEqual({
      inputTokens: 2500,
      outputTokens: Math.ceil(Buffer.byteLength(text) / 4),
      source: 'estimated',
    });
  });

  it('counts the call itself when the answer has no usage (a chat stream that was not asked for it)', () => {
    const text = toOpenAIStream(reply, 0, false);
    expect(meter('openai-chat', text, SSE)).toEqual({
      inputTokens: 2500,
      outputTokens: Math.ceil(Buffer.byteLength(text) / 4),
      source: 'estimated',
    });
  });

  it('an event longer than the parse cap is passed over, not held', () => {
    const m = new UsageMeter('openai-responses', SSE);
    const filler = Buffer.alloc(1024 * 1024, 'a');
    m.push(Buffer.from('data: {"pad":"'));
    for (let i = 0; i < 10; i++) m.push(filler);
    m.push(Buffer.from('"}\n\n'));
    m.push(Buffer.from(toResponsesStream(reply, 0)));
    expect(m.finish(4)).toMatchObject({ inputTokens: 1234, outputTokens: 56, source: 'reported' });
  });

  it('floors a fractional count and takes zero', () => {
    expect(tokenCount(3.7)).toBe(3);
    expect(tokenCount(0)).toBe(0);
    expect(tokenCount(Number.NaN)).toBeUndefined();
  });
});
