/**
 * Tokens of one model call, read from the provider's answer as it streams past: the usage
 * object of a JSON answer, or the usage events of a server-sent event stream (Anthropic's
 * `message_start` / `message_delta`, OpenAI's last chat chunk, the Responses API's
 * `response.completed`). Each number must be a finite, non-negative count under a cap; an
 * answer whose usage is missing or refused is counted by the bridge itself from the bytes
 * that went each way (about four characters a token, which over-counts JSON: a budget errs
 * on the side of stopping).
 */
import type { Usage } from '../llm/types.js';
import type { ApiKind } from './checks.js';

/** Larger than any real call; a bigger number is a broken or hostile answer, not usage. */
export const MAX_TOKENS_PER_CALL = 10_000_000;
/** Longest event (or JSON answer) parsed for usage; a longer one is passed on unread. */
const MAX_PARSED_BYTES = 8 * 1024 * 1024;

export interface MeteredUsage extends Usage {
  /** `reported`: the provider's numbers; `estimated`: the bridge counted (missing or refused). */
  source: 'reported' | 'estimated';
}

/** The harness's rough estimate (llm/tokens.ts: about four characters a token), from a byte count. */
function estimateFromBytes(bytes: number): number {
  return Math.min(MAX_TOKENS_PER_CALL, Math.ceil(bytes / 4));
}

/** A token count, or undefined when the value is not one (absent, negative, fractional junk, huge). */
export function tokenCount(value: unknown): number | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_TOKENS_PER_CALL) {
    return undefined;
  }
  return Math.floor(value);
}

/** The fields an answer reported, each already validated; `bad` once any present one was refused. */
interface Reported {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
  bad: boolean;
}

function take(into: Reported, field: Exclude<keyof Reported, 'bad'>, value: unknown): void {
  if (value === undefined || value === null) return;
  const count = tokenCount(value);
  if (count === undefined) into.bad = true;
  else into[field] = count;
}

const asObject = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;

/** Anthropic's usage object: fresh input, cache writes and cache reads are separate counts. */
function anthropicUsage(into: Reported, usage: Record<string, unknown>): void {
  take(into, 'input', usage.input_tokens);
  take(into, 'output', usage.output_tokens);
  take(into, 'cacheWrite', usage.cache_creation_input_tokens);
  take(into, 'cacheRead', usage.cache_read_input_tokens);
}

/** OpenAI's usage (chat: prompt/completion; Responses: input/output), cached tokens inside input. */
function openaiUsage(into: Reported, usage: Record<string, unknown>): void {
  take(into, 'input', usage.input_tokens ?? usage.prompt_tokens);
  take(into, 'output', usage.output_tokens ?? usage.completion_tokens);
  const details = asObject(usage.input_tokens_details) ?? asObject(usage.prompt_tokens_details);
  if (details) take(into, 'cacheRead', details.cached_tokens);
}

/** Usage found in one parsed JSON value (a whole answer, or one event's data). */
function usageIn(api: ApiKind, value: unknown, into: Reported): void {
  const object = asObject(value);
  if (!object) return;
  if (api === 'anthropic-messages') {
    // A JSON answer has `usage`; a stream has it in message_start's message and in message_delta.
    const usage = asObject(object.usage) ?? asObject(asObject(object.message)?.usage);
    if (usage) anthropicUsage(into, usage);
    return;
  }
  if (api === 'openai-chat') {
    const usage = asObject(object.usage);
    if (usage) openaiUsage(into, usage);
    return;
  }
  if (api === 'openai-responses') {
    // A JSON answer is the response itself; a stream's final event carries it as `response`.
    const usage = asObject(object.usage) ?? asObject(asObject(object.response)?.usage);
    if (usage) openaiUsage(into, usage);
  }
}

/**
 * Watches one answer's bytes (pass every chunk to `push`) and gives its usage at the end.
 * Memory is bounded: one event (or one JSON answer) at a time, under a cap.
 */
export class UsageMeter {
  private readonly reported: Reported = { bad: false };
  private responseBytes = 0;
  private readonly sse: boolean;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The current event or answer grew past the cap: skip to its end. */
  private skipping = false;

  constructor(
    private readonly api: ApiKind,
    contentType: string | undefined,
  ) {
    this.sse = (contentType ?? '').toLowerCase().startsWith('text/event-stream');
  }

  push(chunk: Buffer): void {
    this.responseBytes += chunk.length;
    if (this.api === 'anthropic-count-tokens') return;
    if (!this.sse) {
      this.hold(chunk);
      return;
    }
    // Events end at a blank line; the data lines of each are parsed as they complete.
    let at = 0;
    for (;;) {
      const newline = chunk.indexOf(10, at);
      if (newline < 0) {
        this.hold(chunk.subarray(at));
        return;
      }
      this.hold(chunk.subarray(at, newline));
      this.line(this.take());
      at = newline + 1;
    }
  }

  private hold(piece: Buffer): void {
    if (this.skipping || piece.length === 0) return;
    if (this.pendingBytes + piece.length > MAX_PARSED_BYTES) {
      this.skipping = true;
      this.pending = [];
      this.pendingBytes = 0;
      return;
    }
    this.pending.push(piece);
    this.pendingBytes += piece.length;
  }

  private take(): string | undefined {
    const skipped = this.skipping;
    const text = Buffer.concat(this.pending, this.pendingBytes).toString('utf8');
    this.pending = [];
    this.pendingBytes = 0;
    this.skipping = false;
    return skipped ? undefined : text;
  }

  private line(text: string | undefined): void {
    if (text === undefined) return;
    const trimmed = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (!trimmed.startsWith('data:')) return;
    const data = trimmed.slice(5).trim();
    if (data === '' || data === '[DONE]') return;
    this.parse(data);
  }

  private parse(text: string): void {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return;
    }
    usageIn(this.api, value, this.reported);
  }

  /**
   * The call's usage. `requestBytes` is what was sent (for the estimate); the answer's bytes
   * were counted as they passed.
   */
  finish(requestBytes: number): MeteredUsage {
    if (!this.sse && this.api !== 'anthropic-count-tokens') {
      const text = this.take();
      if (text !== undefined && text !== '') this.parse(text);
    }
    if (this.api === 'anthropic-count-tokens') {
      // Counting tokens generates nothing and costs nothing.
      return { inputTokens: 0, outputTokens: 0, source: 'reported' };
    }
    const r = this.reported;
    if (!r.bad && r.input !== undefined && r.output !== undefined) {
      const anthropic = this.api === 'anthropic-messages';
      // Anthropic counts cache reads and writes apart from input; ours counts every prompt token.
      const inputTokens = anthropic ? r.input + (r.cacheRead ?? 0) + (r.cacheWrite ?? 0) : r.input;
      const cacheRead = Math.min(r.cacheRead ?? 0, inputTokens);
      const cacheWrite = anthropic ? Math.min(r.cacheWrite ?? 0, inputTokens - cacheRead) : 0;
      return {
        inputTokens,
        outputTokens: r.output,
        ...(cacheRead > 0 ? { cacheReadTokens: cacheRead } : {}),
        ...(cacheWrite > 0 ? { cacheWriteTokens: cacheWrite } : {}),
        source: 'reported',
      };
    }
    return {
      inputTokens: estimateFromBytes(requestBytes),
      outputTokens: estimateFromBytes(this.responseBytes),
      source: 'estimated',
    };
  }
}
