/**
 * The catalog's MCP servers as tools of the built-in loop, for one attempt: each server is
 * started in the attempt sandbox (never on the host), asked for its tools, and each tool
 * becomes an `AgentTool` named `<server>__<tool>`. What a server says about its tools
 * (names, descriptions, schemas) and what its calls return is hostile data: names must fit
 * the model APIs' grammar, descriptions and schemas are bounded, input is checked against
 * the schema before a call, results are capped like every tool result, every call has a
 * deadline, and a server that breaks the protocol is stopped.
 */
import type { McpServerConfig } from '../catalog/mcp-schema.js';
import { ConfigError, Interrupted } from '../errors.js';
import { capText } from '../agent/tools/result-text.js';
import type { AgentTool, ToolContext, ToolResult } from '../agent/tools/types.js';
import type { Sandbox } from '../sandbox/types.js';
import { harnessVersion } from '../version.js';
import { inputProblems } from './input-check.js';
import { McpConnection, McpError, serverText } from './mcp-connection.js';

/** The protocol revision this client speaks; a server answers with the one it picks. */
export const MCP_PROTOCOL_VERSION = '2025-06-18';
/** The model APIs' grammar for a tool name (Anthropic and OpenAI alike). */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_TOOLS_PER_SERVER = 64;
const MAX_LIST_PAGES = 10;
const MAX_DESCRIPTION_CHARS = 1000;
/** An input schema larger than this is no schema a model should read on every call. */
const MAX_SCHEMA_BYTES = 16 * 1024;

export interface McpToolSet {
  tools: AgentTool[];
  /** Per server: its tools (the names the model sees) and what of its list was left out, and why. */
  servers: { name: string; tools: string[]; skipped: string[] }[];
  /** Stops every server. Idempotent, never throws. */
  close(): Promise<void>;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A schema's size as JSON; one nested past what JSON.stringify can walk counts as too large. */
function schemaBytes(schema: Record<string, unknown>): number {
  try {
    return Buffer.byteLength(JSON.stringify(schema));
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** A listed tool as the loop's tool, or why it is left out. */
function toAgentTool(
  connection: McpConnection,
  server: string,
  listed: unknown,
  callTimeoutMs: number,
): AgentTool | string {
  if (!isObject(listed) || typeof listed['name'] !== 'string') return 'a tool without a name';
  const remote = listed['name'];
  const shown = serverText(remote, 80);
  const name = `${server}__${remote}`;
  if (!TOOL_NAME.test(remote) || !TOOL_NAME.test(name))
    return `${JSON.stringify(shown)}: not a tool name the model APIs accept (letters, digits, "_", "-"; ${server}__<name> at most 64)`;
  const schema = listed['inputSchema'];
  if (!isObject(schema) || schema['type'] !== 'object')
    return `${remote}: its inputSchema is not an object schema`;
  if (schemaBytes(schema) > MAX_SCHEMA_BYTES)
    return `${remote}: its inputSchema is over ${MAX_SCHEMA_BYTES} bytes or nested too deep`;
  const said =
    typeof listed['description'] === 'string' ? serverText(listed['description'], MAX_DESCRIPTION_CHARS) : '';
  return {
    name,
    description: `(tool ${remote} of the MCP server ${server}, running in the sandbox) ${said}`.trim(),
    inputSchema: schema,
    execute: (rawInput, context) =>
      callTool(connection, server, remote, name, schema, rawInput, context, callTimeoutMs),
  };
}

async function callTool(
  connection: McpConnection,
  server: string,
  remote: string,
  name: string,
  schema: Record<string, unknown>,
  rawInput: unknown,
  context: ToolContext,
  callTimeoutMs: number,
): Promise<ToolResult> {
  const problem = inputProblems(schema, rawInput);
  if (problem) return { content: `invalid input for ${name}: ${problem}`, isError: true };
  let result: unknown;
  try {
    result = await connection.request(
      'tools/call',
      { name: remote, arguments: rawInput as Record<string, unknown> },
      callTimeoutMs,
      context.signal,
    );
  } catch (error) {
    if (error instanceof McpError) return { content: error.message, isError: true };
    if (context.signal?.aborted) throw new Interrupted('tool call interrupted');
    throw error;
  }
  return resultText(server, result, context.limits.maxOutputChars);
}

/** A `tools/call` result as text for the model: text parts joined, others named, capped. */
export function resultText(server: string, result: unknown, maxChars: number): ToolResult {
  if (!isObject(result))
    return { content: `MCP server ${server} answered without a result object`, isError: true };
  const parts: string[] = [];
  let chars = 0;
  const content = Array.isArray(result['content']) ? result['content'] : [];
  for (const part of content) {
    // Past the cap nothing more is read: capText keeps the head and tail of what was.
    if (chars > maxChars * 2) {
      parts.push(`[${content.length - parts.length} more parts left out]`);
      break;
    }
    const text =
      isObject(part) && part['type'] === 'text' && typeof part['text'] === 'string'
        ? part['text']
        : `[${isObject(part) && typeof part['type'] === 'string' ? serverText(part['type'], 40) : 'unknown'} content left out]`;
    parts.push(text);
    chars += text.length;
  }
  if (parts.length === 0 && result['structuredContent'] !== undefined)
    parts.push(JSON.stringify(result['structuredContent']) ?? '');
  const text = serverText(parts.join('\n'), Number.MAX_SAFE_INTEGER);
  return {
    content: capText(text === '' ? '(no output)' : text, maxChars, `the MCP server's answer`),
    isError: result['isError'] === true,
  };
}

/** Starts one server and lists its tools, within its start-up time. */
async function startServer(
  sandbox: Sandbox,
  name: string,
  config: McpServerConfig,
  signal: AbortSignal | undefined,
): Promise<{ connection: McpConnection; tools: AgentTool[]; skipped: string[] }> {
  const argv = [config.command, ...config.args];
  const connection = await McpConnection.spawn(sandbox, name, argv, config.env ?? {});
  let timer: NodeJS.Timeout | undefined;
  // One deadline for the whole start; each request's own is later, so this one speaks.
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const said = `MCP server ${name} did not start and list its tools within ${config.startupTimeoutSec}s (its startupTimeoutSec)`;
      reject(new McpError(said, 'timeout'));
    }, config.startupTimeoutSec * 1000);
  });
  try {
    const listed = await Promise.race([late, listTools(connection, name, config, signal)]);
    return { connection, ...listed };
  } catch (error) {
    const stderr = connection.stderr();
    await connection.close();
    if (error instanceof McpError && stderr !== '')
      throw new McpError(`${error.message}; its stderr ends with: ${stderr.slice(-1000)}`, error.reason);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** `initialize`, then `tools/list` page by page, each tool made the loop's or left out with why. */
async function listTools(
  connection: McpConnection,
  name: string,
  config: McpServerConfig,
  signal: AbortSignal | undefined,
): Promise<{ tools: AgentTool[]; skipped: string[] }> {
  const timeoutMs = config.startupTimeoutSec * 1000 + 1000;
  const init = await connection.request(
    'initialize',
    {
      protocolVersion: MCP_PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'sandbox-harness', version: harnessVersion() },
    },
    timeoutMs,
    signal,
  );
  if (!isObject(init) || typeof init['protocolVersion'] !== 'string')
    throw new McpError(`MCP server ${name} answered initialize without a protocolVersion`, 'answer');
  connection.notify('notifications/initialized');
  const tools: AgentTool[] = [];
  const skipped: string[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_LIST_PAGES; page++) {
    const listed = await connection.request('tools/list', cursor ? { cursor } : {}, timeoutMs, signal);
    const list = isObject(listed) && Array.isArray(listed['tools']) ? listed['tools'] : [];
    for (const item of list) {
      const tool = toAgentTool(connection, name, item, config.callTimeoutSec * 1000);
      if (typeof tool === 'string') skipped.push(tool);
      else if (seen.has(tool.name)) skipped.push(`${tool.name}: listed twice`);
      else if (tools.length >= MAX_TOOLS_PER_SERVER)
        skipped.push(`${tool.name}: over ${MAX_TOOLS_PER_SERVER} tools`);
      else {
        seen.add(tool.name);
        tools.push(tool);
      }
      if (skipped.length > 50) break;
    }
    const next = isObject(listed) ? listed['nextCursor'] : undefined;
    if (typeof next !== 'string' || next === '' || next.length > 1000) break;
    cursor = next;
  }
  return { tools, skipped: skipped.slice(0, 50) };
}

/**
 * Starts the catalog's servers in `sandbox` and returns their tools. A server that does not
 * start, or does not list its tools in time, is the catalog's problem: a `ConfigError` that
 * names it, with the end of its stderr, and every server already started is stopped.
 */
export async function startMcpTools(
  sandbox: Sandbox,
  servers: Readonly<Record<string, McpServerConfig>>,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<McpToolSet> {
  const started: McpConnection[] = [];
  const set: McpToolSet = {
    tools: [],
    servers: [],
    close: async () => {
      await Promise.all(started.map((c) => c.close().catch(() => undefined)));
    },
  };
  for (const [name, config] of Object.entries(servers)) {
    try {
      const server = await startServer(sandbox, name, config, options.signal);
      started.push(server.connection);
      set.tools.push(...server.tools);
      set.servers.push({ name, tools: server.tools.map((t) => t.name), skipped: server.skipped });
    } catch (error) {
      await set.close();
      if (options.signal?.aborted) throw new Interrupted('interrupted while MCP servers started');
      if (!(error instanceof McpError)) throw error;
      // The reason goes into the message itself: the run record keeps the message only.
      throw new ConfigError(
        `catalog agent.mcpServers.${name}: the server did not start in the sandbox: ${error.message}`,
      );
    }
  }
  return set;
}
