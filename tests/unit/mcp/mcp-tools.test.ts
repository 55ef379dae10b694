/**
 * MCP servers as tools of the built-in loop, against a real server process (a child process
 * on the host standing in for the sandbox's, `tests/helpers/local-process.ts`): tools named
 * `<server>__<tool>`, input checked against the server's schema before the call, results
 * capped, and a hostile or broken server (huge lines, floods, noise, silence, its own
 * requests, a crash) bounded in size and time, with the model told what happened.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { mcpServerSchema, mcpServersSchema } from '../../../src/catalog/mcp-schema.js';
import { ConfigError } from '../../../src/errors.js';
import { DEFAULT_TOOL_LIMITS, type ToolContext } from '../../../src/agent/tools/types.js';
import { EVERYTHING_EDITABLE, createDefaultToolRegistry } from '../../../src/agent/tools/tool-registry.js';
import { startMcpTools, type McpToolSet } from '../../../src/mcp/mcp-tools.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';
import { localSpawn } from '../../helpers/local-process.js';

const SERVER = fileURLToPath(new URL('../../fixtures/mcp/notes-server.mjs', import.meta.url));
const sets: McpToolSet[] = [];

afterEach(async () => {
  await Promise.all(sets.splice(0).map((s) => s.close()));
});

function sandbox(): MemorySandbox {
  const box = new MemorySandbox({});
  box.onSpawn = (argv, io) => localSpawn(argv, io);
  return box;
}

async function start(mode = 'normal', extra: Record<string, unknown> = {}, box = sandbox()) {
  const config = mcpServerSchema.parse({ command: 'node', args: [SERVER, mode], ...extra });
  const set = await startMcpTools(box, { notes: config });
  sets.push(set);
  return { set, box, tool: (name: string) => set.tools.find((t) => t.name === `notes__${name}`)! };
}

const context = (limits = DEFAULT_TOOL_LIMITS): ToolContext => ({
  sandbox: new MemorySandbox({}),
  editable: EVERYTHING_EDITABLE,
  limits,
});

describe('MCP tools for the built-in loop', () => {
  it("names each tool <server>__<tool>, keeps the server's schema, and calls it in the sandbox", async () => {
    const { set, box, tool } = await start();
    expect(box.spawnedArgv).toEqual([['node', SERVER, 'normal']]);
    expect(set.tools.map((t) => t.name)).toEqual([
      'notes__lookup',
      'notes__flood',
      'notes__huge',
      'notes__sleep',
      'notes__crash',
      'notes__ask',
      'notes__mixed',
    ]);
    expect(tool('lookup').description).toMatch(
      /^\(tool lookup of the MCP server notes, running in the sandbox\) Looks up/,
    );
    expect(tool('lookup').inputSchema).toMatchObject({ type: 'object', required: ['key'] });
    const result = await tool('lookup').execute({ key: 'OPS-412' }, context());
    expect(result).toEqual({
      content: expect.stringContaining('freeShippingThreshold is 39 EUR'),
      isError: false,
    });
    // The registry offers them after its own tools, which keep their order.
    const names = createDefaultToolRegistry().with(set.tools).names();
    expect(names.slice(0, 6)).toEqual(createDefaultToolRegistry().names());
    expect(names).toContain('notes__lookup');
  });

  it("checks the model's input against the tool's schema before the server sees it", async () => {
    const { tool } = await start();
    const missing = await tool('lookup').execute({}, context());
    expect(missing).toEqual({ content: 'invalid input for notes__lookup: key: required', isError: true });
    const wrong = await tool('lookup').execute({ key: 7, other: 1 }, context());
    expect(wrong.content).toBe(
      'invalid input for notes__lookup: key: expected string, got integer; other: not a known field',
    );
    expect((await tool('lookup').execute('{"key":', context())).content).toMatch(
      /\(input\): expected object, got string/,
    );
  });

  it('caps a result like every tool result and keeps only text (no control characters)', async () => {
    const { tool } = await start();
    const flood = await tool('flood').execute({}, context({ ...DEFAULT_TOOL_LIMITS, maxOutputChars: 2000 }));
    expect(flood.content.length).toBeLessThan(2200);
    expect(flood.content).toContain("characters of the MCP server's answer cut here");
    const mixed = await tool('mixed').execute({}, context());
    expect(mixed).toEqual({ content: 'one[31m red\n[image content left out]', isError: true });
  });

  it('stops a server that sends a message over the size cap; its tools then say it is gone', async () => {
    const { tool } = await start();
    const huge = await tool('huge').execute({}, context());
    expect(huge.isError).toBe(true);
    expect(huge.content).toMatch(/MCP server notes is not running \(sent a message over 4194304 bytes\)/);
    const after = await tool('lookup').execute({ key: 'OPS-412' }, context());
    expect(after.content).toMatch(/not running/);
  });

  it('gives a call that is never answered an error result at its deadline', async () => {
    const { tool } = await start('normal', { callTimeoutSec: 1 });
    const started = Date.now();
    const slow = await tool('sleep').execute({}, context());
    expect(slow).toEqual({
      content: 'MCP server notes did not answer tools/call within 1.0s',
      isError: true,
    });
    expect(Date.now() - started).toBeLessThan(5000);
    // The server lives on: another call is answered.
    expect((await tool('lookup').execute({ key: 'x' }, context())).content).toBe('no note about x');
  });

  it("refuses the server's own requests (sampling the model): this client offers nothing", async () => {
    const { tool } = await start();
    const asked = await tool('ask').execute({}, context());
    expect(asked.content).toContain('-32601');
    expect(asked.content).toContain('not offered by this client');
  });

  it('says so when a server dies during a call', async () => {
    const { tool } = await start();
    const crashed = await tool('crash').execute({}, context());
    expect(crashed).toEqual({
      content: 'MCP server notes is not running (exited with code 3)',
      isError: true,
    });
  });

  it('leaves out tools whose names or schemas the model APIs cannot take, and says why', async () => {
    const { set } = await start('bad-names');
    expect(set.tools).toHaveLength(7);
    expect(set.servers[0]!.skipped).toEqual([
      '"has space": not a tool name the model APIs accept (letters, digits, "_", "-"; notes__<name> at most 64)',
      `"${'x'.repeat(70)}": not a tool name the model APIs accept (letters, digits, "_", "-"; notes__<name> at most 64)`,
      'noschema: its inputSchema is not an object schema',
      'notes__lookup: listed twice',
      'a tool without a name',
    ]);
  });

  it('leaves out a schema nested too deep to serialise, and keeps the server', async () => {
    const { set } = await start('deep');
    expect(set.tools.map((t) => t.name)).toEqual(['notes__lookup']);
    expect(set.servers[0]!.skipped).toEqual(['deep: its inputSchema is over 16384 bytes or nested too deep']);
  });

  it('follows the list across pages', async () => {
    const { set } = await start('paged');
    expect(set.tools.map((t) => t.name)).toEqual(['notes__lookup', 'notes__flood']);
  });

  it("is the catalog's problem when a server does not start: named, with its stderr", async () => {
    const failure = await start('exit').catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ConfigError);
    expect((failure as ConfigError).message).toMatch(
      /^catalog agent.mcpServers.notes: the server did not start in the sandbox: MCP server notes is not running \(exited with code 3\); its stderr ends with: notes-server: cannot open its database$/,
    );
  });

  it('gives up on a server that never answers initialize, at its start-up deadline', async () => {
    const failure = await start('never-init', { startupTimeoutSec: 1 }).catch((e: unknown) => e);
    expect((failure as ConfigError).message).toContain(
      'MCP server notes did not start and list its tools within 1s (its startupTimeoutSec)',
    );
  });

  it('stops a server that writes endless lines that are not JSON-RPC', async () => {
    const failure = await start('noise').catch((e: unknown) => e);
    expect((failure as ConfigError).message).toMatch(/wrote more than 200 lines that are not JSON-RPC/);
  });

  it('says so when the sandbox cannot keep a server running', async () => {
    const box = new MemorySandbox({});
    const failure = await start('normal', {}, box).catch((e: unknown) => e);
    expect((failure as ConfigError).message).toMatch(
      /agent.mcpServers.notes: the server did not start in the sandbox: MCP server notes could not be started: this memory sandbox has no spawn handler/,
    );
  });

  it('stops every server it started when a later one fails', async () => {
    const box = sandbox();
    const good = mcpServerSchema.parse({ command: 'node', args: [SERVER] });
    const bad = mcpServerSchema.parse({ command: 'node', args: [SERVER, 'exit'] });
    const killed: string[] = [];
    box.onSpawn = (argv, io) => {
      const p = localSpawn(argv, io);
      return { ...p, kill: async () => (killed.push(argv[2] ?? 'normal'), p.kill()) };
    };
    await expect(startMcpTools(box, { a: good, b: bad })).rejects.toThrow(/agent.mcpServers.b/);
    expect(killed).toContain('normal');
  });
});

describe('catalog agent.mcpServers', () => {
  it('takes a command with arguments and fills in the time limits', () => {
    expect(mcpServersSchema.parse({ notes: { command: 'node', args: ['mcp/server.mjs'] } })).toEqual({
      notes: { command: 'node', args: ['mcp/server.mjs'], startupTimeoutSec: 30, callTimeoutSec: 120 },
    });
  });

  it('refuses names that cannot prefix a tool name, control characters and secrets', () => {
    expect(mcpServersSchema.safeParse({ Notes_1: { command: 'x' } }).success).toBe(false);
    expect(mcpServersSchema.safeParse({ notes: { command: 'x\u001b' } }).success).toBe(false);
    expect(mcpServersSchema.safeParse({ notes: { command: ' ' } }).success).toBe(false);
    expect(mcpServersSchema.safeParse({ notes: { command: 'x', env: { API_TOKEN: 'a' } } }).success).toBe(
      false,
    );
    expect(mcpServersSchema.safeParse({ notes: { command: 'x', extra: 1 } }).success).toBe(false);
  });
});
