/**
 * The catalog's MCP servers for one turn of the built-in loop: started in the attempt's
 * sandbox before the loop, their tools added after the registry's own, stopped when the loop
 * ends (the freeze would stop them too; stopping them first keeps a call from racing it).
 */
import type { ToolRegistry } from '../agent/tools/tool-registry.js';
import { startMcpTools } from '../mcp/mcp-tools.js';
import type { Sandbox } from '../sandbox/types.js';
import type { Run } from './types.js';

export interface AttemptTools {
  tools: ToolRegistry;
  /** Stops the attempt's MCP servers. Never throws. */
  close(): Promise<void>;
}

export async function attemptTools(
  run: Run,
  n: number,
  box: Sandbox,
  tools: ToolRegistry,
  signal: AbortSignal,
): Promise<AttemptTools> {
  const servers = run.catalog.catalog.agent.mcpServers;
  if (!servers || Object.keys(servers).length === 0) return { tools, close: async () => undefined };
  run.progress.detail(`starting MCP servers ${Object.keys(servers).join(', ')} in the sandbox`);
  const mcp = await startMcpTools(box, servers, { signal });
  run.journal.append({ kind: 'mcp', attempt: n, servers: mcp.servers });
  run.progress.detail(`MCP tools: ${mcp.tools.map((t) => t.name).join(', ') || 'none'}`);
  return { tools: tools.with(mcp.tools), close: () => mcp.close() };
}
