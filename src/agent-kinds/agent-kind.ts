/**
 * What an agent kind is: the built-in loop, or a coding-agent CLI that runs inside the
 * attempt sandbox as the sandbox user and reaches its model only through the model bridge
 * (src/model-bridge/), which holds the keys. A CLI kind says which packages its image layer
 * takes (`packages.ts`), which API its calls speak, and how it is started for one task: its
 * environment (the bridge's loopback URL, a placeholder key, telemetry and updates off), the
 * configuration it reads, and the command line. Nothing here touches an engine or the host.
 */
import type { McpServers } from '../mcp/agent-config.js';
import type { AgentPackage } from './packages.js';

/** The API family a CLI's model calls speak: the bridge's upstream must answer it. */
export type WireFamily = 'anthropic' | 'openai';

/** What the harness knows of one task when it starts a CLI agent. */
export interface AgentTask {
  /** The model the bridge allows (the run's). */
  model: string;
  /** The bridge's loopback endpoint in the sandbox, `http://127.0.0.1:<port>`. */
  baseUrl: string;
  /** A folder the sandbox user owns, for the agent's state (its sessions, databases). */
  home: string;
  /** Model calls the agent may make (the bridge refuses the one past it). */
  maxTurns: number;
  /** The command of the `command` kind (catalog `agent.command`); unused by the others. */
  command?: string;
  /** The catalog's `agent.mcpServers`, handed to the agent as its own MCP configuration. */
  mcpServers?: McpServers | undefined;
}

/** How one CLI agent is started for one task. */
export interface AgentLaunch {
  /** Variables for the agent's process only; the task text is added as `SANDBOX_HARNESS_TASK`. */
  env: Record<string, string>;
  /** Files written (as the sandbox user) before it starts, at absolute paths under `home`. */
  files: { path: string; content: string }[];
  /** A shell command line; the task text is in `"$SANDBOX_HARNESS_TASK"`. */
  command: string;
}

interface KindBase {
  name: string;
  /** One line for `doctor` and the docs. */
  description: string;
}

/** The harness's own loop (`src/agent/`): the default. */
export interface LoopKind extends KindBase {
  runs: 'loop';
}

/** A CLI that runs in the sandbox and calls its model through the bridge. */
export interface CliKind extends KindBase {
  runs: 'cli';
  family: WireFamily;
  /** What its image layer takes from the npm registry (none for `command`: the image has it). */
  packages: readonly AgentPackage[];
  /** The model when neither the catalog, `--model` nor the environment names one. */
  defaultModel: string;
  launch(task: AgentTask): AgentLaunch;
}

/** A name the harness knows but cannot run yet, and why (said when it is asked for). */
export interface UnavailableKind extends KindBase {
  runs: 'unavailable';
  why: string;
}

export type AgentKind = LoopKind | CliKind | UnavailableKind;

/** The variable that tells the `command` agent where the MCP configuration is (Claude's JSON shape). */
export const MCP_CONFIG_VARIABLE = 'SANDBOX_HARNESS_MCP_CONFIG';

/** The variable that carries the task text to a CLI agent's command line. */
export const TASK_VARIABLE = 'SANDBOX_HARNESS_TASK';

/** The key every CLI agent is given: the bridge ignores it and adds the real one on the host. */
export const PLACEHOLDER_KEY = 'sandbox-harness-placeholder-key';
