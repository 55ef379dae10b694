/**
 * The agent loop in a real sandbox: both real SDKs (against the local fake model server)
 * and the replay provider drive the same tool-using conversation through Docker, and a
 * canary API key held by the host never reaches the container or the event log.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dockerBackend } from '../../src/sandbox/docker/index.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import type { Sandbox } from '../../src/sandbox/types.js';
import { createProvider } from '../../src/llm/provider-registry.js';
import { ReplayProvider } from '../../src/llm/replay.js';
import { JsonlEventSink } from '../../src/agent/events.js';
import { startFakeModelServer, type FakeModelServer } from '../fake-model-server/server.js';
import {
  SCENARIO_TURNS,
  runSharedLoopScenario,
  scenarioCassette,
} from '../unit/agent/shared-loop-scenario.js';
import { fixtureImage } from '../helpers/docker.js';

const CANARY = `sk-ant-canary-${Math.random().toString(36).slice(2)}-do-not-leak`;

describe('agent loop in a real Docker sandbox', () => {
  let image = '';
  let server: FakeModelServer | undefined;
  const sandboxes: Sandbox[] = [];
  const sandbox = async () => {
    const s = await dockerBackend().create({ image, role: 'agent-it' });
    sandboxes.push(s);
    return s;
  };

  beforeAll(async () => {
    image = await fixtureImage('conformance');
    process.env.ANTHROPIC_API_KEY = CANARY;
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  afterAll(async () => {
    delete process.env.ANTHROPIC_API_KEY;
    await Promise.all(sandboxes.map((s) => s.dispose()));
  });

  it.each(['anthropic', 'openai'] as const)(
    'the real %s SDK drives a complete loop through Docker',
    async (name) => {
      server = await startFakeModelServer(SCENARIO_TURNS.map((reply) => ({ reply })));
      const env =
        name === 'anthropic'
          ? { ANTHROPIC_API_KEY: CANARY, ANTHROPIC_BASE_URL: server.anthropicBaseUrl }
          : { OPENAI_API_KEY: CANARY, OPENAI_BASE_URL: server.openaiBaseUrl };
      const provider = await createProvider({ name, model: 'test-model', env });
      const box = await sandbox();
      await runSharedLoopScenario({ sandbox: box, provider });
      // The key went to the model server (host side) and nowhere else.
      expect(JSON.stringify(server.requests.map((r) => r.headers))).toContain(CANARY);
    },
  );

  it('a 429 then 200 is retried and the tool runs once', async () => {
    server = await startFakeModelServer([
      { error: { status: 429, retryAfter: '0' } },
      ...SCENARIO_TURNS.map((reply) => ({ reply })),
    ]);
    const provider = await createProvider({
      name: 'anthropic',
      model: 'test-model',
      env: { ANTHROPIC_API_KEY: CANARY, ANTHROPIC_BASE_URL: server.anthropicBaseUrl },
    });
    const box = await sandbox();
    const result = await runSharedLoopScenario({ sandbox: box, provider });
    expect(result.turns).toBe(4);
    expect(server.modelRequests().length).toBe(5);
    // The edit ran once: the file has exactly one corrected line.
    expect((await box.exec("grep -c 'Hello, world!' sandbox-harness-scenario.txt")).stdout.trim()).toBe('1');
  });

  it('replay drives the same loop deterministically, and the canary reaches neither sandbox nor log', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-agent-it-'));
    const logFile = join(dir, 'events.jsonl');
    const runs: string[] = [];
    for (let i = 0; i < 2; i++) {
      const provider = new ReplayProvider(scenarioCassette(), 'scenario.json');
      const box = await sandbox();
      // Redaction off: the log must be clean by construction, not by scrubbing.
      const events = new JsonlEventSink(logFile, { secrets: [] });
      const result = await runSharedLoopScenario({ sandbox: box, provider, events });
      runs.push(JSON.stringify(result.messages));
      const env = await box.exec('env; cat /proc/1/environ');
      expect(env.stdout).not.toContain(CANARY);
      const grep = await box.exec(
        `grep -rl ${JSON.stringify(CANARY)} /workspace /tmp /home 2>/dev/null | wc -l`,
      );
      expect(grep.stdout.trim()).toBe('0');
      const inspected = await dockerEngine().containers.inspect(box.id);
      expect(JSON.stringify(inspected?.env)).not.toContain(CANARY);
    }
    expect(runs[0]).toBe(runs[1]);
    const log = await readFile(logFile, 'utf8');
    expect(log).toContain('"tool_call"');
    expect(log).not.toContain(CANARY);
  });
});
