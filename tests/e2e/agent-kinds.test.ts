/**
 * Agent kinds end to end: the built CLI runs `fix` on the bundled example with a CLI agent
 * instead of the built-in loop. The agent is Codex from the npm registry (installed on the
 * host with install scripts off, layered onto the repo image), running in the attempt
 * sandbox with no network; its model calls reach the fake model server on the host only
 * through the model bridge, which adds the key. The `command` kind runs a scripted program
 * the same way. Nothing here calls a real model. It runs what docs/agents.md shows.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { runCli } from '../helpers/cli.js';
import { canaryEnv, expectNoCanary, expectNoCanaryIn } from '../helpers/canary.js';
import { startFakeModelServer, type FakeModelServer, type ScriptStep } from '../fake-model-server/server.js';
import { readTranscript } from '../../src/model-bridge/transcript.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';

const { env: ENV, canary: CANARY, variables } = canaryEnv();
const MODEL = 'gpt-5.2-codex';
const runIds = new Set<string>();
let server: FakeModelServer | undefined;

interface FixJson {
  runId: string;
  runDir: string;
  outcome: string;
  attempts: { n: number; verdict: string; changedFiles: string[] }[];
}

/** One Codex turn that runs `cmd` with its shell tool, then one that says it is done. */
function codexScript(cmd: string): ScriptStep[] {
  return [
    {
      reply: {
        model: MODEL,
        content: [{ type: 'tool_use', id: 'call_1', name: 'exec_command', input: { cmd } }],
      },
    },
    { reply: { model: MODEL, content: [{ type: 'text', text: 'Done.' }] } },
  ];
}

async function fixWith(script: ScriptStep[], extra: string[], catalogEdit?: (text: string) => string) {
  server = await startFakeModelServer(script);
  const copy = await exampleCopy();
  if (catalogEdit) {
    const { writeFile } = await import('node:fs/promises');
    await writeFile(copy.catalog, catalogEdit(await readFile(copy.catalog, 'utf8')));
  }
  const result = await runCli(
    ['fix', 'OPS-412', '--catalog', copy.catalog, '--max-attempts', '1', '--json', ...extra],
    {
      cwd: copy.root,
      env: { ...ENV, OPENAI_BASE_URL: server.openaiBaseUrl, ANTHROPIC_BASE_URL: server.anthropicBaseUrl },
    },
  );
  let json: FixJson;
  try {
    json = JSON.parse(result.stdout) as FixJson;
  } catch {
    throw new Error(`fix did not print JSON (exit ${result.code}):\n${result.stdout}\n${result.stderr}`);
  }
  runIds.add(json.runId);
  expectNoCanaryIn(CANARY, result.stdout + result.stderr, "fix's output");
  await expectNoCanary(CANARY, json.runDir);
  return { result, json, copy };
}

afterEach(async () => {
  await server?.close().catch(() => undefined);
  server = undefined;
});

afterAll(async () => {
  const engine = dockerEngine();
  for (const runId of runIds) {
    for (const c of await engine.containers.list({ [LABEL.run]: runId })) {
      await engine.containers.remove(c.id).catch(() => undefined);
    }
  }
  await removeExampleCopies();
});

describe('fix --agent codex (from the npm registry, through the model bridge)', () => {
  it('reaches ready-for-review; the key is added on the host only, and the bridge records the session', async () => {
    const { json, copy } = await fixWith(
      codexScript("sed -i 's/FREE_SHIPPING_THRESHOLD = 50/FREE_SHIPPING_THRESHOLD = 39/' src/shipping.ts"),
      ['--agent', 'codex', '--provider', 'openai', '--model', MODEL, '--no-apply'],
    );
    expect(json.outcome, JSON.stringify(json)).toBe('ready-for-review');
    expect(json.attempts.map((a) => a.verdict)).toEqual(['passed']);
    expect(json.attempts[0]!.changedFiles).toEqual(['src/shipping.ts']);
    const patch = await readFile(join(json.runDir, 'attempts', '1', 'patch.diff'), 'utf8');
    expect(patch).toContain('+export const FREE_SHIPPING_THRESHOLD = 39;');
    // The example itself is untouched (--no-apply) and nothing reached the host's repo.
    expect(await readFile(join(copy.repo, 'src', 'shipping.ts'), 'utf8')).toContain('= 50;');
    const calls = server!.modelRequests();
    expect(calls.map((c) => c.path)).toEqual(['/v1/responses', '/v1/responses']);
    // The real key only between the bridge and the provider.
    for (const call of calls) expect(call.headers.authorization).toBe(`Bearer ${variables.OPENAI_API_KEY}`);
    const exchanges = await readTranscript(join(json.runDir, 'attempts', '1', 'bridge.jsonl'));
    expect(exchanges.map((e) => [e.outcome, e.model])).toEqual([
      ['answered', MODEL],
      ['answered', MODEL],
    ]);
    // The task the agent got (the ticket) went in; the placeholder key, never the real one.
    expect(JSON.stringify(exchanges[0]!.request.body)).toContain('OPS-412');
  }, 900_000);

  it('is rejected when it edits a test file, and nothing is verified', async () => {
    const { json } = await fixWith(
      codexScript(
        "sed -i 's/FREE_SHIPPING_THRESHOLD = 50/FREE_SHIPPING_THRESHOLD = 39/' src/shipping.ts && echo '// x' >> test/shipping.test.ts",
      ),
      ['--agent', 'codex', '--provider', 'openai', '--model', MODEL],
    );
    expect(json.outcome).toBe('rejected');
    expect(json.attempts.map((a) => a.verdict)).toEqual(['rejected']);
  }, 900_000);

  it('is refused before anything runs when the provider cannot answer its API', async () => {
    const copy = await exampleCopy();
    const result = await runCli(
      ['fix', 'OPS-412', '--catalog', copy.catalog, '--agent', 'codex', '--provider', 'anthropic', '--json'],
      { cwd: copy.root, env: ENV },
    );
    expect(result.code).toBe(2);
    expect(result.stdout + result.stderr).toContain('--provider openai');
  }, 120_000);
});

describe('fix with the command kind (a scripted program in the image)', () => {
  // A tiny agent: asks the model (through the bridge, Anthropic Messages) for one shell
  // command and runs it. Only what the image has: Node and sh.
  const AGENT = [
    "node --input-type=module -e '",
    'const r = await fetch(process.env.ANTHROPIC_BASE_URL + "/v1/messages", { method: "POST",',
    ' headers: { "content-type": "application/json", "x-api-key": process.env.ANTHROPIC_API_KEY, "anthropic-version": "2023-06-01" },',
    ' body: JSON.stringify({ model: process.env.SANDBOX_HARNESS_MODEL, max_tokens: 100, messages: [{ role: "user", content: process.env.SANDBOX_HARNESS_TASK }] }) });',
    'const j = await r.json(); if (!r.ok) { console.error(JSON.stringify(j)); process.exit(1); }',
    '(await import("node:child_process")).execSync(j.content[0].text, { stdio: "inherit" });',
    "'",
  ].join('');

  it('reaches ready-for-review with its model reached through the bridge', async () => {
    const { json } = await fixWith(
      [
        {
          reply: {
            model: 'fake-model',
            content: [
              {
                type: 'text',
                text: "sed -i 's/FREE_SHIPPING_THRESHOLD = 50/FREE_SHIPPING_THRESHOLD = 39/' src/shipping.ts",
              },
            ],
          },
        },
      ],
      ['--agent', 'command', '--provider', 'anthropic', '--model', 'fake-model', '--no-apply'],
      (text) => text.replace('agent:\n', `agent:\n  command: ${JSON.stringify(AGENT)}\n`),
    );
    const said = await readFile(join(json.runDir, 'attempts', '1', 'agent-output.txt'), 'utf8').catch(String);
    expect(json.outcome, said).toBe('ready-for-review');
    expect(server!.modelRequests()[0]!.headers['x-api-key']).toBe(variables.ANTHROPIC_API_KEY);
  }, 900_000);
});
