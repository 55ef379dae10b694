/**
 * A recorded run's conversation and event log, read back as data: `transcript.json` and
 * `events.jsonl` of a run folder, parsed against a schema, never through a link and never past
 * a size cap. What `export` folds into other formats and what an eval trial seeded from a
 * recorded run starts from.
 */
import { z } from 'zod';
import type { HarnessEvent } from '../agent/events.js';
import { ConfigError } from '../errors.js';
import type { TranscriptEntry } from './atif.js';
import { readRunFile, type StoredRun } from './record.js';

const block = z.union([
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: z.unknown() }),
  z.object({
    type: z.literal('tool_result'),
    toolUseId: z.string(),
    content: z.string(),
    isError: z.boolean(),
  }),
]);
const message = z.object({ role: z.enum(['user', 'assistant']), content: z.array(block) });
const transcriptSchema = z.array(
  z.object({
    attempt: z.number().int().nonnegative(),
    role: z.string().max(64),
    system: z.string(),
    messages: z.array(message),
    seededMessages: z.number().int().nonnegative().optional(),
    delegations: z
      .array(
        z.object({
          toolUseId: z.string(),
          status: z.string(),
          turns: z.number().int().nonnegative(),
          messages: z.array(message),
        }),
      )
      .optional(),
  }),
);
const eventSchema = z
  .object({
    time: z.string(),
    kind: z.string(),
    attempt: z.number().optional(),
    turn: z.number().optional(),
    model: z.string().optional(),
    agent: z.string().optional(),
    tool: z.string().optional(),
    toolUseId: z.string().optional(),
    durationMs: z.number().nonnegative().optional(),
    isError: z.boolean().optional(),
    stopReason: z.string().optional(),
    tokens: z
      .object({
        input: z.number().int().nonnegative(),
        output: z.number().int().nonnegative(),
        cacheRead: z.number().int().nonnegative().optional(),
        cacheWrite: z.number().int().nonnegative().optional(),
      })
      .optional(),
  })
  .loose();

export interface Trajectory {
  transcript: TranscriptEntry[];
  events: HarnessEvent[];
}

/** The run's transcript; a run without one (still going, cut short) or with a foreign one is named. */
export async function readTranscript(run: StoredRun, maxBytes?: number): Promise<TranscriptEntry[]> {
  const text = await readRunFile(run, 'transcript.json', maxBytes);
  if (text === undefined) {
    throw new ConfigError(
      `run ${run.record.id} has no transcript.json (a run still going, or one that was cut short)`,
    );
  }
  try {
    return transcriptSchema.parse(JSON.parse(text)) as TranscriptEntry[];
  } catch (error) {
    throw new ConfigError(
      `run ${run.record.id}: transcript.json is not a transcript sandbox-harness wrote (${(error as Error).message.split('\n')[0]})`,
    );
  }
}

/** The run's event log; lines that do not parse (a torn last line of a killed run) are skipped. */
export async function readEvents(run: StoredRun): Promise<HarnessEvent[]> {
  const events: HarnessEvent[] = [];
  for (const line of ((await readRunFile(run, 'events.jsonl')) ?? '').split('\n')) {
    if (!line.trim()) continue;
    try {
      const parsed = eventSchema.safeParse(JSON.parse(line));
      if (parsed.success) events.push(parsed.data as HarnessEvent);
    } catch {
      // A torn last line (the process was killed mid-write) is skipped.
    }
  }
  return events;
}

export async function readTrajectory(run: StoredRun): Promise<Trajectory> {
  return { transcript: await readTranscript(run), events: await readEvents(run) };
}
