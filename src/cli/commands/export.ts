/**
 * `export <run> --format atif`: a run's trajectory in a format other tools read. The run's
 * files are data: the transcript and the event log are parsed against a schema, and a file
 * that is missing, linked or torn is named rather than half-exported.
 */
import { resolve } from 'node:path';
import { z } from 'zod';
import type { HarnessEvent } from '../../agent/events.js';
import { writeFileAtomic } from '../../atomic-write.js';
import { ConfigError, UsageError } from '../../errors.js';
import { runToAtif, type TranscriptEntry } from '../../runs/atif.js';
import { readRunFile, resolveRun } from '../../runs/record.js';
import { print, type CliContext } from '../context.js';
import { runsDirOf, type RunsLocation } from './runs.js';

export const EXPORT_FORMATS = ['atif'] as const;

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

export async function exportCommand(
  ctx: CliContext,
  ref: string,
  options: RunsLocation & { format?: string; out?: string },
): Promise<number> {
  const format = options.format ?? 'atif';
  if (!(EXPORT_FORMATS as readonly string[]).includes(format)) {
    throw new UsageError(`--format: expected one of ${EXPORT_FORMATS.join(', ')}, got "${format}"`);
  }
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const transcriptText = await readRunFile(run, 'transcript.json');
  if (transcriptText === undefined) {
    throw new ConfigError(
      `run ${run.record.id} has no transcript.json (a run still going, or one that was cut short)`,
    );
  }
  let transcript: TranscriptEntry[];
  try {
    transcript = transcriptSchema.parse(JSON.parse(transcriptText)) as TranscriptEntry[];
  } catch (error) {
    throw new ConfigError(
      `run ${run.record.id}: transcript.json is not a transcript sandbox-harness wrote (${(error as Error).message.split('\n')[0]})`,
    );
  }
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
  const text = `${JSON.stringify(runToAtif(run.record, transcript, events), null, 2)}\n`;
  if (options.out) {
    const file = resolve(ctx.cwd, options.out);
    await writeFileAtomic(file, text);
    print(ctx, `wrote ${file} (${format})`);
  } else {
    ctx.stdout.write(text);
  }
  return 0;
}
