/**
 * The bridge's record of every exchange, one JSON line each: what the agent asked (the
 * request body), what it got (status and the answer's text, server-sent events as they
 * came), when, how long, and the tokens and cost counted. It is the transcript of a
 * third-party agent's run (for `logs`, the viewer, exports and cost), and it replays offline
 * (bridge-replay.ts). It never holds a header: the key lives only in headers the bridge built.
 *
 * The file is created new (never over an existing file or through a link) and appended to
 * line by line, so a crash loses at most the exchange in progress.
 */
import { constants } from 'node:fs';
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import type { ApiKind, RefusalKind } from './checks.js';
import type { MeteredUsage } from './bridge-usage.js';

/** How an exchange ended. */
export type ExchangeOutcome = 'answered' | 'refused' | 'failed' | 'cancelled';

export interface BridgeExchange {
  /** 1, 2, ... in the order requests arrived. */
  seq: number;
  /** ISO time the request arrived. */
  startedAt: string;
  durationMs: number;
  /** Until the answer's first byte reached the bridge. */
  firstByteMs?: number;
  method: string;
  /** The canonical path for a known API; the sandbox's (cut) for anything else. */
  path: string;
  api?: ApiKind;
  model?: string;
  stream?: boolean;
  outcome: ExchangeOutcome;
  request: {
    bytes: number;
    /** The parsed body; absent when it was not JSON or was over the record cap. */
    body?: unknown;
  };
  response: {
    status: number;
    contentType?: string;
    bytes: number;
    /** The answer as text, as it came (JSON, or the event stream); cut at the record cap. */
    text: string;
    truncated?: true;
  };
  usage?: MeteredUsage;
  costUsd?: number;
  refusal?: { kind: RefusalKind; message: string };
  /** For `failed`: what went wrong, on the host's side (never shown to the agent). */
  error?: string;
}

const API_KINDS = [
  'anthropic-messages',
  'anthropic-count-tokens',
  'openai-chat',
  'openai-responses',
] as const;
const count = z.number().int().nonnegative();

export const exchangeSchema = z.object({
  seq: count,
  startedAt: z.string(),
  durationMs: z.number().nonnegative(),
  firstByteMs: z.number().nonnegative().optional(),
  method: z.string().max(16),
  path: z.string().max(4096),
  api: z.enum(API_KINDS).optional(),
  model: z.string().max(200).optional(),
  stream: z.boolean().optional(),
  outcome: z.enum(['answered', 'refused', 'failed', 'cancelled']),
  request: z.object({ bytes: count, body: z.unknown().optional() }),
  response: z.object({
    status: z.number().int().min(100).max(599),
    contentType: z.string().max(200).optional(),
    bytes: count,
    text: z.string(),
    truncated: z.literal(true).optional(),
  }),
  usage: z
    .object({
      inputTokens: count,
      outputTokens: count,
      cacheReadTokens: count.optional(),
      cacheWriteTokens: count.optional(),
      source: z.enum(['reported', 'estimated']),
    })
    .optional(),
  costUsd: z.number().nonnegative().optional(),
  refusal: z.object({ kind: z.string(), message: z.string() }).optional(),
  error: z.string().optional(),
});

/** Where exchanges go as they end. */
export interface TranscriptSink {
  add(exchange: BridgeExchange): void | Promise<void>;
}

/** Exchanges kept in memory (tests, and the bridge's own view of its run). */
export class MemoryTranscript implements TranscriptSink {
  readonly exchanges: BridgeExchange[] = [];
  add(exchange: BridgeExchange): void {
    this.exchanges.push(exchange);
  }
}

/** Exchanges appended to a JSONL file that did not exist before. */
export class FileTranscript implements TranscriptSink {
  private handle: Promise<FileHandle> | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(readonly path: string) {}

  add(exchange: BridgeExchange): Promise<void> {
    // O_EXCL and O_NOFOLLOW: never someone else's file, never through a link.
    this.handle ??= open(
      this.path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_APPEND,
      0o600,
    );
    const line = `${JSON.stringify(exchange)}\n`;
    this.queue = this.queue.then(async () => {
      await (await this.handle!).appendFile(line);
    });
    return this.queue;
  }

  async close(): Promise<void> {
    await this.queue.catch(() => undefined);
    await (await this.handle?.catch(() => undefined))?.close();
  }
}

/** Largest transcript file read back for a replay. */
const MAX_TRANSCRIPT_BYTES = 1024 * 1024 * 1024;

/** The exchanges of a transcript file, each checked; a broken line names its number. */
export async function readTranscript(path: string): Promise<BridgeExchange[]> {
  let text: string;
  try {
    const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const { size } = await handle.stat();
      if (size > MAX_TRANSCRIPT_BYTES) {
        throw new ConfigError(
          `${path}: ${size} bytes is over the ${MAX_TRANSCRIPT_BYTES}-byte limit of a transcript`,
        );
      }
      text = await readFile(handle, 'utf8');
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(`${path}: cannot read the bridge transcript (${(error as Error).message})`);
  }
  const exchanges: BridgeExchange[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new ConfigError(`${path}:${i + 1}: not a JSON line of a bridge transcript`);
    }
    const parsed = exchangeSchema.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ConfigError(
        `${path}:${i + 1}: ${issue?.path.join('.') || 'exchange'}: ${issue?.message ?? 'not an exchange'}`,
      );
    }
    exchanges.push(parsed.data as BridgeExchange);
  }
  return exchanges;
}
