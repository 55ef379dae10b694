/**
 * A "live" run through the real SDKs: the CLI talks to a local fake model server (the
 * Anthropic and OpenAI wire formats, on 127.0.0.1), records the conversation with
 * `--record`, and the recording replays to the same outcome. The API key stays on the host.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { prepareExampleCopy } from '../../src/demo.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images.js';
import { dockerEngine } from '../../src/sandbox/docker/engine.js';
import { startFakeModelServer, type FakeModelServer } from '../fake-model-server/server.js';
import { cleanEnv, runCli } from '../helpers/cli.js';
import type { AssistantContent } from '../../src/llm/types.js';

const CANARY = `sk-ant-canary-${Math.random().toString(36).slice(2)}-must-not-leak`;

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(full)));
    else out.push(full);
  }
  return out;
}

describe('fix with a real SDK against the fake model server, recorded and replayed', () => {
  let server: FakeModelServer | undefined;
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
  }, 900_000);
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it.each(['anthropic', 'openai'] as const)(
    '%s: ready-for-review, the recording replays, the key stays on the host',
    async (name) => {
      const copy = await prepareExampleCopy();
      const demo = JSON.parse(await readFile(join(copy.cassettes, 'OPS-412.json'), 'utf8')) as {
        turns: { content: AssistantContent[] }[];
      };
      server = await startFakeModelServer(demo.turns.map((t) => ({ reply: { content: t.content } })));
      const env: Record<string, string> =
        name === 'anthropic'
          ? { ANTHROPIC_API_KEY: CANARY, ANTHROPIC_BASE_URL: server.anthropicBaseUrl }
          : { OPENAI_API_KEY: CANARY, OPENAI_BASE_URL: server.openaiBaseUrl };
      const recording = join(copy.root, 'recorded.json');
      const live = await runCli(
        [
          'fix',
          'OPS-412',
          '--catalog',
          copy.catalog,
          '--provider',
          name,
          '--model',
          'fake-model',
          '--record',
          recording,
          '--json',
        ],
        { cwd: copy.root, env: cleanEnv(env) },
      );
      const result = JSON.parse(live.stdout) as {
        outcome: string;
        runDir: string;
        provider: { name: string };
      };
      expect(result.outcome, live.stderr).toBe('ready-for-review');
      expect(result.provider.name).toBe(name);
      expect(server.modelRequests()).toHaveLength(demo.turns.length);

      // The key reached the model server, and nothing the harness wrote.
      expect(JSON.stringify(server.requests.map((r) => r.headers))).toContain(CANARY);
      for (const file of [...(await filesUnder(result.runDir)), recording]) {
        expect(await readFile(file, 'utf8'), file).not.toContain(CANARY);
      }

      const cassette = JSON.parse(await readFile(recording, 'utf8')) as { version: number; turns: unknown[] };
      expect(cassette.version).toBe(1);
      expect(cassette.turns).toHaveLength(demo.turns.length);

      const again = await prepareExampleCopy();
      const replay = await runCli(
        ['fix', 'OPS-412', '--catalog', again.catalog, '--cassette', recording, '--json'],
        {
          cwd: again.root,
        },
      );
      expect(JSON.parse(replay.stdout).outcome, replay.stderr).toBe('ready-for-review');
      expect(await readFile(join(again.repo, 'src', 'shipping.ts'), 'utf8')).toMatch(/THRESHOLD = 39;/);
    },
  );
});
