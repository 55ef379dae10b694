/**
 * The catalog's MCP servers in a `fix` of the built-in loop (in-memory sandboxes, the server
 * a real process standing in for the sandbox's): started in each attempt's sandbox, offered
 * to the model after the loop's own tools, stopped before the attempt's sandbox is frozen,
 * listed in the record; a server that does not start ends the run `error`, named.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { runFix, type FixOptions } from '../../../src/fix/run-fix.js';
import { resolveRun } from '../../../src/runs/record.js';
import type { SandboxProcess } from '../../../src/sandbox/types.js';
import type { MemorySandbox } from '../../fakes/memory-sandbox.js';
import { localSpawn } from '../../helpers/local-process.js';
import { memoryExample } from '../../helpers/memory-run.js';
import { scripted, text, toolUse } from '../agent/helpers.js';

const SERVER = fileURLToPath(new URL('../../fixtures/mcp/notes-server.mjs', import.meta.url));
const roots: string[] = [];
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

async function fixWithServer(mode: string) {
  const processes: { sandbox: MemorySandbox; process: SandboxProcess; killedBeforeFreeze: boolean }[] = [];
  const example = await memoryExample(undefined, (sandbox) => {
    let freezing = false;
    const freeze = sandbox.freeze.bind(sandbox);
    sandbox.freeze = () => {
      freezing = true;
      return freeze();
    };
    sandbox.onSpawn = (argv, io) => {
      const process = localSpawn(argv, io);
      const entry = { sandbox, process, killedBeforeFreeze: false };
      processes.push(entry);
      return {
        ...process,
        kill: async () => {
          if (!freezing) entry.killedBeforeFreeze = true;
          await process.kill();
        },
      };
    };
  });
  roots.push(example.root);
  const catalog = await readFile(example.catalog, 'utf8');
  const servers = `  mcpServers:\n    notes:\n      command: node\n      args: [${JSON.stringify(SERVER)}, ${mode}]\n`;
  await writeFile(example.catalog, catalog.replace('agent:\n', `agent:\n${servers}`));
  const provider = scripted([
    { content: [toolUse('m1', 'notes__lookup', { key: 'OPS-412' })] },
    {
      content: [
        toolUse('e1', 'edit_file', {
          path: 'src/shipping.ts',
          search: 'FREE_SHIPPING_THRESHOLD = 50;',
          replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
        }),
      ],
    },
    { content: [text('fixed')] },
  ]);
  const options: FixOptions = {
    ticket: 'OPS-412',
    catalogFile: example.catalog,
    keep: 'never',
    apply: false,
    force: false,
    rebuild: false,
    cwd: example.root,
    env: example.env,
    signal: new AbortController().signal,
    readStdin: async () => '',
    provider: 'replay',
    maxAttempts: 1,
  };
  const result = await runFix(options, example.deps(provider));
  return { result, provider, processes, runsDir: join(example.repo, '.sandbox-harness', 'runs') };
}

describe('MCP servers in a fix with the built-in loop', () => {
  it("offers the server's tools, returns its answer to the model, and stops it before the freeze", async () => {
    const { result, provider, processes, runsDir } = await fixWithServer('normal');
    expect(result.outcome).toBe('ready-for-review');
    const names = provider.requests[0]!.tools.map((t) => t.name);
    expect(names.slice(0, 6)).toEqual([
      'read_file',
      'write_file',
      'edit_file',
      'list_files',
      'search',
      'run_command',
    ]);
    expect(names).toContain('notes__lookup');
    const answer = JSON.stringify(provider.requests[1]!.messages.at(-1));
    expect(answer).toContain('the catalog rule freeShippingThreshold is 39 EUR');
    expect(processes).toHaveLength(1);
    expect(processes[0]!.killedBeforeFreeze).toBe(true);
    const { record } = await resolveRun(runsDir, result.runId);
    expect(record.attempts[0]!.mcpServers).toEqual([
      {
        name: 'notes',
        tools: [
          'notes__lookup',
          'notes__flood',
          'notes__huge',
          'notes__sleep',
          'notes__crash',
          'notes__ask',
          'notes__mixed',
        ],
        skipped: [],
      },
    ]);
  });

  it('ends the run `error`, naming the server, when it does not start; no model call is made', async () => {
    const { result, provider } = await fixWithServer('exit');
    expect(result.outcome).toBe('error');
    expect(result.error?.message).toMatch(
      /agent\.mcpServers\.notes: the server did not start in the sandbox/,
    );
    expect(provider.requests).toHaveLength(0);
  });
});
