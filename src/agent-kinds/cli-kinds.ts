/**
 * The CLI agents the harness runs, each configured to reach nothing but the bridge's loopback
 * endpoint: its base URL and a placeholder key, its telemetry, error reports, update checks,
 * plugins and hosted tools off (each switch checked by tracing its connections with no
 * network), its own sandbox off (the harness's container is the wall), and a
 * non-interactive command line that runs one task and exits.
 */
import { claudeMcpConfig, codexMcpConfig } from '../mcp/agent-config.js';
import { BUNDLE_DIR, CLAUDE_CODE_PACKAGE, CODEX_PACKAGE } from './packages.js';
import {
  MCP_CONFIG_VARIABLE,
  PLACEHOLDER_KEY,
  TASK_VARIABLE,
  type AgentTask,
  type CliKind,
  type UnavailableKind,
} from './agent-kind.js';

const TASK = `"$${TASK_VARIABLE}"`;

/** A string as one shell word. */
export function shellWord(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** The catalog's MCP servers as a Claude-shaped JSON file in the agent's home, when there are any. */
function mcpJsonFile(task: AgentTask): { path: string; content: string } | undefined {
  if (!task.mcpServers || Object.keys(task.mcpServers).length === 0) return undefined;
  return { path: `${task.home}/mcp.json`, content: claudeMcpConfig(task.mcpServers) };
}

/** Claude Code's environment: the bridge as its API, the run's model for every call, side traffic off. */
export function claudeCodeEnv(baseUrl: string, model: string, home: string): Record<string, string> {
  return {
    HOME: home,
    ANTHROPIC_BASE_URL: baseUrl,
    ANTHROPIC_API_KEY: PLACEHOLDER_KEY,
    ANTHROPIC_MODEL: model,
    // Its side calls (titles, summaries) use these: the run's model, so none is refused.
    ANTHROPIC_SMALL_FAST_MODEL: model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
    ANTHROPIC_DEFAULT_SONNET_MODEL: model,
    ANTHROPIC_DEFAULT_OPUS_MODEL: model,
    // Without it: lookups of api.anthropic.com and a HEAD to the base URL on every start.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_BUG_COMMAND: '1',
    CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: '1',
    CLAUDE_CODE_DISABLE_TERMINAL_TITLE: '1',
  };
}

export const CLAUDE_CODE: CliKind = {
  name: 'claude-code',
  description: 'Claude Code (Anthropic Messages API), the native build from the npm registry',
  runs: 'cli',
  family: 'anthropic',
  packages: [CLAUDE_CODE_PACKAGE],
  defaultModel: 'claude-sonnet-4-5',
  launch: (task) => {
    const mcp = mcpJsonFile(task);
    return {
      env: claudeCodeEnv(task.baseUrl, task.model, task.home),
      files: mcp ? [mcp] : [],
      // --strict-mcp-config: the catalog's servers only, never a .mcp.json the repo brings.
      command: `${BUNDLE_DIR}/agents/claude-code/claude -p ${TASK} --model ${shellWord(task.model)} --max-turns ${task.maxTurns}${mcp ? ` --mcp-config ${shellWord(mcp.path)}` : ''} --strict-mcp-config --dangerously-skip-permissions --output-format json </dev/null`,
    };
  },
};

/** Codex's configuration: the bridge as its one provider; everything that calls out off. */
export function codexConfig(baseUrl: string, model: string): string {
  return [
    `model = ${JSON.stringify(model)}`,
    'model_provider = "sandbox-harness"',
    'approval_policy = "never"',
    // Its bubblewrap cannot make a namespace under the container's seccomp and dropped capabilities.
    'sandbox_mode = "danger-full-access"',
    // Else every request carries the hosted web_search tool, which the bridge refuses.
    'web_search = "disabled"',
    'check_for_update_on_startup = false',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[feedback]',
    'enabled = false',
    '',
    '[otel]',
    'exporter = "none"',
    '',
    '[features]',
    // Without these two: a lookup of github.com on start.
    'plugins = false',
    'remote_plugin = false',
    '',
    '[model_providers.sandbox-harness]',
    'name = "sandbox-harness"',
    `base_url = ${JSON.stringify(`${baseUrl}/v1`)}`,
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
    // Else it tries a Responses WebSocket five times first.
    'supports_websockets = false',
    '',
  ].join('\n');
}

export const CODEX: CliKind = {
  name: 'codex',
  description: 'Codex CLI (OpenAI Responses API), the static build from the npm registry',
  runs: 'cli',
  family: 'openai',
  packages: [CODEX_PACKAGE],
  defaultModel: 'gpt-5.2-codex',
  launch: (task) => ({
    env: {
      HOME: task.home,
      CODEX_HOME: `${task.home}/.codex`,
      OPENAI_API_KEY: PLACEHOLDER_KEY,
    },
    files: [
      {
        path: `${task.home}/.codex/config.toml`,
        content: `${codexConfig(task.baseUrl, task.model)}${task.mcpServers ? `\n${codexMcpConfig(task.mcpServers)}` : ''}`,
      },
    ],
    // Its own ripgrep first on PATH, as its npm wrapper would put it; stdin closed, else it waits to read it.
    command: `PATH=${BUNDLE_DIR}/agents/codex/path:"$PATH" ${BUNDLE_DIR}/agents/codex/bin/codex exec --skip-git-repo-check --strict-config ${TASK} </dev/null`,
  }),
};

/**
 * Any program the catalog names (`agent.command`), already in the image: it is given both
 * APIs' base URLs and placeholder keys, and the task in `$SANDBOX_HARNESS_TASK`.
 */
export function commandKind(family: CliKind['family']): CliKind {
  return {
    name: 'command',
    description: "a program of the image named by the catalog's agent.command, given the bridge's URLs",
    runs: 'cli',
    family,
    packages: [],
    defaultModel: family === 'anthropic' ? 'claude-sonnet-4-5' : 'gpt-5.2-codex',
    launch: (task) => {
      const mcp = mcpJsonFile(task);
      return {
        env: {
          HOME: task.home,
          ANTHROPIC_BASE_URL: task.baseUrl,
          ANTHROPIC_API_KEY: PLACEHOLDER_KEY,
          OPENAI_BASE_URL: `${task.baseUrl}/v1`,
          OPENAI_API_KEY: PLACEHOLDER_KEY,
          SANDBOX_HARNESS_MODEL: task.model,
          ...(mcp ? { [MCP_CONFIG_VARIABLE]: mcp.path } : {}),
        },
        files: mcp ? [mcp] : [],
        command: `${task.command ?? 'false'} </dev/null`,
      };
    },
  };
}

export const GEMINI: UnavailableKind = {
  name: 'gemini',
  description: 'Gemini CLI',
  runs: 'unavailable',
  why: 'it calls the Gemini API (streamGenerateContent), which the model bridge does not speak yet',
};

export const OPENCODE: UnavailableKind = {
  name: 'opencode',
  description: 'OpenCode',
  runs: 'unavailable',
  why: 'its side traffic with no network is not checked yet, nor its package pinned',
};
