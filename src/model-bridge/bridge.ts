/**
 * The host side of the model bridge: one request from the sandbox's relay in, one answer
 * out. Each request is checked (checks.ts), stopped at the run's budgets, sent upstream with
 * the real credentials (upstream.ts, or a recording: bridge-replay.ts), metered as its answer
 * streams back (bridge-usage.ts) and recorded (transcript.ts). A refusal is an answer the agent
 * reads in its API's error shape; `stopReason` tells the harness which budget stopped it.
 *
 * `exchange` never throws: whatever the sandbox sends or the provider does, the agent gets
 * an answer (or a broken stream) and the host goes on.
 */
import { ConfigError, errorMessage } from '../errors.js';
import { priceFor, type CostMeter } from '../llm/cost.js';
import type { Usage } from '../llm/types.js';
import {
  budgetRefusal,
  checkRequest,
  errorBody,
  type BridgePolicy,
  type CheckedRequest,
  type RelayedRequest,
  type Refusal,
} from './checks.js';
import { ReplayMismatch } from './bridge-replay.js';
import type { BridgeExchange, TranscriptSink } from './transcript.js';
import { UsageMeter } from './bridge-usage.js';
import { fromChunks, type Upstream, type UpstreamResponse } from './upstream.js';
import { RELAY_DEFAULTS } from './relay.js';

/** What stops further model calls; the words are the loop's (outcomes.ts). */
export type BridgeStop = NonNullable<Refusal['stop']>;

/**
 * The run's budget as the bridge needs it: asked before each call, told after. The agent
 * loop's `LoopBudget` fits, so a third-party agent draws on the same limits as the built-in one.
 */
export interface BridgeBudget {
  exhausted(): BridgeStop | undefined;
  spend(usage: Usage): void;
}

/** A token (and call) budget for a bridge used on its own. */
export class TokenBudget implements BridgeBudget {
  calls = 0;
  readonly usage: Usage = { inputTokens: 0, outputTokens: 0 };

  constructor(private readonly limits: { maxTokens?: number; maxCalls?: number }) {}

  exhausted(): BridgeStop | undefined {
    if (this.limits.maxCalls !== undefined && this.calls >= this.limits.maxCalls) return 'max-turns';
    const spent = this.usage.inputTokens + this.usage.outputTokens;
    if (this.limits.maxTokens !== undefined && spent >= this.limits.maxTokens) return 'token-budget';
    return undefined;
  }

  spend(usage: Usage): void {
    this.calls += 1;
    this.usage.inputTokens += usage.inputTokens;
    this.usage.outputTokens += usage.outputTokens;
  }
}

/** The answer the relay plays back to the agent. */
export interface BridgeAnswer {
  status: number;
  headers: [string, string][];
  body: AsyncIterable<Buffer>;
}

export interface ModelBridgeOptions {
  upstream: Upstream;
  /** Model names the agent may ask for, exactly. */
  allowedModels: readonly string[];
  /** Largest request body (default 16 MiB). */
  maxRequestBytes?: number;
  budget?: BridgeBudget;
  /** Prices each answered call (role `main`); with a limit, a spent limit stops calls (`budget`). */
  costs?: CostMeter;
  transcript?: TranscriptSink;
  /** Bytes of each answer (and request body) kept in the transcript (default 16 MiB). */
  maxRecordBytes?: number;
  /** What went wrong on the host's side (a provider failure, a replay mismatch, a broken relay), as it happens. */
  onProblem?: (message: string) => void;
  now?: () => number;
}

const CONTENT_TYPE = /^[\w.+-]+\/[\w.+-]+(\s*;\s*[\w-]+=[\w.+-]+)*$/;
const JSON_HEADERS: [string, string][] = [['content-type', 'application/json']];

/** Keeps the first `cap` bytes of a stream. */
class Kept {
  private readonly chunks: Buffer[] = [];
  bytes = 0;
  truncated = false;
  constructor(private readonly cap: number) {}
  push(chunk: Buffer): void {
    const room = this.cap - Math.min(this.bytes, this.cap);
    if (chunk.length > room) this.truncated = true;
    if (room > 0) this.chunks.push(chunk.subarray(0, room));
    this.bytes += chunk.length;
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

export class ModelBridge {
  /** The budget that stopped the agent's model calls, once one did. */
  stopReason: BridgeStop | undefined;
  /** Host-side problems, in order (also given to `onProblem`). */
  readonly problems: string[] = [];
  private seq = 0;
  private readonly policy: BridgePolicy;
  private readonly maxRecordBytes: number;
  private readonly now: () => number;

  constructor(private readonly options: ModelBridgeOptions) {
    if (options.allowedModels.length === 0)
      throw new ConfigError('the model bridge needs at least one allowed model');
    const costs = options.costs;
    if (costs?.limitUsd !== undefined) {
      // A limit that cannot be enforced is no limit: every model the agent may use needs a price.
      const unpriced = options.allowedModels.filter((model) => !priceFor(model, costs.table));
      if (unpriced.length > 0) {
        throw new ConfigError(
          `a cost limit is set, but ${unpriced.map((m) => JSON.stringify(m)).join(', ')} has no price: add it to the catalog's agent.prices`,
        );
      }
    }
    this.policy = {
      allowedModels: options.allowedModels,
      maxRequestBytes: options.maxRequestBytes ?? RELAY_DEFAULTS.maxRequestBytes,
      families: options.upstream.families,
    };
    this.maxRecordBytes = options.maxRecordBytes ?? 16 * 1024 * 1024;
    this.now = options.now ?? Date.now;
  }

  /** Largest request body the bridge takes. */
  get maxRequestBytes(): number {
    return this.policy.maxRequestBytes;
  }

  problem(message: string): void {
    this.problems.push(message);
    this.options.onProblem?.(message);
  }

  /** Answers one relayed request. Never throws. */
  async exchange(request: RelayedRequest, signal: AbortSignal): Promise<BridgeAnswer> {
    const started = this.now();
    const record: BridgeExchange = {
      seq: ++this.seq,
      startedAt: new Date(started).toISOString(),
      durationMs: 0,
      method: request.method.slice(0, 16),
      path: request.path.slice(0, 4096),
      outcome: 'refused',
      request: { bytes: request.body.length },
      response: { status: 0, bytes: 0, text: '' },
    };
    const checked = checkRequest(request, this.policy);
    if (!checked.ok) return this.refuse(record, started, checked.refusal);
    const call = checked.request;
    Object.assign(record, { api: call.api, model: call.model, stream: call.stream, path: call.path });
    if (call.body.length <= this.maxRecordBytes) record.request.body = call.json;
    const stop = this.options.budget?.exhausted() ?? (this.options.costs?.exceeded() ? 'budget' : undefined);
    if (stop) {
      this.stopReason ??= stop;
      return this.refuse(record, started, budgetRefusal(stop));
    }
    let answer: UpstreamResponse;
    try {
      answer = await this.options.upstream.send(call, signal);
    } catch (error) {
      return this.failed(record, started, call, error, signal);
    }
    const contentType =
      answer.contentType && CONTENT_TYPE.test(answer.contentType)
        ? answer.contentType
        : 'application/octet-stream';
    const body = this.metered(record, started, call, answer, contentType, signal);
    // Primed: from here its record is written however the answer ends, even unread.
    await body.next();
    return { status: answer.status, headers: [['content-type', contentType], ...answer.headers], body };
  }

  private refuse(record: BridgeExchange, started: number, refusal: Refusal): BridgeAnswer {
    const body = errorBody(refusal.errorType, refusal.message);
    record.outcome = 'refused';
    record.refusal = { kind: refusal.kind, message: refusal.message };
    record.response = {
      status: refusal.status,
      contentType: 'application/json',
      bytes: body.length,
      text: body.toString(),
    };
    this.finish(record, started);
    return { status: refusal.status, headers: JSON_HEADERS, body: fromChunks([body]) };
  }

  private failed(
    record: BridgeExchange,
    started: number,
    call: CheckedRequest,
    error: unknown,
    signal: AbortSignal,
  ): BridgeAnswer {
    const mismatch = error instanceof ReplayMismatch;
    // The agent sees why only for a replay (its own recording); a provider's failure may name
    // the provider's address or worse, so it stays on the host.
    const shown = mismatch
      ? `sandbox-harness: replay mismatch: ${error.message}`
      : 'sandbox-harness: the model provider could not be reached or failed; see the harness log';
    const body = errorBody('api_error', shown);
    record.outcome = signal.aborted ? 'cancelled' : 'failed';
    record.error = errorMessage(error);
    record.response = {
      status: 502,
      contentType: 'application/json',
      bytes: body.length,
      text: body.toString(),
    };
    if (!signal.aborted) {
      this.problem(
        mismatch
          ? `replay mismatch: ${record.error}`
          : `model call ${record.seq} (${call.api} ${call.model}): ${record.error}`,
      );
    }
    this.finish(record, started);
    return { status: 502, headers: JSON_HEADERS, body: fromChunks([body]) };
  }

  /**
   * The answer's bytes as they arrive, metered and kept; the record is written when it ends.
   * Its first step yields nothing, so that once primed it sits inside the `try` and a
   * `return()` at any point (the agent left, the bridge closed) still finishes the record.
   */
  private async *metered(
    record: BridgeExchange,
    started: number,
    call: CheckedRequest,
    answer: UpstreamResponse,
    contentType: string,
    signal: AbortSignal,
  ): AsyncGenerator<Buffer> {
    const meter = new UsageMeter(call.api, contentType);
    const kept = new Kept(this.maxRecordBytes);
    let ended = false;
    try {
      yield Buffer.alloc(0);
      for await (const chunk of answer.body) {
        const bytes = Buffer.isBuffer(chunk)
          ? chunk
          : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
        record.firstByteMs ??= this.now() - started;
        meter.push(bytes);
        kept.push(bytes);
        yield bytes;
      }
      ended = true;
      // An answer that ended because its call was cut is not a whole answer.
      record.outcome = signal.aborted ? 'cancelled' : 'answered';
    } catch (error) {
      record.outcome = 'failed';
      record.error = errorMessage(error);
      this.problem(`model call ${record.seq} (${call.api} ${call.model}) broke midway: ${record.error}`);
      throw error;
    } finally {
      if (!ended && record.outcome !== 'failed') record.outcome = 'cancelled';
      record.response = {
        status: answer.status,
        contentType,
        bytes: kept.bytes,
        text: kept.text(),
        ...(kept.truncated ? { truncated: true as const } : {}),
      };
      // Only an answered call costs anything; an error status is the provider refusing.
      if (answer.status >= 200 && answer.status < 300 && call.api !== 'anthropic-count-tokens') {
        const usage = meter.finish(call.body.length);
        record.usage = usage;
        const tokens: Usage = {
          inputTokens: usage.inputTokens,
          outputTokens: usage.outputTokens,
          cacheReadTokens: usage.cacheReadTokens,
          cacheWriteTokens: usage.cacheWriteTokens,
        };
        this.options.budget?.spend(tokens);
        const cost = this.options.costs?.add('main', call.model, tokens);
        if (cost !== undefined) record.costUsd = cost;
      }
      this.finish(record, started);
    }
  }

  /**
   * Records an exchange. Not awaited: the agent's answer never waits for the disk (the
   * transcript keeps its own order; `FileTranscript.close` waits for every line).
   */
  private finish(record: BridgeExchange, started: number): void {
    record.durationMs = this.now() - started;
    const written = (async () => this.options.transcript?.add(record))();
    written.catch((error: unknown) =>
      this.problem(`the bridge transcript could not be written: ${errorMessage(error)}`),
    );
  }
}
