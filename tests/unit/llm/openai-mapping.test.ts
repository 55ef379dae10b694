import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import {
  fromOpenAIResponse,
  mapOpenAIFinishReason,
  recoverToolCallsFromText,
  toOpenAIMessages,
  toOpenAIRequest,
} from '../../../src/llm/openai/openai-mapping.js';
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

  it('recovers a bare {"name", "parameters"} call (llama3.1 through Ollama)', () => {
    const completion = fromOpenAIResponse(
      loadFixture<OpenAI.ChatCompletion>('ollama-text-call-parameters.json'),
      options(),
    );
    expect(completion.stopReason).toBe('tool_use');
    expect(completion.content).toEqual([
      { type: 'tool_use', id: 'recovered_1', name: 'run_command', input: { command: 'npm test' } },
    ]);
  });

  it('recovers a fenced call whose arguments are a JSON string', () => {
    const completion = fromOpenAIResponse(
      loadFixture<OpenAI.ChatCompletion>('ollama-text-call-string-arguments.json'),
      options(),
    );
    expect(completion.content).toEqual([
      {
        type: 'tool_use',
        id: 'recovered_1',
        name: 'edit_file',
        input: { path: 'src/shipping.ts', search: 'THRESHOLD = 50', replacement: 'THRESHOLD = 39' },
      },
    ]);
  });

  it('recovers consecutive <tool_call> blocks, in order, when vLLM has no tool parser', () => {
    const completion = fromOpenAIResponse(
      loadFixture<OpenAI.ChatCompletion>('vllm-tool-call-tags.json'),
      options(),
    );
    expect(completion.stopReason).toBe('tool_use');
    expect(completion.content).toEqual([
      { type: 'tool_use', id: 'recovered_1', name: 'read_file', input: { path: 'src/shipping.ts' } },
      { type: 'tool_use', id: 'recovered_2', name: 'search', input: { pattern: 'THRESHOLD' } },
    ]);
  });

  it('keeps a final answer that quotes a call in the middle as text, ending the turn', () => {
    const fixture = loadFixture<OpenAI.ChatCompletion>('ollama-answer-quoting-a-call.json');
    const completion = fromOpenAIResponse(fixture, options());
    expect(completion.stopReason).toBe('end_turn');
    expect(completion.content).toEqual([{ type: 'text', text: fixture.choices[0]?.message.content }]);
  });

  it('recovers nothing when no tools were offered', () => {
    const completion = fromOpenAIResponse(
      loadFixture<OpenAI.ChatCompletion>('ollama-text-call-parameters.json'),
      {
        ...options(),
        knownTools: new Set<string>(),
      },
    );
    expect(completion.stopReason).toBe('end_turn');
    expect(completion.content).toHaveLength(1);
    expect(completion.content[0]?.type).toBe('text');
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
  const CALL = '{"name": "run_command", "arguments": {"command": "ls"}}';
  const LS = { name: 'run_command', input: { command: 'ls' } };

  it.each([
    ['bare JSON', CALL, ''],
    ['a ```json fence', `\`\`\`json\n${CALL}\n\`\`\``, ''],
    ['a fence without an info string, on one line', `\`\`\`${CALL}\`\`\``, ''],
    ['<tool_call> tags', `<tool_call>${CALL}</tool_call>`, ''],
    [
      'a short lead-in, then a fence',
      `Let me list the files.\n\`\`\`json\n${CALL}\n\`\`\``,
      'Let me list the files.',
    ],
    ['a short lead-in, then bare JSON on its own line', `Listing:\n${CALL}`, 'Listing:'],
    ['surrounding whitespace', `\n\n  ${CALL}  \n`, ''],
    [
      'the OpenAI wire shape',
      '{"type": "function", "function": {"name": "run_command", "arguments": "{\\"command\\": \\"ls\\"}"}}',
      '',
    ],
    [
      'an id and a type next to name and arguments',
      '{"id": "x", "type": "function", "name": "run_command", "arguments": {"command": "ls"}}',
      '',
    ],
  ])('takes %s as the call', (_what, text, remainingText) => {
    expect(recoverToolCallsFromText(text, KNOWN)).toEqual({ calls: [LS], remainingText });
  });

  it('accepts "parameters" and stringified arguments', () => {
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

  it('takes an array of calls and consecutive blocks, in order', () => {
    const two =
      '[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "read_file", "arguments": {"path": "b"}}]';
    expect(recoverToolCallsFromText(two, KNOWN).calls.map((c) => c.input)).toEqual([
      { path: 'a' },
      { path: 'b' },
    ]);
    const fences =
      '```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```\n\n```json\n{"name": "read_file", "arguments": {"path": "b"}}\n```';
    expect(recoverToolCallsFromText(fences, KNOWN).calls.map((c) => c.input)).toEqual([
      { path: 'a' },
      { path: 'b' },
    ]);
  });

  it('pairs the fences right when the arguments themselves hold a fence', () => {
    const content = '# Title\n```sh\nnpm test\n```\n';
    const text = `\`\`\`json\n${JSON.stringify({ name: 'write_file', arguments: { path: 'README.md', content } })}\n\`\`\``;
    expect(recoverToolCallsFromText(text, KNOWN).calls).toEqual([
      { name: 'write_file', input: { path: 'README.md', content } },
    ]);
  });

  it.each([
    ['a tool that was not offered', '```json\n{"name": "delete_repo", "arguments": {}}\n```'],
    ['ordinary JSON after prose', 'The config is:\n```json\n{"port": 8080}\n```'],
    ['a package.json whose name is a tool name', '{"name": "search", "version": "1.0.0"}'],
    ['a name without arguments', '{"name": "list_files"}'],
    [
      'a call with a key a call never has',
      '{"name": "search", "arguments": {"pattern": "x"}, "version": "1.0.0"}',
    ],
    ['two argument keys', '{"name": "run_command", "arguments": {"command": "ls"}, "parameters": {}}'],
    ['arguments that are not an object', '{"name": "run_command", "arguments": "ls -la"}'],
    ['a call quoted in the middle of an answer', `Done. You could run\n${CALL}\nto check it yourself.`],
    ['a call inline in a sentence', `I would call ${CALL}`],
    [
      'a call after a long explanation',
      `${'The fix changes the threshold and updates the tests accordingly. '.repeat(8)}\n${CALL}`,
    ],
    [
      'a fenced call after a long explanation',
      `${'The fix changes the threshold and updates the tests accordingly. '.repeat(8)}\n\`\`\`json\n${CALL}\n\`\`\``,
    ],
    ['a call after another code block', `Here is the diff:\n\`\`\`diff\n-a\n+b\n\`\`\`\n${CALL}`],
    [
      'one good block and one that is not a call',
      `\`\`\`json\n${CALL}\n\`\`\`\n\`\`\`json\n{"port": 1}\n\`\`\``,
    ],
    ['an array with one item that is not a call', `[${CALL}, {"port": 1}]`],
    ['broken JSON', '{"name": "run_command", "arguments": {"command": "ls"}'],
  ])('leaves %s as text', (_what, text) => {
    expect(recoverToolCallsFromText(text, KNOWN)).toEqual({ calls: [], remainingText: text });
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
