/**
 * Pure translations between our neutral types and OpenAI Chat Completions, the dialect
 * spoken by OpenAI, Ollama, vLLM and OpenRouter. Type-only imports: the SDK itself is loaded
 * only when this provider is chosen.
 */
import type OpenAI from 'openai';
import { ModelError } from '../../errors.js';
import type {
  AssistantContent,
  Completion,
  CompletionRequest,
  Message,
  StopReason,
  ToolDefinition,
  ToolUseBlock,
} from '../types.js';

export function mapOpenAIFinishReason(reason: string | null | undefined): StopReason {
  switch (reason) {
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'stop':
      return 'end_turn';
    case 'length':
      return 'max_tokens';
    default:
      return 'other';
  }
}

function argumentsText(input: unknown): string {
  // A raw string is what the model sent when it was not valid JSON: send it back unchanged.
  return typeof input === 'string' ? input : JSON.stringify(input ?? {});
}

export function toOpenAIMessages(
  system: string,
  messages: readonly Message[],
): OpenAI.ChatCompletionMessageParam[] {
  const out: OpenAI.ChatCompletionMessageParam[] = [];
  if (system !== '') out.push({ role: 'system', content: system });
  for (const message of messages) {
    if (message.role === 'assistant') {
      const text = message.content
        .filter((block) => block.type === 'text')
        .map((block) => block.text)
        .join('\n');
      const toolCalls = message.content
        .filter((block): block is ToolUseBlock => block.type === 'tool_use')
        .map((block) => ({
          id: block.id,
          type: 'function' as const,
          function: { name: block.name, arguments: argumentsText(block.input) },
        }));
      const param: OpenAI.ChatCompletionAssistantMessageParam = {
        role: 'assistant',
        content: text === '' && toolCalls.length > 0 ? null : text,
      };
      if (toolCalls.length > 0) param.tool_calls = toolCalls;
      out.push(param);
    } else {
      // Tool messages must directly follow the assistant message that asked for them, so
      // they go before any plain text of the same user turn.
      for (const block of message.content) {
        if (block.type === 'tool_result') {
          // Chat Completions has no error flag on tool results; say it in words.
          out.push({
            role: 'tool',
            tool_call_id: block.toolUseId,
            content: block.isError ? `ERROR: ${block.content}` : block.content,
          });
        }
      }
      const text = message.content
        .filter((block) => block.type === 'text')
        .map((block) => block.text)
        .join('\n\n');
      if (text !== '') out.push({ role: 'user', content: text });
    }
  }
  return out;
}

export function toOpenAITools(tools: readonly ToolDefinition[]): OpenAI.ChatCompletionFunctionTool[] {
  return tools.map((tool) => ({
    type: 'function',
    function: {
      name: tool.name,
      description: tool.description,
      parameters: { type: 'object', ...tool.inputSchema },
    },
  }));
}

export interface OpenAIRequestOptions {
  /** api.openai.com wants `max_completion_tokens`; local servers mostly know only `max_tokens`. */
  useMaxCompletionTokens: boolean;
}

export function toOpenAIRequest(
  request: CompletionRequest,
  model: string,
  options: OpenAIRequestOptions,
): OpenAI.ChatCompletionCreateParamsNonStreaming {
  const body: OpenAI.ChatCompletionCreateParamsNonStreaming = {
    model,
    messages: toOpenAIMessages(request.system, request.messages),
  };
  if (options.useMaxCompletionTokens) body.max_completion_tokens = request.maxTokens;
  else body.max_tokens = request.maxTokens;
  if (request.tools.length > 0) body.tools = toOpenAITools(request.tools);
  return body;
}

/** Arguments arrive as a JSON string; a string that does not parse is kept raw for the error message. */
export function parseToolArguments(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw ?? {};
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

export interface RecoveredCall {
  name: string;
  input: unknown;
}

export interface Recovery {
  calls: RecoveredCall[];
  /** The text with the recovered JSON removed. */
  remainingText: string;
}

function asRecord(value: unknown): Record<string, any> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, any>)
    : undefined;
}

function callFromObject(value: unknown, knownTools: ReadonlySet<string>): RecoveredCall | undefined {
  const object = asRecord(value);
  if (!object) return undefined;
  const fn = asRecord(object['function']);
  const name = object['name'] ?? fn?.['name'] ?? object['tool'] ?? object['tool_name'];
  if (typeof name !== 'string' || !knownTools.has(name)) return undefined;
  const args =
    object['arguments'] ?? object['parameters'] ?? object['input'] ?? object['args'] ?? fn?.['arguments'];
  const input = parseToolArguments(args);
  if (!asRecord(input)) return undefined;
  return { name, input };
}

function callsFromJson(text: string, knownTools: ReadonlySet<string>): RecoveredCall[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const items = Array.isArray(parsed) ? parsed : [parsed];
  if (items.length === 0) return undefined;
  const calls: RecoveredCall[] = [];
  for (const item of items) {
    const call = callFromObject(item, knownTools);
    // All or nothing: a half-understood block is more likely prose about JSON than a call.
    if (!call) return undefined;
    calls.push(call);
  }
  return calls;
}

/**
 * Small local models often write the tool call as JSON in the message text instead of using
 * `tool_calls`: bare, inside ```json fences, or inside <tool_call> tags. When the JSON names a
 * tool we offered, it is taken as that call; anything else stays text.
 */
export function recoverToolCallsFromText(text: string, knownTools: ReadonlySet<string>): Recovery {
  const wrapped = /```[a-zA-Z_]*[ \t]*\r?\n?([\s\S]*?)```|<tool_call>([\s\S]*?)<\/tool_call>/g;
  const calls: RecoveredCall[] = [];
  let remaining = text;
  for (const match of text.matchAll(wrapped)) {
    const inner = (match[1] ?? match[2] ?? '').trim();
    const found = callsFromJson(inner, knownTools);
    if (found) {
      calls.push(...found);
      remaining = remaining.replace(match[0], '');
    }
  }
  if (calls.length === 0) {
    const trimmed = text.trim();
    if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
      const found = callsFromJson(trimmed, knownTools);
      if (found) return { calls: found, remainingText: '' };
    }
  }
  return { calls, remainingText: calls.length > 0 ? remaining.trim() : text };
}

export interface FromOpenAIOptions {
  knownTools: ReadonlySet<string>;
  /** Ids for calls recovered from text (the server gave them none). */
  newId: () => string;
  fallbackModel: string;
}

export function fromOpenAIResponse(response: OpenAI.ChatCompletion, options: FromOpenAIOptions): Completion {
  const choice = response.choices?.[0];
  if (!choice || !choice.message) {
    throw new ModelError('the OpenAI-compatible server answered without a choice', false);
  }
  const message = choice.message;
  let text = typeof message.content === 'string' ? message.content : '';
  const toolUses: ToolUseBlock[] = [];
  for (const call of (message.tool_calls ?? []) as Array<Record<string, any>>) {
    const fn = asRecord(call['function']);
    if (!fn || typeof fn['name'] !== 'string') continue;
    toolUses.push({
      type: 'tool_use',
      id: typeof call['id'] === 'string' && call['id'] !== '' ? call['id'] : options.newId(),
      name: fn['name'],
      input: parseToolArguments(fn['arguments']),
    });
  }
  if (toolUses.length === 0 && text !== '') {
    const recovery = recoverToolCallsFromText(text, options.knownTools);
    for (const call of recovery.calls) {
      toolUses.push({ type: 'tool_use', id: options.newId(), name: call.name, input: call.input });
    }
    text = recovery.remainingText;
  }
  const content: AssistantContent[] = [];
  if (text.trim() !== '') content.push({ type: 'text', text });
  content.push(...toolUses);
  return {
    content,
    // Ollama answers `stop` even when it returns tool calls; the calls are what matter.
    stopReason: toolUses.length > 0 ? 'tool_use' : mapOpenAIFinishReason(choice.finish_reason),
    usage: {
      inputTokens: response.usage?.prompt_tokens ?? 0,
      outputTokens: response.usage?.completion_tokens ?? 0,
    },
    model:
      typeof response.model === 'string' && response.model !== '' ? response.model : options.fallbackModel,
  };
}
