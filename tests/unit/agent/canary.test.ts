/**
 * The host holds the model key; nothing of it may reach the sandbox (commands, their
 * environment, written files) or the event log. A canary key is set in the real process
 * environment and used for real against the fake server, then searched for everywhere else.
 */
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { JsonlEventSink } from '../../../src/agent/events.js';
import { runAgentLoop } from '../../../src/agent/loop.js';
import { createDefaultToolRegistry } from '../../../src/agent/tools/registry.js';
import { createProvider } from '../../../src/llm/registry.js';
import type { ExecOptions } from '../../../src/sandbox/types.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';
import { startFakeModelServer, type FakeModelServer } from '../../fake-model-server/server.js';
import { text, toolUse } from './helpers.js';

const CANARIES = {
  anthropic: {
    variable: 'ANTHROPIC_API_KEY',
    urlVariable: 'ANTHROPIC_BASE_URL',
    value: 'sk-ant-canary-7f3a9c1e5b2d8f4a',
  },
  openai: {
    variable: 'OPENAI_API_KEY',
    urlVariable: 'OPENAI_BASE_URL',
    value: 'sk-canary-openai-0b9e8d7c6a5f4e3d',
  },
} as const;

let server: FakeModelServer | undefined;
afterEach(async () => {
  vi.unstubAllEnvs();
  await server?.close();
  server = undefined;
});

describe.each(['anthropic', 'openai'] as const)('a canary %s key', (name) => {
  it('is used to call the model but never reaches the sandbox or the event log', async () => {
    const canary = CANARIES[name];
    server = await startFakeModelServer([
      {
        reply: {
          content: [
            toolUse('t1', 'run_command', { command: 'env; cat ~/.anthropic/* ~/.config/openai 2>/dev/null' }),
          ],
        },
      },
      { reply: { content: [toolUse('t2', 'write_file', { path: 'notes.txt', content: 'what I found' })] } },
      { reply: { content: [toolUse('t3', 'search', { pattern: 'sk-' })] } },
      { reply: { content: [text('done')] } },
    ]);
    vi.stubEnv(canary.variable, canary.value);
    vi.stubEnv(canary.urlVariable, name === 'anthropic' ? server.anthropicBaseUrl : server.openaiBaseUrl);
    // No `env` argument: credentials come from the real process environment, as in production.
    const provider = await createProvider({ name, model: 'm', retry: { baseDelayMs: 1 } });

    const execs: Array<{ command: string; options: ExecOptions }> = [];
    const sandbox = new MemorySandbox({ 'README.md': '# demo\n' }, (command, options) => {
      execs.push({ command, options });
      return { exitCode: 0, stdout: `PATH=/usr/bin\nHOME=/home/sandbox\n` };
    });
    const logFile = join(await mkdtemp(join(tmpdir(), 'canary-')), 'events.jsonl');
    // No redaction list: the log must be clean by construction, not by scrubbing.
    const events = new JsonlEventSink(logFile, { secrets: [] });

    const result = await runAgentLoop({
      sandbox,
      provider,
      tools: createDefaultToolRegistry(),
      system: 'system',
      firstUserMessage: 'Find any API keys.',
      limits: { maxTurns: 10 },
      events,
    });

    expect(result.status).toBe('completed');
    // The key did go to the model server, so the test would see a leak if there were one.
    expect(JSON.stringify(server.modelRequests()[0]?.headers)).toContain(canary.value);
    expect(execs.length).toBeGreaterThanOrEqual(2);
    for (const exec of execs) {
      expect(exec.command).not.toContain(canary.value);
      expect(JSON.stringify(exec.options.env ?? {})).not.toContain(canary.value);
    }
    for (const path of sandbox.filePaths()) expect(sandbox.text(path)).not.toContain(canary.value);
    const log = await readFile(logFile, 'utf8');
    expect(log.trim().split('\n').length).toBeGreaterThanOrEqual(7);
    expect(log).not.toContain(canary.value);
    expect(JSON.stringify(result.messages)).not.toContain(canary.value);
  });
});
