/**
 * A run seeded from a recorded trajectory (an eval task's `seedRun`): like `fix --continue`
 * (the earlier run's last patch replayed into the first attempt's fresh sandbox, its feedback
 * given, attempts numbered on), and the earlier run's last implementer conversation starts the
 * first attempt's history, so the model goes on from those messages rather than from scratch.
 *
 * The earlier run is data. Its record is validated, its transcript is read without following
 * links and under a cap, and the conversation is made well-formed before any model sees it:
 * a tool result answers a call of the message just before it or is dropped, a call without a
 * result gets one that says it never ran, so a planted transcript cannot make a model API
 * refuse every call of the trial (or pass a "result" the harness never produced as its own).
 */
import { basename, dirname, resolve } from 'node:path';
import { ConfigError } from '../errors.js';
import type { Message, ToolResultBlock } from '../llm/types.js';
import { resolveRun } from '../runs/record.js';
import { readTranscript } from '../runs/trajectory.js';
import { loadContinuation, type Continuation } from './continue.js';

/** A seed conversation longer than this is not a trajectory to start from but an attack on the context. */
export const MAX_SEED_MESSAGES = 1000;
export const MAX_SEED_CHARS = 4 * 1024 * 1024;
const MAX_SEED_TRANSCRIPT_BYTES = 16 * 1024 * 1024;

const NEVER_RAN = 'This tool call never ran: the recorded run ended before its result.';

/**
 * The recorded messages as a conversation a model API accepts: it starts with the user, every
 * tool call is answered in the next message, and no result answers a call that was not made.
 */
export function wellFormedSeed(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (message.role === 'assistant') {
      if (out.length === 0) continue; // a conversation starts with the user
      out.push({ role: 'assistant', content: [...message.content] });
      const calls = message.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
      if (calls.length === 0) continue;
      const next = messages[i + 1];
      const given = new Map(
        (next?.role === 'user' ? next.content : []).flatMap((b) =>
          b.type === 'tool_result' ? [[b.toolUseId, b] as const] : [],
        ),
      );
      const results: ToolResultBlock[] = calls.map(
        (id) => given.get(id) ?? { type: 'tool_result', toolUseId: id, content: NEVER_RAN, isError: true },
      );
      const rest = next?.role === 'user' ? next.content.filter((b) => b.type === 'text') : [];
      out.push({ role: 'user', content: [...results, ...rest] });
      if (next?.role === 'user') i++;
      continue;
    }
    // A user message: its tool results answered nothing just before it (answered ones were taken above).
    const content = message.content.filter((b) => b.type === 'text');
    if (content.length === 0) continue;
    const last = out[out.length - 1];
    if (last?.role === 'user') last.content.push(...content);
    else out.push({ role: 'user', content: [...content] });
  }
  return out;
}

function sizeOf(messages: readonly Message[]): number {
  let chars = 0;
  for (const message of messages)
    for (const block of message.content)
      chars +=
        block.type === 'text'
          ? block.text.length
          : block.type === 'tool_result'
            ? block.content.length
            : JSON.stringify(block.input ?? null).length;
  return chars;
}

/**
 * The continuation of the run in folder `runDir` onto `repoDir`, with its last implementer
 * conversation as `messages`.
 */
export async function loadSeed(runDir: string, repoDir: string): Promise<Continuation> {
  const folder = resolve(runDir);
  const continuation = await loadContinuation(dirname(folder), basename(folder), repoDir);
  const run = await resolveRun(dirname(folder), basename(folder));
  if (run.record.id !== basename(folder)) {
    throw new ConfigError(`seed run ${runDir}: its record is run ${run.record.id}, not the folder's`);
  }
  const transcript = await readTranscript(run, MAX_SEED_TRANSCRIPT_BYTES);
  const entry = [...transcript].reverse().find((e) => e.role !== 'checker');
  const messages = wellFormedSeed(entry?.messages ?? []);
  if (messages.length > MAX_SEED_MESSAGES || sizeOf(messages) > MAX_SEED_CHARS) {
    throw new ConfigError(
      `seed run ${runDir}: its last conversation is over ${MAX_SEED_MESSAGES} messages or ${MAX_SEED_CHARS} characters; it was not used`,
    );
  }
  return { ...continuation, messages };
}
