/**
 * The `replay` provider: plays a recorded conversation (a "cassette") for offline demos
 * and deterministic tests.
 *
 * Cassette format, version 1 (stable: demos, tests and `fix --record` depend on it). It holds
 * the main agent's turns only:
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
 * Version 2 holds one queue of turns per role (`main`: the agent fixing the ticket;
 * `delegate`: the sub-agents it hands tasks to with the `delegate` tool; `checker`: an
 * independent reviewer). Turns are written exactly as in version 1; every role is optional;
 * a role's `model` overrides the top-level label for that role:
 *
 * ```json
 * {
 *   "version": 2,
 *   "model": "<label>",
 *   "roles": {
 *     "main":     { "turns": [ ... ] },
 *     "delegate": { "turns": [ ... ] },
 *     "checker":  { "model": "<another label>", "turns": [ ... ] }
 *   }
 * }
 * ```
 *
 * - Each model call of a role takes that role's next turn, whatever the other roles did in
 *   between: all sub-agents of a run share the `delegate` queue in the order they ran, every
 *   review round takes the next `checker` turns. Within a role, calls never overlap (the loop
 *   runs one tool at a time), so the order of a queue is the order of the calls.
 * - A version-1 file is read as version 2 with only `main`; it keeps working unchanged.
 * - The positions live in a `CassettePlayer`, shared by all providers of one run (the
 *   registry's `ProviderSession` hands the same player to every role), so one cassette spans
 *   every attempt; running out is a `ConfigError` naming the file, the role and the turn:
 *   a replay is deterministic, so that is a fault of the cassette (never retried), not an
 *   unavailable model API.
 * - `stopReason` is `tool_use` or `end_turn` (`max_tokens` and `other` are accepted too, so
 *   that a recorded session replays as it happened).
 * - `usage` is optional; without it, tokens are estimated from the request (deterministically).
 * - Tool names and inputs are those of the agent's tools (`read_file`, `write_file`,
 *   `edit_file`, `list_files`, `search`, `run_command`, and `delegate` where the catalog
 *   turns it on). A structured answer such as a checker's verdict is a tool call too
 *   (e.g. `submit_review`), so it replays like any other turn.
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ConfigError, Interrupted, errorMessage } from '../errors.js';
import { NUMBER_CAPS, tokenCount } from '../numbers.js';
import { estimateRequestTokens, estimateTokensForText } from './tokens.js';
import {
  MODEL_ROLES,
  type AssistantContent,
  type Completion,
  type CompletionRequest,
  type Message,
  type ModelProvider,
  type ModelRole,
  type ToolDefinition,
} from './types.js';

export const CASSETTE_VERSIONS = [1, 2] as const;

const TextBlockSchema = z.strictObject({ type: z.literal('text'), text: z.string() });
const ToolUseBlockSchema = z.strictObject({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.unknown(),
});

const callTokens = tokenCount(NUMBER_CAPS.tokensPerCall);

export const CassetteTurnSchema = z.strictObject({
  content: z.array(z.discriminatedUnion('type', [TextBlockSchema, ToolUseBlockSchema])),
  stopReason: z.enum(['tool_use', 'end_turn', 'max_tokens', 'other']),
  usage: z
    .strictObject({
      // A recorded call's counts: the same bounds as a live server's (see usage.ts).
      inputTokens: callTokens,
      outputTokens: callTokens,
      cacheReadTokens: callTokens.optional(),
      cacheWriteTokens: callTokens.optional(),
    })
    .optional(),
});

export const CassetteV1Schema = z.strictObject({
  version: z.literal(1),
  model: z.string(),
  turns: z.array(CassetteTurnSchema),
});

export const RoleTapeSchema = z.strictObject({
  model: z.string().optional(),
  turns: z.array(CassetteTurnSchema),
});

export const CassetteV2Schema = z.strictObject({
  version: z.literal(2),
  model: z.string(),
  roles: z.strictObject(
    Object.fromEntries(MODEL_ROLES.map((role) => [role, RoleTapeSchema.optional()])) as Record<
      ModelRole,
      z.ZodOptional<typeof RoleTapeSchema>
    >,
  ),
});

export type CassetteTurn = z.infer<typeof CassetteTurnSchema>;
export type RoleTape = z.infer<typeof RoleTapeSchema>;
export type CassetteV1 = z.infer<typeof CassetteV1Schema>;
export type CassetteV2 = z.infer<typeof CassetteV2Schema>;
export type Cassette = CassetteV1 | CassetteV2;

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

const CASSETTE_HINT =
  'a cassette looks like {"version": 1, "model": "...", "turns": [{"content": [...], "stopReason": "tool_use" | "end_turn"}]}, ' +
  `or {"version": 2, "model": "...", "roles": {"main": {"turns": [...]}}} with roles ${MODEL_ROLES.join(', ')}`;

/** Validates parsed JSON as a cassette; problems name the field (e.g. `roles.checker.turns[2].stopReason`). */
export function parseCassette(data: unknown, file: string): Cassette {
  const version = valueAt(data, ['version']);
  const schema = version === 1 ? CassetteV1Schema : version === 2 ? CassetteV2Schema : undefined;
  if (!schema) {
    throw new ConfigError(
      `cassette ${file} is not a valid cassette`,
      [`version: expected ${CASSETTE_VERSIONS.join(' or ')}, got ${JSON.stringify(version) ?? 'nothing'}`],
      { hint: CASSETTE_HINT },
    );
  }
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const found = valueAt(data, issue.path);
    const got = found === undefined ? '' : `, got ${JSON.stringify(found)?.slice(0, 60)}`;
    const roles =
      issue.code === 'unrecognized_keys' && issuePath(issue.path) === 'roles'
        ? ` (the roles are ${MODEL_ROLES.join(', ')})`
        : '';
    return `${issuePath(issue.path)}: ${issue.message}${roles}${got}`;
  });
  throw new ConfigError(`cassette ${file} is not a valid version-${String(version)} cassette`, problems, {
    hint: CASSETTE_HINT,
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

/** Every role's queue, whatever the version: a version-1 cassette is the `main` queue alone. */
export function cassetteTapes(cassette: Cassette): { [R in ModelRole]?: RoleTape | undefined } {
  return cassette.version === 1 ? { main: { turns: cassette.turns } } : cassette.roles;
}

/**
 * One cassette being played: a position per role. Every provider of a run that replays the
 * same file shares one player, so that each role takes its own turns in order.
 */
export class CassettePlayer {
  private readonly tapes: { [R in ModelRole]?: RoleTape | undefined };
  private readonly positions = new Map<ModelRole, number>();

  constructor(
    private readonly cassette: Cassette,
    /** Named in errors; `<memory>` when the cassette did not come from a file. */
    readonly file: string = '<memory>',
  ) {
    this.tapes = cassetteTapes(cassette);
  }

  static async fromFile(file: string): Promise<CassettePlayer> {
    return new CassettePlayer(await loadCassette(file), file);
  }

  /** The label a role's answers carry. */
  model(role: ModelRole): string {
    return this.tapes[role]?.model ?? this.cassette.model;
  }

  /** How many of a role's turns have been played. */
  position(role: ModelRole): number {
    return this.positions.get(role) ?? 0;
  }

  remaining(role: ModelRole): number {
    return (this.tapes[role]?.turns.length ?? 0) - this.position(role);
  }

  /** The role's next turn; a `ConfigError` naming the file, the role and the turn when there is none. */
  take(role: ModelRole): CassetteTurn {
    const tape = this.tapes[role];
    const turnNumber = this.position(role) + 1;
    const turn = tape?.turns[turnNumber - 1];
    if (!turn) {
      const details = { file: this.file, role, turn: turnNumber };
      if (!tape) {
        throw new ConfigError(
          `cassette ${this.file} has no turns for role "${role}": ${role} turn ${turnNumber} was requested`,
          [],
          {
            hint:
              this.cassette.version === 1
                ? `a version-1 cassette holds only the main agent's turns: record the run again with --record, or make it version 2 with a "${role}" queue under "roles"`
                : `add a "${role}" queue under "roles", or record the run again with --record`,
            details,
          },
        );
      }
      throw new ConfigError(
        `cassette ${this.file} ran out for role "${role}": turn ${turnNumber} was requested but it has only ${tape.turns.length} turns for that role`,
        [],
        { hint: 'record the conversation again, or lower maxTurns / maxAttempts', details },
      );
    }
    this.positions.set(role, turnNumber);
    return turn;
  }
}

/** What the replay provider saw: the request without its signal, copied at call time. */
export interface ReceivedRequest {
  system: string;
  messages: Message[];
  tools: ToolDefinition[];
  maxTokens: number;
}

/** Plays one role's queue of a cassette. */
export class ReplayProvider implements ModelProvider {
  readonly name = 'replay';
  readonly model: string;
  /** Every request this role received, in order, including one that found its queue exhausted. */
  readonly requests: ReceivedRequest[] = [];
  private readonly player: CassettePlayer;

  constructor(
    /** A cassette of its own, or the player the other roles of the run share. */
    source: Cassette | CassettePlayer,
    /** Named in errors when `source` is a cassette (a player knows its file). */
    file?: string,
    readonly role: ModelRole = 'main',
  ) {
    this.player = source instanceof CassettePlayer ? source : new CassettePlayer(source, file);
    this.model = this.player.model(role);
  }

  static async fromFile(file: string, role: ModelRole = 'main'): Promise<ReplayProvider> {
    return new ReplayProvider(await CassettePlayer.fromFile(file), undefined, role);
  }

  get file(): string {
    return this.player.file;
  }

  /** How many of this role's turns have been played. */
  get position(): number {
    return this.player.position(this.role);
  }

  get remaining(): number {
    return this.player.remaining(this.role);
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
    const turn = this.player.take(this.role);
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
      model: this.model,
    };
  }

  async countTokens(request: CompletionRequest): Promise<number> {
    return estimateRequestTokens(request);
  }
}
