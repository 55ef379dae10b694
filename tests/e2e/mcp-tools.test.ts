/**
 * MCP servers end to end: the built CLI runs `fix` on a copy of the bundled example whose
 * catalog lists an MCP server (a small stdio script of the repo, run by the image's Node
 * inside the attempt sandbox, never on the host). The built-in loop, played from a cassette,
 * calls the server's tool as `notes__lookup`; its answer reaches the transcript, and the
 * fix is verified as usual. A server that does not start ends the run `error`, naming it.
 * It runs what docs/agents.md shows under "MCP servers as tools".
 */
import { afterAll, describe, expect, it } from 'vitest';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { cleanEnv, runCli } from '../helpers/cli.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';

const SERVER = fileURLToPath(new URL('../fixtures/mcp/notes-server.mjs', import.meta.url));
const runIds = new Set<string>();

const CASSETTE = {
  version: 1,
  model: 'recorded: asks the notes server, then edits',
  turns: [
    {
      content: [{ type: 'tool_use', id: 't1', name: 'notes__lookup', input: { key: 'OPS-412' } }],
      stopReason: 'tool_use',
    },
    {
      content: [
        {
          type: 'tool_use',
          id: 't2',
          name: 'edit_file',
          input: {
            path: 'src/shipping.ts',
            search: 'export const FREE_SHIPPING_THRESHOLD = 50;',
            replacement: 'export const FREE_SHIPPING_THRESHOLD = 39;',
          },
        },
      ],
      stopReason: 'tool_use',
    },
    { content: [{ type: 'text', text: 'Done: the threshold is 39 EUR.' }], stopReason: 'end_turn' },
  ],
};

/** A copy of the example with the server in its repo and its catalog naming it with `args`. */
async function copyWithServer(args: string[]) {
  const copy = await exampleCopy();
  await mkdir(join(copy.repo, 'mcp'), { recursive: true });
  await copyFile(SERVER, join(copy.repo, 'mcp', 'notes-server.mjs'));
  const catalog = await readFile(copy.catalog, 'utf8');
  const servers = `  mcpServers:\n    notes:\n      command: node\n      args: ${JSON.stringify(args)}\n`;
  await writeFile(copy.catalog, catalog.replace('agent:\n', `agent:\n${servers}`));
  const cassette = join(copy.root, 'mcp-cassette.json');
  await writeFile(cassette, JSON.stringify(CASSETTE));
  return { copy, cassette };
}

async function fix(args: string[]) {
  const { copy, cassette } = await copyWithServer(args);
  const result = await runCli(
    [
      'fix',
      'OPS-412',
      '--catalog',
      copy.catalog,
      '--cassette',
      cassette,
      '--max-attempts',
      '1',
      '--no-apply',
      '--json',
    ],
    { cwd: copy.root, env: cleanEnv() },
  );
  const json = JSON.parse(result.stdout) as {
    runId: string;
    runDir: string;
    outcome: string;
    message?: string;
  };
  runIds.add(json.runId);
  return { result, json };
}

afterAll(async () => {
  const engine = dockerEngine();
  for (const runId of runIds) {
    for (const c of await engine.containers.list({ [LABEL.run]: runId })) {
      await engine.containers.remove(c.id).catch(() => undefined);
    }
  }
  await removeExampleCopies();
});

describe('fix with an MCP server of the catalog', () => {
  it("the built-in loop calls the server's tool in the sandbox, and its answer reaches the transcript", async () => {
    const { result, json } = await fix(['mcp/notes-server.mjs']);
    expect(json.outcome, result.stdout + result.stderr).toBe('ready-for-review');
    const transcript = await readFile(join(json.runDir, 'transcript.json'), 'utf8');
    // The tool was offered by its prefixed name and its answer came back as the tool result.
    expect(transcript).toContain('notes__lookup');
    expect(transcript).toContain(
      'the catalog rule freeShippingThreshold is 39 EUR; src/shipping.ts still says 50',
    );
    const record = JSON.parse(await readFile(join(json.runDir, 'run.json'), 'utf8')) as {
      agent?: string;
      attempts: { mcpServers?: { name: string; tools: string[] }[] }[];
    };
    expect(record.attempts[0]!.mcpServers?.[0]).toMatchObject({
      name: 'notes',
      tools: expect.arrayContaining(['notes__lookup', 'notes__flood']) as string[],
    });
  }, 600_000);

  it('ends the run `error` when the server does not start, naming it and what it said', async () => {
    const { result, json } = await fix(['mcp/notes-server.mjs', 'exit']);
    expect(json.outcome).toBe('error');
    expect(result.code).toBe(2);
    expect(result.stdout + result.stderr).toContain('agent.mcpServers.notes');
    expect(result.stdout + result.stderr).toContain('cannot open its database');
  }, 600_000);
});
