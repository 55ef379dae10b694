import type Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import {
  fromAnthropicResponse,
  mapAnthropicStopReason,
  toAnthropicMessages,
  toAnthropicRequest,
} from '../../../src/llm/anthropic/anthropic-mapping.js';
import type { Message } from '../../../src/llm/types.js';
import { loadFixture } from './fixtures.js';

describe('fromAnthropicResponse (recorded responses)', () => {
  it('maps text and tool_use blocks, stop reason and usage', () => {
    const completion = fromAnthropicResponse(loadFixture<Anthropic.Message>('anthropic-tool-use.json'));
    expect(completion).toEqual({
      content: [
        { type: 'text', text: "I'll check the discount calculation first." },
        {
          type: 'tool_use',
          id: 'toolu_01A09q90qw90lq917835lq9',
          name: 'read_file',
          input: { path: 'src/pricing/discount.ts' },
        },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 2095, outputTokens: 71 },
      model: 'claude-sonnet-4-5-20250929',
    });
  });

  it('drops thinking blocks and counts cached prompt tokens as input', () => {
    const completion = fromAnthropicResponse(
      loadFixture<Anthropic.Message>('anthropic-end-turn-cached.json'),
    );
    expect(completion.content).toEqual([
      { type: 'text', text: 'The discount is now capped at 30% as the catalog requires. All tests pass.' },
    ]);
    expect(completion.stopReason).toBe('end_turn');
    // Cache reads and writes stay part of the prompt, and are also told apart for pricing.
    expect(completion.usage).toEqual({
      inputTokens: 12 + 300 + 5000,
      outputTokens: 25,
      cacheReadTokens: 5000,
      cacheWriteTokens: 300,
    });
  });

  it('reports a reply cut at the output limit as max_tokens', () => {
    const completion = fromAnthropicResponse(loadFixture<Anthropic.Message>('anthropic-max-tokens.json'));
    expect(completion.stopReason).toBe('max_tokens');
  });
});

describe('mapAnthropicStopReason', () => {
  it.each([
    ['tool_use', 'tool_use'],
    ['end_turn', 'end_turn'],
    ['stop_sequence', 'end_turn'],
    ['max_tokens', 'max_tokens'],
    ['model_context_window_exceeded', 'max_tokens'],
    ['pause_turn', 'other'],
    ['refusal', 'other'],
    [null, 'other'],
  ] as const)('%s -> %s', (wire, neutral) => {
    expect(mapAnthropicStopReason(wire)).toBe(neutral);
  });
});

describe('toAnthropicMessages', () => {
  it('sends tool results with tool_use_id and is_error, and drops empty text blocks', () => {
    const messages: Message[] = [
      { role: 'user', content: [{ type: 'text', text: 'Fix the ticket' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: '' },
          { type: 'tool_use', id: 't1', name: 'read_file', input: { path: 'a.ts' } },
        ],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', toolUseId: 't1', content: 'no such file', isError: true }],
      },
    ];
    expect(toAnthropicMessages(messages)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Fix the ticket' }] },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 't1', name: 'read_file', input: { path: 'a.ts' } }],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 't1', content: 'no such file', is_error: true }],
      },
    ]);
  });

  it('wraps a non-object tool input (from another provider) instead of sending an invalid request', () => {
    const [message] = toAnthropicMessages([
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read_file', input: '{"path": ' }] },
    ]);
    expect(message?.content).toEqual([
      { type: 'tool_use', id: 't1', name: 'read_file', input: { value: '{"path": ' } },
    ]);
  });

  it('builds a request with system, tools and max_tokens, and omits empty tools', () => {
    const request = toAnthropicRequest(
      {
        system: 'rules',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
        tools: [
          {
            name: 'read_file',
            description: 'Read',
            inputSchema: { properties: { path: { type: 'string' } } },
          },
        ],
        maxTokens: 1000,
      },
      'claude-x',
    );
    expect(request).toMatchObject({
      model: 'claude-x',
      max_tokens: 1000,
      system: 'rules',
      tools: [
        {
          name: 'read_file',
          description: 'Read',
          input_schema: { type: 'object', properties: { path: { type: 'string' } } },
        },
      ],
    });
    const bare = toAnthropicRequest({ system: '', messages: [], tools: [], maxTokens: 10 }, 'm');
    expect(bare).not.toHaveProperty('tools');
    expect(bare).not.toHaveProperty('system');
  });
});
