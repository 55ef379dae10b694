/**
 * A "live" run through the real SDKs: the CLI talks to a local fake model server (the
 * Anthropic and OpenAI wire formats, on 127.0.0.1), records the conversation with
 * `--record`, and the recording replays to the same outcome. The API key stays on the host:
 * one turn prints the sandbox's whole environment (its own and pid 1's) and home folder,
 * and the transcript, the run record and the recorded cassette are searched, not only the
 * event log (which redacts known secrets, so it alone would hide a leak).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exampleCopy, liveFixArgs, removeExampleCopies } from '../helpers/example.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import {
  startFakeModelServer,
  toOpenAIWire,
  type FakeModelServer,
  type ScriptStep,
} from '../fake-model-server/server.js';
import { runCli } from '../helpers/cli.js';
import { canaryEnv, expectNoCanary, expectNoCanaryIn } from '../helpers/canary.js';
import type { AssistantContent } from '../../src/llm/types.js';

/** A turn that shows the model everything of the sandbox's environment it can see. */
const SHOW_ENV: AssistantContent[] = [
  { type: 'text', text: 'First, what does this sandbox hold?' },
  {
    type: 'tool_use',
    id: 'env1',
    name: 'run_command',
    input: { command: "env; echo '--- pid 1'; tr '\\0' '\\n' < /proc/1/environ; echo '--- home'; ls -la ~" },
  },
];

// Two full fixes per test (live, then replayed): minutes on a loaded machine.
describe(
  'fix with a real SDK against the fake model server, recorded and replayed',
  { timeout: 600_000 },
  () => {
    let server: FakeModelServer | undefined;
    beforeAll(async () => {
      await dockerEngine().ping(5000);
      await ensureBaseImage('node', {});
    }, 900_000);
    const runIds: string[] = [];
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });
    afterAll(async () => {
      // A failed run keeps its containers; only this file's runs are removed.
      for (const runId of runIds) await runCli(['gc', '--run', runId]);
      await removeExampleCopies();
    });

    it('a server that reports impossible token counts: its answers are refused and counted by estimate, and the cost limit still ends the run', async () => {
      const copy = await exampleCopy();
      const script: ScriptStep[] = [];
      for (let n = 0; n < 60; n++) {
        const body = toOpenAIWire(
          { content: [{ type: 'tool_use', id: `t${n}`, name: 'list_files', input: {} }], model: 'gpt-4.1' },
          n,
        ) as Record<string, unknown>;
        // Every other answer claims minus a million prompt tokens (once: minus a million dollars).
        const usage =
          n % 2 === 0
            ? { prompt_tokens: -1_000_000, completion_tokens: 10 }
            : { prompt_tokens: 1, completion_tokens: 1 };
        script.push({ raw: { ...body, usage } });
      }
      server = await startFakeModelServer(script);
      const { env } = canaryEnv({ OPENAI_BASE_URL: server.openaiBaseUrl });
      const live = await runCli(
        liveFixArgs(
          copy,
          'openai',
          join(copy.root, 'recorded.json'),
          '--model',
          'gpt-4.1',
          '--cost-limit',
          '0.02',
        ),
        { cwd: copy.root, env },
      );
      const result = JSON.parse(live.stdout) as { runId: string; outcome: string; runDir: string };
      runIds.push(result.runId);
      expect(result.outcome, live.stderr).toBe('budget');
      expect(live.code).toBe(1);
      const record = JSON.parse(await readFile(join(result.runDir, 'run.json'), 'utf8')) as {
        cost: { usd: number; limitUsd: number };
      };
      expect(record.cost.usd).toBeGreaterThanOrEqual(0.02);
      expect(record.cost.usd).toBeLessThan(1);
      expect(server.remaining()).toBeGreaterThan(20);
    });

    it.each(['anthropic', 'openai'] as const)(
      '%s: ready-for-review, the recording replays, the key stays on the host',
      async (name) => {
        const copy = await exampleCopy();
        const demo = JSON.parse(await readFile(join(copy.cassettes, 'OPS-412.json'), 'utf8')) as {
          turns: { content: AssistantContent[] }[];
        };
        const turns = [demo.turns[0]!.content, SHOW_ENV, ...demo.turns.slice(1).map((t) => t.content)];
        server = await startFakeModelServer(turns.map((content) => ({ reply: { content } })));
        // Both keys are set (and other tokens); the provider uses its own, the sandbox sees none.
        const { canary, variables, env } = canaryEnv(
          name === 'anthropic'
            ? { ANTHROPIC_BASE_URL: server.anthropicBaseUrl }
            : { OPENAI_BASE_URL: server.openaiBaseUrl },
        );
        const key = name === 'anthropic' ? variables.ANTHROPIC_API_KEY! : variables.OPENAI_API_KEY!;
        const recording = join(copy.root, 'recorded.json');
        const live = await runCli(liveFixArgs(copy, name, recording), { cwd: copy.root, env });
        const result = JSON.parse(live.stdout) as {
          runId: string;
          outcome: string;
          runDir: string;
          provider: { name: string };
        };
        runIds.push(result.runId);
        expect(result.outcome, live.stderr).toBe('ready-for-review');
        expect(result.provider.name).toBe(name);
        expect(server.modelRequests()).toHaveLength(turns.length);

        // The key reached the model server, in a header.
        expect(JSON.stringify(server.requests.map((r) => r.headers))).toContain(key);
        // The sandbox's environment really was printed and recorded: its own variables are in
        // the transcript and went back to the model...
        const transcript = await readFile(join(result.runDir, 'transcript.json'), 'utf8');
        for (const seen of ['SANDBOX_HARNESS=1', 'SERVICE_CATALOG=', '--- pid 1', '--- home'])
          expect(transcript).toContain(seen);
        expect(JSON.stringify(server.modelRequests().map((r) => r.body))).toContain('SERVICE_CATALOG=');
        // ...and no canary is in it, in the run record, the other files of the run, the
        // recorded cassette, the CLI's output, or any request body the model server got.
        expectNoCanaryIn(canary, transcript, 'transcript.json');
        expectNoCanaryIn(canary, await readFile(join(result.runDir, 'run.json'), 'utf8'), 'run.json');
        await expectNoCanary(canary, result.runDir, recording);
        expectNoCanaryIn(canary, live.stdout + live.stderr, "the CLI's output");
        for (const r of server.requests) expectNoCanaryIn(canary, r.rawBody, 'a request to the model server');

        const cassette = JSON.parse(await readFile(recording, 'utf8')) as {
          version: number;
          turns: unknown[];
        };
        expect(cassette.version).toBe(1);
        expect(cassette.turns).toHaveLength(turns.length);
        expect(JSON.stringify(cassette.turns)).toContain('/proc/1/environ');

        const again = await exampleCopy();
        const replay = await runCli(
          ['fix', 'OPS-412', '--catalog', again.catalog, '--cassette', recording, '--json'],
          {
            cwd: again.root,
          },
        );
        const replayed = JSON.parse(replay.stdout) as { runId: string; outcome: string };
        runIds.push(replayed.runId);
        expect(replayed.outcome, replay.stderr).toBe('ready-for-review');
        expect(await readFile(join(again.repo, 'src', 'shipping.ts'), 'utf8')).toMatch(/THRESHOLD = 39;/);
      },
    );
  },
);
