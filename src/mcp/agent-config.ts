/**
 * The catalog's MCP servers as the configuration of the CLI agents that speak MCP
 * themselves: Claude Code's `--mcp-config` JSON (also what the `command` agent is pointed
 * at) and Codex's `[mcp_servers.<name>]` tables. The agents start the servers inside the
 * sandbox, as the sandbox user, like any of their own processes.
 */
import type { McpServerConfig } from '../catalog/mcp-schema.js';

export type McpServers = Readonly<Record<string, McpServerConfig>>;

/** Claude Code's `--mcp-config` file (`{"mcpServers": {name: {type, command, args, env}}}`). */
export function claudeMcpConfig(servers: McpServers): string {
  const entries = Object.entries(servers).map(([name, s]) => [
    name,
    { type: 'stdio', command: s.command, args: s.args, env: s.env ?? {} },
  ]);
  return `${JSON.stringify({ mcpServers: Object.fromEntries(entries) }, null, 2)}\n`;
}

/**
 * A TOML basic string. JSON's string escapes are TOML's (`\"`, `\\`, `\n`, `\uXXXX`), and
 * the catalog refuses control characters in a server's command and arguments anyway.
 */
const tomlString = (value: string): string => JSON.stringify(value);

/** Codex's `[mcp_servers.<name>]` tables, checked by its `--strict-config` (names are bare keys by the catalog's grammar). */
export function codexMcpConfig(servers: McpServers): string {
  return Object.entries(servers)
    .map(([name, s]) => {
      const env = Object.entries(s.env ?? {}).map(([k, v]) => `${k} = ${tomlString(v)}`);
      return [
        `[mcp_servers.${name}]`,
        `command = ${tomlString(s.command)}`,
        `args = [${s.args.map(tomlString).join(', ')}]`,
        ...(env.length > 0 ? [`env = { ${env.join(', ')} }`] : []),
        `startup_timeout_sec = ${s.startupTimeoutSec}`,
        `tool_timeout_sec = ${s.callTimeoutSec}`,
        '',
      ].join('\n');
    })
    .join('\n');
}
