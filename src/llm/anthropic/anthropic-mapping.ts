/**
 * Pure translations between our neutral types and the Anthropic Messages API. Kept apart
 * from the client so they can be tested against recorded responses without a network.
 * Type-only imports: the SDK itself is loaded only when this provider is chosen.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { countOrEstimate, estimatedUsage, reportedCounts, summedCount, usageObject } from '../usage.js';
import type {
  AssistantContent,
  Completion,
  CompletionRequest,
  Message,
  StopReason,
  ToolDefinition,
} from '../types.js';

export function mapAnthropicStopReason(reason: string | null | undefined): StopReason {
  switch (reason) {
    case 'tool_use':
      return 'tool_use';
    case 'end_turn':
    case 'stop_sequence':
      return 'end_turn';
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'max_tokens';
    default:
      // pause_turn, refusal, null and whatever a later API version adds.
      return 'other';
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function toAnthropicMessages(messages: readonly Message[]): Anthropic.MessageParam[] {
  return messages.map((message): Anthropic.MessageParam => {
    const content: Anthropic.ContentBlockParam[] = [];
    for (const block of message.content) {
      switch (block.type) {
        case 'text':
          // The API rejects empty text blocks; they carry nothing anyway.
          if (block.text !== '') content.push({ type: 'text', text: block.text });
          break;
        case 'tool_use':
          // Anthropic requires an object; a non-object can only come from another
          // provider's transcript, so it is wrapped rather than lost.
          content.push({
            type: 'tool_use',
            id: block.id,
            name: block.name,
            input: isPlainObject(block.input) ? block.input : { value: block.input },
          });
          break;
        case 'tool_result':
          content.push({
            type: 'tool_result',
            tool_use_id: block.toolUseId,
            content: block.content === '' ? '(no output)' : block.content,
            is_error: block.isError,
          });
          break;
      }
    }
    if (content.length === 0) content.push({ type: 'text', text: '(empty)' });
    return { role: message.role, content };
  });
}

export function toAnthropicTools(tools: readonly ToolDefinition[]): Anthropic.Tool[] {
  return tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    input_schema: { type: 'object', ...tool.inputSchema } as Anthropic.Tool.InputSchema,
  }));
}

export function toAnthropicRequest(
  request: CompletionRequest,
  model: string,
): Anthropic.MessageCreateParamsNonStreaming {
  const body: Anthropic.MessageCreateParamsNonStreaming = {
    model,
    max_tokens: request.maxTokens,
    messages: toAnthropicMessages(request.messages),
  };
  if (request.system !== '') body.system = request.system;
  if (request.tools.length > 0) body.tools = toAnthropicTools(request.tools);
  return body;
}

export interface FromAnthropicOptions {
  /** The harness's estimate of the request's tokens: what a count the server leaves out becomes. */
  estimatedInputTokens?: number;
}

/**
 * Maps a Messages API response. Block types we do not use (thinking, server tools) are
 * dropped. Token counts are checked (`usage.ts`): an impossible one refuses the answer.
 */
export function fromAnthropicResponse(
  response: Anthropic.Message,
  options: FromAnthropicOptions = {},
): Completion {
  const content: AssistantContent[] = [];
  for (const block of response.content as Array<{ type: string } & Record<string, any>>) {
    if (block.type === 'text' && typeof block['text'] === 'string') {
      content.push({ type: 'text', text: block['text'] });
    } else if (block.type === 'tool_use') {
      content.push({
        type: 'tool_use',
        id: String(block['id']),
        name: String(block['name']),
        input: block['input'] ?? {},
      });
    }
  }
  const estimate = estimatedUsage(options.estimatedInputTokens ?? 0, content);
  const usage = usageObject('anthropic', (response as { usage?: unknown }).usage, estimate);
  const counts = reportedCounts(
    'anthropic',
    {
      input_tokens: usage['input_tokens'],
      output_tokens: usage['output_tokens'],
      cache_creation_input_tokens: usage['cache_creation_input_tokens'],
      cache_read_input_tokens: usage['cache_read_input_tokens'],
    },
    estimate,
  );
  const cacheWrite = counts.cache_creation_input_tokens ?? 0;
  const cacheRead = counts.cache_read_input_tokens ?? 0;
  // Cached prompt tokens are still prompt tokens: they count towards the context window.
  const input =
    counts.input_tokens === undefined
      ? undefined
      : summedCount(
          'anthropic',
          'input tokens with cache',
          [counts.input_tokens, cacheWrite, cacheRead],
          estimate,
        );
  return {
    content,
    stopReason: mapAnthropicStopReason(response.stop_reason),
    usage: {
      inputTokens: countOrEstimate(input, estimate.inputTokens),
      outputTokens: countOrEstimate(counts.output_tokens, estimate.outputTokens),
      // Priced apart from fresh prompt tokens (see llm/cost.ts).
      ...(cacheRead ? { cacheReadTokens: cacheRead } : {}),
      ...(cacheWrite ? { cacheWriteTokens: cacheWrite } : {}),
    },
    // A model name is a string; anything else a server sends there names no model.
    model: typeof response.model === 'string' ? response.model : '',
  };
}
