import { HarnessError } from '../../errors.js';
import type { ToolDefinition } from '../../llm/types.js';
import type { Sandbox } from '../../sandbox/types.js';
import { toolErrorResult } from '../tool-errors.js';
import { delegateTool } from './delegate.js';
import { editFileTool } from './edit-file.js';
import { listFilesTool } from './list-files.js';
import { readFileTool } from './read-file.js';
import { runCommandTool } from './run-command.js';
import { searchTool } from './search.js';
import { submitReviewTool, type SubmittedReview } from './submit-review.js';
import {
  DEFAULT_TOOL_LIMITS,
  toolDefinition,
  type AgentTool,
  type DelegateCapability,
  type EditablePolicy,
  type ToolLimits,
  type ToolResult,
} from './types.js';
import { writeFileTool } from './write-file.js';
import { readDocTool } from './read-doc.js';
import { skillTool } from './skill.js';
import type { Library } from '../library.js';

/** The agent's tools, in the order the model sees them. Names are stable: cassettes depend on them. */
export const DEFAULT_TOOLS: readonly AgentTool[] = [
  readFileTool,
  writeFileTool,
  editFileTool,
  listFilesTool,
  searchTool,
  runCommandTool,
];

export const EVERYTHING_EDITABLE: EditablePolicy = { isEditable: () => true, globs: ['**'] };

export interface ToolRunContext {
  sandbox: Sandbox;
  signal?: AbortSignal;
  delegate?: DelegateCapability;
}

/** A set of tools bound to an editable-path policy; the loop supplies sandbox and signal per call. */
export class ToolRegistry {
  private readonly byName = new Map<string, AgentTool>();
  readonly limits: ToolLimits;

  constructor(
    tools: readonly AgentTool[],
    readonly editable: EditablePolicy = EVERYTHING_EDITABLE,
    limits: Partial<ToolLimits> = {},
  ) {
    for (const tool of tools) {
      if (this.byName.has(tool.name))
        throw new HarnessError('TOOL_REGISTRY', 'internal', `tool ${tool.name} registered twice`);
      this.byName.set(tool.name, tool);
    }
    this.limits = { ...DEFAULT_TOOL_LIMITS, ...limits };
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The same registry without the named tools (a sub-agent's, without `delegate`). */
  without(...names: string[]): ToolRegistry {
    const tools = [...this.byName.values()].filter((tool) => !names.includes(tool.name));
    return new ToolRegistry(tools, this.editable, this.limits);
  }

  /** The same registry with more tools after its own (an attempt's MCP tools). */
  with(tools: readonly AgentTool[]): ToolRegistry {
    return new ToolRegistry([...this.byName.values(), ...tools], this.editable, this.limits);
  }

  definitions(): ToolDefinition[] {
    return [...this.byName.values()].map(toolDefinition);
  }

  /**
   * Runs one tool call. Whatever goes wrong becomes an error result the model can read,
   * except a dead sandbox or an interruption, which propagate (see tool-errors.ts).
   */
  async run(name: string, input: unknown, context: ToolRunContext): Promise<ToolResult> {
    const tool = this.byName.get(name);
    if (!tool) {
      return {
        content: `unknown tool "${name}"; the available tools are: ${this.names().join(', ')}`,
        isError: true,
      };
    }
    try {
      return await tool.execute(input, {
        sandbox: context.sandbox,
        ...(context.signal ? { signal: context.signal } : {}),
        editable: this.editable,
        limits: this.limits,
        ...(context.delegate ? { delegate: context.delegate } : {}),
      });
    } catch (error) {
      return toolErrorResult(error);
    }
  }
}

export interface DefaultToolRegistryOptions {
  isEditable?: (path: string) => boolean;
  editableGlobs?: readonly string[];
  limits?: Partial<ToolLimits>;
  /**
   * Offer `delegate` (after the six stable tools). Off by default: the tool list is part of
   * every request, so recorded conversations and evals stay comparable unless a catalog
   * opts in with `agent.delegate: true`.
   */
  delegate?: boolean;
  /**
   * The repo's topic documents and skills: `read_doc` and `skill` are offered (after the six
   * stable tools) only when there is something to read, so a repo without any keeps the
   * tool list every recorded conversation was made with.
   */
  library?: Library;
}

export function createDefaultToolRegistry(options: DefaultToolRegistryOptions = {}): ToolRegistry {
  const editable: EditablePolicy = options.isEditable
    ? { isEditable: options.isEditable, globs: options.editableGlobs ?? [] }
    : EVERYTHING_EDITABLE;
  const library = options.library;
  return new ToolRegistry(
    [
      ...DEFAULT_TOOLS,
      ...(library && library.docs.length > 0 ? [readDocTool(library)] : []),
      ...(library && library.skills.length > 0 ? [skillTool(library)] : []),
      ...(options.delegate ? [delegateTool] : []),
    ],
    editable,
    options.limits,
  );
}

/**
 * The checker's tools: it reads and runs commands (in a throwaway sandbox whose changes are
 * discarded) but writes nothing, and answers with `submit_review`, whose verdict lands in
 * `capture`.
 */
export function createReviewToolRegistry(
  capture: { review?: SubmittedReview },
  limits: Partial<ToolLimits> = {},
): ToolRegistry {
  const nothing: EditablePolicy = { isEditable: () => false, globs: [] };
  return new ToolRegistry(
    [readFileTool, listFilesTool, searchTool, runCommandTool, submitReviewTool(capture)],
    nothing,
    limits,
  );
}
