/**
 * The host holds the model key; nothing of it may reach the sandbox (commands, their
 * environment, written files) or the event log. A canary key is set in the real process
 * environment and used for real against the fake server, then searched for everywhere else.
 * The sandbox's commands really run (`sh -c`, in a scratch folder, with exactly the
 * variables the loop passes and nothing of this process), so what the model gets back is
 * what a process given those variables really saw, not text the test wrote.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { JsonlEventSink } from '../../../src/agent/events.js';
import { runAgentLoop } from '../../../src/agent/loop.js';
import { createDefaultToolRegistry } from '../../../src/agent/tools/tool-registry.js';
import { createProvider } from '../../../src/llm/provider-registry.js';
import type { ExecOptions } from '../../../src/sandbox/types.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';
import { startFakeModelServer, type FakeModelServer } from '../../fake-model-server/server.js';
import { text, toolUse } from './helpers.js';

/** Runs `command` with only a minimal PATH, a scratch HOME and the variables the loop passed. */
async function runForReal(command: string, options: ExecOptions, scratch: string) {
  return new Promise<{ exitCode: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      '/bin/sh',
      ['-c', command],
      {
        cwd: join(scratch, 'workspace'),
        env: { PATH: '/usr/bin:/bin', HOME: join(scratch, 'home'), ...options.env },
        timeout: 10_000,
      },
      (error, stdout, stderr) => {
        const code = (error as { code?: unknown } | null)?.code;
        resolve({ exitCode: typeof code === 'number' ? code : error ? 1 : 0, stdout, stderr });
      },
    );
  });
}

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
let scratch: string | undefined;
afterEach(async () => {
  vi.unstubAllEnvs();
  await server?.close();
  server = undefined;
  if (scratch) await rm(scratch, { recursive: true, force: true });
  scratch = undefined;
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

    const dir = await mkdtemp(join(tmpdir(), 'canary-'));
    scratch = dir;
    await mkdir(join(dir, 'workspace'));
    await mkdir(join(dir, 'home'));
    const execs: Array<{ command: string; options: ExecOptions; stdout: string }> = [];
    const sandbox = new MemorySandbox({ 'README.md': '# demo\n' }, async (command, options) => {
      const result = await runForReal(command, options, dir);
      execs.push({ command, options, stdout: result.stdout });
      return result;
    });
    const logFile = join(dir, 'events.jsonl');
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
      expect(exec.stdout).not.toContain(canary.value);
    }
    // `env` really ran and its output went back to the model: a leaked variable would be
    // in the next request's body, where the key itself never belongs (it is a header).
    expect(execs[0]!.stdout).toContain('PATH=/usr/bin:/bin');
    const bodies = server.modelRequests().map((r) => JSON.stringify(r.body));
    expect(bodies[1]).toContain('PATH=/usr/bin:/bin');
    for (const body of bodies) expect(body).not.toContain(canary.value);
    for (const path of sandbox.filePaths()) expect(sandbox.text(path)).not.toContain(canary.value);
    const log = await readFile(logFile, 'utf8');
    expect(log.trim().split('\n').length).toBeGreaterThanOrEqual(7);
    expect(log).not.toContain(canary.value);
    expect(JSON.stringify(result.messages)).not.toContain(canary.value);
  });
});
