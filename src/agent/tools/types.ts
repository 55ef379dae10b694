import { z } from 'zod';
import type { JsonSchema, ToolDefinition } from '../../llm/types.js';
import type { Sandbox } from '../../sandbox/types.js';

export interface ToolResult {
  content: string;
  isError: boolean;
  /** For commands: the exit code, recorded in the event log. */
  exitCode?: number;
  /** The call was the loop's answer (a submitted review): the loop ends after it, no extra turn. */
  endsLoop?: boolean;
}

/** Which workspace paths the agent may write; the diff gate decides again after the loop. */
export interface EditablePolicy {
  isEditable(path: string): boolean;
  /** Shown to the model when it tries to write elsewhere. */
  globs: readonly string[];
}

export interface ToolLimits {
  /** Largest file `read_file` and `edit_file` load. */
  maxReadBytes: number;
  /** Largest content `write_file` and `edit_file` write. */
  maxWriteBytes: number;
  /** Characters of output handed to the model per tool call; head and tail are kept. */
  maxOutputChars: number;
  maxListEntries: number;
  maxSearchLines: number;
  defaultCommandTimeoutSec: number;
  maxCommandTimeoutSec: number;
  /** Bytes of stdout + stderr the sandbox keeps per command. */
  maxCommandOutputBytes: number;
}

export const DEFAULT_TOOL_LIMITS: ToolLimits = {
  maxReadBytes: 2 * 1024 * 1024,
  maxWriteBytes: 2 * 1024 * 1024,
  maxOutputChars: 30_000,
  maxListEntries: 1_000,
  maxSearchLines: 200,
  defaultCommandTimeoutSec: 120,
  maxCommandTimeoutSec: 900,
  maxCommandOutputBytes: 256 * 1024,
};

/** What a sub-agent came back with. */
export interface SubAgentOutcome {
  /** How its loop ended: `completed`, or the limit that stopped it (`max-turns`, ...). */
  status: string;
  /** Its last message's text: its conclusion. */
  finalText: string;
  /** Model calls it made. */
  turns: number;
}

/**
 * Runs a sub-agent on a first user message: an empty conversation, the same sandbox, the
 * same tools but `delegate`, and the run's budgets. The loop provides it, per call.
 */
export type DelegateCapability = (firstUserMessage: string) => Promise<SubAgentOutcome>;

export interface ToolContext {
  sandbox: Sandbox;
  signal?: AbortSignal;
  editable: EditablePolicy;
  limits: ToolLimits;
  /** Present where the loop can start sub-agents (never inside a sub-agent). */
  delegate?: DelegateCapability;
}

/** A tool as the registry holds it: validation included, input type erased. */
export interface AgentTool {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  /** Validates the model's raw input, then runs. Throws on failure (see tool-errors.ts). */
  execute(rawInput: unknown, context: ToolContext): Promise<ToolResult>;
}

export interface ToolSpec<S extends z.ZodType> {
  name: string;
  description: string;
  input: S;
  run(input: z.output<S>, context: ToolContext): Promise<ToolResult>;
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(input)'}: ${issue.message}`)
    .join('; ');
}

export function toolJsonSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  return rest;
}

/** Result for input the model got wrong: says what was wrong and what was expected. */
export function invalidInputResult(
  toolName: string,
  rawInput: unknown,
  problem: string,
  schema: JsonSchema,
): ToolResult {
  const properties = (schema['properties'] ?? {}) as Record<string, { type?: unknown }>;
  const required = new Set((schema['required'] ?? []) as string[]);
  const expected = Object.entries(properties)
    .map(([key, value]) => `${key}${required.has(key) ? '' : '?'}: ${String(value.type ?? 'any')}`)
    .join(', ');
  const raw =
    typeof rawInput === 'string' ? `; the arguments were not a JSON object: ${rawInput.slice(0, 200)}` : '';
  return {
    content: `invalid input for ${toolName}: ${problem}${raw}. Expected {${expected}}.`,
    isError: true,
  };
}

export function defineTool<S extends z.ZodType>(spec: ToolSpec<S>): AgentTool {
  const inputSchema = toolJsonSchema(spec.input);
  return {
    name: spec.name,
    description: spec.description,
    inputSchema,
    async execute(rawInput, context) {
      const parsed = spec.input.safeParse(rawInput);
      if (!parsed.success)
        return invalidInputResult(spec.name, rawInput, describeIssues(parsed.error), inputSchema);
      return spec.run(parsed.data, context);
    },
  };
}

export function toolDefinition(tool: AgentTool): ToolDefinition {
  return { name: tool.name, description: tool.description, inputSchema: tool.inputSchema };
}
