/**
 * The `replay` provider: plays a recorded conversation (a "cassette") for offline demos
 * and deterministic tests.
 *
 * Cassette format, version 1 (stable: demos, tests and `fix --record` depend on it):
 *
 * ```json
 * {
 *   "version": 1,
 *   "model": "<label shown as the model name>",
 *   "turns": [
 *     {
 *       "content": [
 *         { "type": "text", "text": "Let me run the tests." },
 *         { "type": "tool_use", "id": "t1", "name": "run_command", "input": { "command": "npm test" } }
 *       ],
 *       "stopReason": "tool_use",
 *       "usage": { "inputTokens": 1200, "outputTokens": 40 }
 *     },
 *     { "content": [{ "type": "text", "text": "Done." }], "stopReason": "end_turn" }
 *   ]
 * }
 * ```
 *
 * - Each model call takes the next turn. The position lives in the provider object, so one
 *   cassette spans every attempt of a run; running out is a `ConfigError` naming the file
 *   and the turn that was asked for.
 * - `stopReason` is `tool_use` or `end_turn` (`max_tokens` and `other` are accepted too, so
 *   that a recorded session replays as it happened).
 * - `usage` is optional; without it, tokens are estimated from the request (deterministically).
 * - Tool names and inputs are those of the agent's tools (`read_file`, `write_file`,
 *   `edit_file`, `list_files`, `search`, `run_command`).
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ConfigError, Interrupted, errorMessage } from '../errors.js';
import { estimateRequestTokens, estimateTokensForText } from './tokens.js';
import type {
  AssistantContent,
  Completion,
  CompletionRequest,
  Message,
  ModelProvider,
  ToolDefinition,
} from './types.js';

export const CASSETTE_VERSION = 1;

const TextBlockSchema = z.strictObject({ type: z.literal('text'), text: z.string() });
const ToolUseBlockSchema = z.strictObject({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.unknown(),
});

export const CassetteTurnSchema = z.strictObject({
  content: z.array(z.discriminatedUnion('type', [TextBlockSchema, ToolUseBlockSchema])),
  stopReason: z.enum(['tool_use', 'end_turn', 'max_tokens', 'other']),
  usage: z
    .strictObject({
      inputTokens: z.number().int().nonnegative(),
      outputTokens: z.number().int().nonnegative(),
    })
    .optional(),
});

export const CassetteSchema = z.strictObject({
  version: z.literal(CASSETTE_VERSION),
  model: z.string(),
  turns: z.array(CassetteTurnSchema),
});

export type CassetteTurn = z.infer<typeof CassetteTurnSchema>;
export type Cassette = z.infer<typeof CassetteSchema>;

function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path)
    out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`;
  return out === '' ? '(top level)' : out;
}

function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let current = data;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Validates parsed JSON as a cassette; problems name the field (e.g. `turns[2].stopReason`). */
export function parseCassette(data: unknown, file: string): Cassette {
  const result = CassetteSchema.safeParse(data);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const found = valueAt(data, issue.path);
    const got = found === undefined ? '' : `, got ${JSON.stringify(found)?.slice(0, 60)}`;
    return `${issuePath(issue.path)}: ${issue.message}${got}`;
  });
  throw new ConfigError(`cassette ${file} is not a valid version-${CASSETTE_VERSION} cassette`, problems, {
    hint: 'a cassette looks like {"version": 1, "model": "...", "turns": [{"content": [...], "stopReason": "tool_use" | "end_turn"}]}',
  });
}

export async function loadCassette(file: string): Promise<Cassette> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read cassette ${file}: ${errorMessage(error)}`, [], { cause: error });
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`cassette ${file} is not valid JSON: ${errorMessage(error)}`, [], { cause: error });
  }
  return parseCassette(data, file);
}

/** What the replay provider saw: the request without its signal, copied at call time. */
export interface ReceivedRequest {
  system: string;
  messages: Message[];
  tools: ToolDefinition[];
  maxTokens: number;
}

export class ReplayProvider implements ModelProvider {
  readonly name = 'replay';
  readonly model: string;
  /** Every request received, in order, including one that found the cassette exhausted. */
  readonly requests: ReceivedRequest[] = [];
  private next = 0;

  constructor(
    private readonly cassette: Cassette,
    /** Named in errors; `<memory>` when the cassette did not come from a file. */
    readonly file: string = '<memory>',
  ) {
    this.model = cassette.model;
  }

  static async fromFile(file: string): Promise<ReplayProvider> {
    return new ReplayProvider(await loadCassette(file), file);
  }

  /** How many turns have been played. */
  get position(): number {
    return this.next;
  }

  get remaining(): number {
    return this.cassette.turns.length - this.next;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    if (request.signal?.aborted) throw new Interrupted('model call interrupted');
    this.requests.push(
      structuredClone({
        system: request.system,
        messages: request.messages,
        tools: request.tools,
        maxTokens: request.maxTokens,
      }),
    );
    const turnNumber = this.next + 1;
    const turn = this.cassette.turns[this.next];
    if (!turn) {
      // A replay is deterministic: running out is a fault of the cassette (an error, never
      // retried), not an unavailable model API.
      throw new ConfigError(
        `cassette ${this.file} ran out: turn ${turnNumber} was requested but it has only ${this.cassette.turns.length} turns`,
        [],
        {
          hint: 'record the conversation again, or lower maxTurns / maxAttempts',
          details: { file: this.file, turn: turnNumber },
        },
      );
    }
    this.next++;
    const content: AssistantContent[] = turn.content.map((block) =>
      block.type === 'text'
        ? { type: 'text', text: block.text }
        : { type: 'tool_use', id: block.id, name: block.name, input: structuredClone(block.input ?? {}) },
    );
    return {
      content,
      stopReason: turn.stopReason,
      usage: turn.usage ?? {
        inputTokens: estimateRequestTokens(request),
        outputTokens: estimateTokensForText(JSON.stringify(turn.content)),
      },
      model: this.cassette.model,
    };
  }

  async countTokens(request: CompletionRequest): Promise<number> {
    return estimateRequestTokens(request);
  }
}
