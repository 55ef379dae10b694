/**
 * The catalog's MCP servers handed to the CLI agents that speak MCP: Claude Code's
 * `--mcp-config` file (and never a `.mcp.json` of the repo), Codex's `[mcp_servers]` tables,
 * the `command` agent's `$SANDBOX_HARNESS_MCP_CONFIG`; no server, no configuration.
 */
import { describe, expect, it } from 'vitest';
import { CLAUDE_CODE, CODEX, codexConfig, commandKind } from '../../../src/agent-kinds/cli-kinds.js';
import { MCP_CONFIG_VARIABLE } from '../../../src/agent-kinds/agent-kind.js';
import { mcpServersSchema } from '../../../src/catalog/mcp-schema.js';
import { codexMcpConfig } from '../../../src/mcp/agent-config.js';

const task = { model: 'm-1', baseUrl: 'http://127.0.0.1:4100', home: '/tmp/h', maxTurns: 7 };
const servers = mcpServersSchema.parse({
  notes: {
    command: 'node',
    args: ['mcp/server.mjs', 'say "hi"'],
    env: { NOTES_DIR: 'notes' },
    callTimeoutSec: 9,
  },
});

describe('MCP servers for CLI agents', () => {
  it('gives Claude Code the servers as its --mcp-config file, and only those', () => {
    const launch = CLAUDE_CODE.launch({ ...task, mcpServers: servers });
    expect(launch.files).toEqual([{ path: '/tmp/h/mcp.json', content: expect.any(String) as string }]);
    expect(JSON.parse(launch.files[0]!.content)).toEqual({
      mcpServers: {
        notes: {
          type: 'stdio',
          command: 'node',
          args: ['mcp/server.mjs', 'say "hi"'],
          env: { NOTES_DIR: 'notes' },
        },
      },
    });
    expect(launch.command).toContain(" --mcp-config '/tmp/h/mcp.json' --strict-mcp-config ");
    // Without servers: no file, and still no server a repo's .mcp.json would bring.
    const plain = CLAUDE_CODE.launch(task);
    expect(plain.files).toEqual([]);
    expect(plain.command).not.toContain('--mcp-config');
    expect(plain.command).toContain(' --strict-mcp-config ');
  });

  it("adds Codex's [mcp_servers.<name>] tables (keys its --strict-config knows) to its configuration", () => {
    const toml = codexMcpConfig(servers);
    expect(toml).toBe(
      [
        '[mcp_servers.notes]',
        'command = "node"',
        'args = ["mcp/server.mjs", "say \\"hi\\""]',
        'env = { NOTES_DIR = "notes" }',
        'startup_timeout_sec = 30',
        'tool_timeout_sec = 9',
        '',
      ].join('\n'),
    );
    const [file] = CODEX.launch({ ...task, mcpServers: servers }).files;
    expect(file!.content).toBe(`${codexConfig(task.baseUrl, 'm-1')}\n${toml}`);
    expect(CODEX.launch(task).files[0]!.content).toBe(codexConfig(task.baseUrl, 'm-1'));
  });

  it('tells the command agent where the configuration is', () => {
    const launch = commandKind('anthropic').launch({ ...task, command: './agent', mcpServers: servers });
    expect(launch.env[MCP_CONFIG_VARIABLE]).toBe('/tmp/h/mcp.json');
    expect(launch.files.map((f) => f.path)).toEqual(['/tmp/h/mcp.json']);
    expect(
      commandKind('anthropic').launch({ ...task, command: './agent' }).env[MCP_CONFIG_VARIABLE],
    ).toBeUndefined();
  });
});
