/**
 * Pure translations between our neutral types and OpenAI Chat Completions, the dialect
 * spoken by OpenAI, Ollama, vLLM and OpenRouter. Type-only imports: the SDK itself is loaded
 * only when this provider is chosen.
 */
import type OpenAI from 'openai';
import { ModelError } from '../../errors.js';
import { countOrEstimate, estimatedUsage, impossibleUsage, reportedCounts, usageObject } from '../usage.js';
import type {
  AssistantContent,
  Completion,
  CompletionRequest,
  Message,
  StopReason,
  ToolDefinition,
  ToolUseBlock,
  Usage,
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
  /** The text with the recovered calls removed (the lead-in), or the whole text when none was recovered. */
  remainingText: string;
}

/**
 * Prose allowed before a call written as text ("I will read the file first."). A longer text
 * is an answer that happens to end with JSON, not a call with a preamble.
 */
export const MAX_LEAD_IN_CHARS = 400;

const NAME_KEYS = ['name', 'tool', 'tool_name'] as const;
const ARGUMENT_KEYS = ['arguments', 'parameters', 'input', 'args'] as const;
/** Keys a call may carry besides its name and arguments; any other key means it is some other JSON. */
const EXTRA_KEYS = new Set(['id', 'type']);

function asRecord(value: unknown): Record<string, any> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, any>)
    : undefined;
}

/**
 * One call, strictly: exactly one name key naming an offered tool, exactly one arguments key
 * holding an object (or a JSON string of one), and nothing else but `id` and `type`. The
 * strictness is what keeps a package.json whose `name` happens to be "search" a text.
 */
function callFromObject(value: unknown, knownTools: ReadonlySet<string>): RecoveredCall | undefined {
  const outer = asRecord(value);
  if (!outer) return undefined;
  // The OpenAI wire shape written out as text: {"type": "function", "function": {"name", "arguments"}}.
  const fn = asRecord(outer['function']);
  const object =
    fn && Object.keys(outer).every((key) => key === 'function' || EXTRA_KEYS.has(key)) ? fn : outer;
  if (object['type'] !== undefined && object['type'] !== 'function' && object['type'] !== 'tool_use')
    return undefined;
  const keys = Object.keys(object);
  const nameKeys = keys.filter((key) => (NAME_KEYS as readonly string[]).includes(key));
  const argumentKeys = keys.filter((key) => (ARGUMENT_KEYS as readonly string[]).includes(key));
  if (nameKeys.length !== 1 || argumentKeys.length !== 1) return undefined;
  if (keys.length !== 2 + keys.filter((key) => EXTRA_KEYS.has(key)).length) return undefined;
  const name = object[nameKeys[0]!];
  if (typeof name !== 'string' || !knownTools.has(name)) return undefined;
  const input = parseToolArguments(object[argumentKeys[0]!]);
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

const FENCE = '```';
const OPEN_TAG = '<tool_call>';
const CLOSE_TAG = '</tool_call>';

/**
 * The calls in the ```fenced``` or <tool_call> block that ends `text`: undefined when the text
 * does not end with such a block, `calls` undefined when it does but the block is not calls.
 */
function trailingBlock(
  text: string,
  knownTools: ReadonlySet<string>,
): { before: string; calls?: RecoveredCall[] } | undefined {
  if (text.endsWith(CLOSE_TAG)) {
    const open = text.lastIndexOf(OPEN_TAG);
    if (open < 0) return undefined;
    const calls = callsFromJson(text.slice(open + OPEN_TAG.length, -CLOSE_TAG.length).trim(), knownTools);
    return { before: text.slice(0, open), ...(calls ? { calls } : {}) };
  }
  if (!text.endsWith(FENCE) || text.length < 2 * FENCE.length) return undefined;
  // Arguments may themselves hold a fence (write_file of a README): the nearest opening
  // fence is not necessarily the one that pairs with the closing fence, so try each.
  let open = text.lastIndexOf(FENCE, text.length - FENCE.length - 1);
  if (open < 0) return undefined;
  const outermost = open;
  for (; open >= 0; open = open === 0 ? -1 : text.lastIndexOf(FENCE, open - 1)) {
    // The info string ("json", "tool_code") is not part of the JSON.
    const body = text.slice(open + FENCE.length, -FENCE.length).replace(/^[A-Za-z0-9_-]*\s*(?=[[{])/, '');
    const calls = callsFromJson(body.trim(), knownTools);
    if (calls) return { before: text.slice(0, open), calls };
  }
  return { before: text.slice(0, outermost) };
}

/** A bare JSON call ending the text and starting on a line of its own, after a short lead-in at most. */
function trailingJson(
  text: string,
  knownTools: ReadonlySet<string>,
): { before: string; calls: RecoveredCall[] } | undefined {
  if (!/[\]}]$/.test(text)) return undefined;
  for (const match of text.matchAll(/(^|\n)[ \t]*(?=[[{])/g)) {
    const start = match.index + match[0].length;
    const before = text.slice(0, start);
    if (before.trim().length > MAX_LEAD_IN_CHARS) break;
    const calls = callsFromJson(text.slice(start), knownTools);
    if (calls) return { before, calls };
  }
  return undefined;
}

/**
 * Small local models (Ollama, vLLM without a tool parser) often write the tool call as JSON
 * in the message text instead of using `tool_calls`: bare, inside ```json fences, or inside
 * <tool_call> tags, as `{"name", "arguments"}` or `{"name", "parameters"}`, the arguments an
 * object or a JSON string. Such text is taken as calls only when it is essentially just the
 * calls: they end the message (several blocks may follow each other), every one names a tool
 * that was offered, and at most a short lead-in of prose precedes them. Anything else, such
 * as an answer that quotes a call in the middle, explains one at length, or shows some other
 * JSON, stays text.
 */
export function recoverToolCallsFromText(text: string, knownTools: ReadonlySet<string>): Recovery {
  const none: Recovery = { calls: [], remainingText: text };
  if (knownTools.size === 0) return none;
  let rest = text.trim();
  const blocks: RecoveredCall[][] = [];
  for (let block = trailingBlock(rest, knownTools); block; block = trailingBlock(rest, knownTools)) {
    if (!block.calls) return none;
    blocks.unshift(block.calls);
    rest = block.before.trimEnd();
  }
  if (blocks.length === 0) {
    const bare = trailingJson(rest, knownTools);
    if (!bare) return none;
    blocks.push(bare.calls);
    rest = bare.before;
  }
  const leadIn = rest.trim();
  if (leadIn.length > MAX_LEAD_IN_CHARS || leadIn.includes(FENCE) || leadIn.includes(OPEN_TAG)) return none;
  return { calls: blocks.flat(), remainingText: leadIn };
}

export interface FromOpenAIOptions {
  knownTools: ReadonlySet<string>;
  /** Ids for calls recovered from text (the server gave them none). */
  newId: () => string;
  fallbackModel: string;
  /** The harness's estimate of the request's tokens: what a count the server leaves out becomes. */
  estimatedInputTokens?: number;
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
    usage: openAIUsage(response, estimatedUsage(options.estimatedInputTokens ?? 0, content)),
    model:
      typeof response.model === 'string' && response.model !== '' ? response.model : options.fallbackModel,
  };
}

/**
 * The counts of an answer, checked (`usage.ts`): prompt and completion tokens, and the
 * prompt tokens served from the cache, which cannot be more than the prompt.
 */
function openAIUsage(response: OpenAI.ChatCompletion, estimate: Usage): Usage {
  const usage = usageObject('openai', (response as { usage?: unknown }).usage, estimate);
  const details = usageObject('openai', usage['prompt_tokens_details'], estimate);
  const counts = reportedCounts(
    'openai',
    {
      prompt_tokens: usage['prompt_tokens'],
      completion_tokens: usage['completion_tokens'],
      'prompt_tokens_details.cached_tokens': details['cached_tokens'],
    },
    estimate,
  );
  const cached = counts['prompt_tokens_details.cached_tokens'] ?? 0;
  if (cached > (counts.prompt_tokens ?? 0) && cached > 0)
    throw impossibleUsage(
      'openai',
      [
        `prompt_tokens_details.cached_tokens: ${cached} cached of ${counts.prompt_tokens ?? 'no'} prompt tokens`,
      ],
      estimate,
    );
  return {
    inputTokens: countOrEstimate(counts.prompt_tokens, estimate.inputTokens),
    outputTokens: countOrEstimate(counts.completion_tokens, estimate.outputTokens),
    ...(cached > 0 ? { cacheReadTokens: cached } : {}),
  };
}
