import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import {
  fromOpenAIResponse,
  mapOpenAIFinishReason,
  recoverToolCallsFromText,
  toOpenAIMessages,
  toOpenAIRequest,
} from '../../../src/llm/openai/mapping.js';
import type { Message } from '../../../src/llm/types.js';
import { loadFixture } from './fixtures.js';

const KNOWN = new Set(['read_file', 'write_file', 'edit_file', 'list_files', 'search', 'run_command']);

function options() {
  let n = 0;
  return { knownTools: KNOWN, newId: () => `recovered_${++n}`, fallbackModel: 'fallback' };
}

describe('fromOpenAIResponse (recorded responses)', () => {
  it('maps tool_calls, parsing arguments and keeping unparseable arguments raw', () => {
    const completion = fromOpenAIResponse(
      loadFixture<OpenAI.ChatCompletion>('openai-tool-calls.json'),
      options(),
    );
    expect(completion).toEqual({
      content: [
        {
          type: 'tool_use',
          id: 'call_abc123',
          name: 'run_command',
          input: { command: 'npm test', timeoutSec: 300 },
        },
        { type: 'tool_use', id: 'call_def456', name: 'read_file', input: '{"path": "src/index.ts"' },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 1517, outputTokens: 53 },
      model: 'gpt-4.1-2025-04-14',
    });
  });

  it('treats tool calls as tool_use even when the server says finish_reason "stop" (Ollama)', () => {
    const completion = fromOpenAIResponse(
      loadFixture<OpenAI.ChatCompletion>('ollama-tool-calls-finish-stop.json'),
      options(),
    );
    expect(completion.stopReason).toBe('tool_use');
    expect(completion.content).toEqual([
      { type: 'tool_use', id: 'call_x2k9v1aq', name: 'list_files', input: { path: 'src' } },
    ]);
  });

  it('recovers a tool call a small model wrote as fenced JSON text', () => {
    const completion = fromOpenAIResponse(
      loadFixture<OpenAI.ChatCompletion>('ollama-tool-call-as-text.json'),
      options(),
    );
    expect(completion.stopReason).toBe('tool_use');
    expect(completion.content).toEqual([
      { type: 'text', text: 'I will read the file first.' },
      { type: 'tool_use', id: 'recovered_1', name: 'read_file', input: { path: 'src/pricing/discount.ts' } },
    ]);
  });

  it('maps a plain answer to end_turn text', () => {
    const completion = fromOpenAIResponse(loadFixture<OpenAI.ChatCompletion>('openai-stop.json'), options());
    expect(completion).toMatchObject({
      content: [
        { type: 'text', text: 'The failing test now passes; I changed the cap in src/pricing/discount.ts.' },
      ],
      stopReason: 'end_turn',
      usage: { inputTokens: 2301, outputTokens: 19 },
    });
  });

  it('fails with a ModelError when the server sends no choice', () => {
    expect(() => fromOpenAIResponse({ choices: [] } as unknown as OpenAI.ChatCompletion, options())).toThrow(
      /without a choice/,
    );
  });
});

describe('recoverToolCallsFromText', () => {
  it('takes bare JSON naming a known tool', () => {
    expect(
      recoverToolCallsFromText('{"name": "run_command", "arguments": {"command": "ls"}}', KNOWN),
    ).toEqual({
      calls: [{ name: 'run_command', input: { command: 'ls' } }],
      remainingText: '',
    });
  });

  it('accepts "parameters", stringified arguments and <tool_call> tags', () => {
    expect(
      recoverToolCallsFromText('{"name":"search","parameters":{"pattern":"TODO"}}', KNOWN).calls,
    ).toEqual([{ name: 'search', input: { pattern: 'TODO' } }]);
    expect(
      recoverToolCallsFromText(
        '<tool_call>{"name":"read_file","arguments":"{\\"path\\":\\"a.ts\\"}"}</tool_call>',
        KNOWN,
      ).calls,
    ).toEqual([{ name: 'read_file', input: { path: 'a.ts' } }]);
  });

  it('leaves JSON naming an unknown tool as text', () => {
    const text = '```json\n{"name": "delete_repo", "arguments": {}}\n```';
    expect(recoverToolCallsFromText(text, KNOWN)).toEqual({ calls: [], remainingText: text });
  });

  it('leaves ordinary JSON in an answer alone', () => {
    const text = 'The config is:\n```json\n{"port": 8080}\n```';
    expect(recoverToolCallsFromText(text, KNOWN).calls).toEqual([]);
  });
});

describe('mapOpenAIFinishReason', () => {
  it.each([
    ['tool_calls', 'tool_use'],
    ['function_call', 'tool_use'],
    ['stop', 'end_turn'],
    ['length', 'max_tokens'],
    ['content_filter', 'other'],
    [null, 'other'],
  ] as const)('%s -> %s', (wire, neutral) => {
    expect(mapOpenAIFinishReason(wire)).toBe(neutral);
  });
});

describe('toOpenAIMessages', () => {
  const messages: Message[] = [
    { role: 'user', content: [{ type: 'text', text: 'Fix it' }] },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Reading.' },
        { type: 'tool_use', id: 'c1', name: 'read_file', input: { path: 'a.ts' } },
        { type: 'tool_use', id: 'c2', name: 'read_file', input: '{broken' },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', toolUseId: 'c1', content: 'const a = 1;', isError: false },
        { type: 'tool_result', toolUseId: 'c2', content: 'invalid input', isError: true },
        { type: 'text', text: 'Keep going.' },
      ],
    },
  ];

  it('puts the system prompt first, tool calls on the assistant message and tool results right after it', () => {
    expect(toOpenAIMessages('rules', messages)).toEqual([
      { role: 'system', content: 'rules' },
      { role: 'user', content: 'Fix it' },
      {
        role: 'assistant',
        content: 'Reading.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } },
          { id: 'c2', type: 'function', function: { name: 'read_file', arguments: '{broken' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'const a = 1;' },
      { role: 'tool', tool_call_id: 'c2', content: 'ERROR: invalid input' },
      { role: 'user', content: 'Keep going.' },
    ]);
  });

  it('uses max_completion_tokens only for api.openai.com', () => {
    const request = { system: '', messages, tools: [], maxTokens: 500 };
    expect(toOpenAIRequest(request, 'm', { useMaxCompletionTokens: true })).toMatchObject({
      max_completion_tokens: 500,
    });
    const local = toOpenAIRequest(request, 'm', { useMaxCompletionTokens: false });
    expect(local).toMatchObject({ max_tokens: 500 });
    expect(local).not.toHaveProperty('max_completion_tokens');
  });
});
