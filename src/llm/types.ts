/**
 * Neutral model types. The agent loop, the cassette format and the tests speak only these;
 * each provider adapter translates them to and from its wire format. Nothing here knows
 * about a particular SDK.
 */

export interface TextBlock {
  type: 'text';
  text: string;
}

export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  /**
   * What the model sent. Usually a JSON object; `unknown` because it is untrusted data (an
   * OpenAI-compatible server can send arguments that are not even valid JSON, kept as the
   * raw string so the tool's validation error can quote it back to the model).
   */
  input: unknown;
}

export interface ToolResultBlock {
  type: 'tool_result';
  toolUseId: string;
  content: string;
  isError: boolean;
}

export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock;
export type UserContent = TextBlock | ToolResultBlock;
export type AssistantContent = TextBlock | ToolUseBlock;

export interface UserMessage {
  role: 'user';
  content: UserContent[];
}

export interface AssistantMessage {
  role: 'assistant';
  content: AssistantContent[];
}

export type Message = UserMessage | AssistantMessage;

/** A JSON Schema object describing a tool's input. */
export type JsonSchema = Record<string, unknown>;

export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: JsonSchema;
}

export interface CompletionRequest {
  system: string;
  messages: Message[];
  tools: ToolDefinition[];
  maxTokens: number;
  signal?: AbortSignal;
  /**
   * Told of every answer refused for impossible token counts (retried or not): the harness's
   * own estimate of that call, and the model asked. The cost meter counts it (see `usage.ts`).
   */
  onRefusedUsage?: (usage: Usage, model: string) => void;
}

export type StopReason = 'tool_use' | 'end_turn' | 'max_tokens' | 'other';

export interface Usage {
  /** Every prompt token, cached or not (what counts towards the context window). */
  inputTokens: number;
  outputTokens: number;
  /** Of `inputTokens`, those served from the provider's prompt cache (when it says). */
  cacheReadTokens?: number | undefined;
  /** Of `inputTokens`, those written to the provider's prompt cache (when it says). */
  cacheWriteTokens?: number | undefined;
}

export interface Completion {
  content: AssistantContent[];
  stopReason: StopReason;
  usage: Usage;
  /** The model that answered, as the provider reports it. */
  model: string;
}

export interface ModelProvider {
  readonly name: string;
  readonly model: string;
  complete(request: CompletionRequest): Promise<Completion>;
  /** Input tokens the request would use; an estimate where the API has no counting endpoint. */
  countTokens(request: CompletionRequest): Promise<number>;
}

/**
 * Who is calling the model within one run: the main agent, a sub-agent it delegated to, or
 * an independent checker. A cassette keeps one queue of turns per role, and `--record`
 * writes each role's calls to its own queue, so a replay does not depend on how the roles'
 * calls interleaved.
 */
export const MODEL_ROLES = ['main', 'delegate', 'checker'] as const;
export type ModelRole = (typeof MODEL_ROLES)[number];
