/**
 * Third-party agent CLIs, installed from the npm registry on the host, run in a hardened
 * sandbox with no network (the node base image plus the CLI's layer); their model calls go
 * to the relay on the sandbox's loopback, over the harness's exec stream to the bridge on the
 * host, which adds the real key and forwards to the fake model server. The server's script
 * makes the agent edit a file in /workspace and stop. The same session then replays from its
 * transcript with no server at all. The real key and a host canary appear nowhere in the
 * sandbox.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelBridge } from '../../src/model-bridge/bridge.js';
import { ReplayUpstream } from '../../src/model-bridge/bridge-replay.js';
import { startRelay } from '../../src/model-bridge/session.js';
import { FileTranscript, readTranscript } from '../../src/model-bridge/transcript.js';
import { HttpUpstream, type Upstream } from '../../src/model-bridge/upstream.js';
import { sandboxProvider } from '../../src/sandbox/backend-registry.js';
import type { Sandbox } from '../../src/sandbox/types.js';
import { startFakeModelServer, type FakeModelServer, type ScriptStep } from '../fake-model-server/server.js';
import {
  agentImage,
  CLAUDE_CODE,
  claudeCommand,
  claudeEnv,
  CODEX,
  codexCommand,
  codexConfig,
  codexEnv,
} from '../helpers/agent-clis.js';
import { fixtureImage, requireDocker } from '../helpers/docker.js';

const REAL_KEY = 'sk-REAL-b7e1c9d04f2a6e8c3b5d7f9a1c3e5b7d';
const CANARY = `HOST-CANARY-${process.pid}-e3b0c442`;
const HOME = '/home/sandbox';
const TASK = 'In src/greet.js, greet should say "hi" instead of "hello".';

let scratch: string;
let claudeImage: string;
let codexImage: string;
const sandboxes: Sandbox[] = [];
const servers: FakeModelServer[] = [];

beforeAll(async () => {
  await requireDocker();
  process.env.SANDBOX_HARNESS_TEST_CANARY = CANARY;
  scratch = await mkdtemp(join(tmpdir(), 'bridge-docker-'));
  const repo = await fixtureImage('tiny-node');
  claudeImage = await agentImage(repo, CLAUDE_CODE);
  codexImage = await agentImage(repo, CODEX);
});

afterAll(async () => {
  delete process.env.SANDBOX_HARNESS_TEST_CANARY;
  for (const sandbox of sandboxes) await sandbox.dispose();
  for (const server of servers) await server.close().catch(() => undefined);
  await rm(scratch, { recursive: true, force: true });
});

async function sandboxOf(image: string): Promise<Sandbox> {
  const provider = await sandboxProvider('docker');
  const sandbox = await provider.backend.create({ image, role: 'model-bridge-test' });
  sandboxes.push(sandbox);
  return sandbox;
}

async function fakeServer(script: ScriptStep[]): Promise<FakeModelServer> {
  const server = await startFakeModelServer(script);
  servers.push(server);
  return server;
}

/** Runs one agent command in a fresh sandbox of `image` with a bridge over `upstream`. */
async function runAgent(
  image: string,
  upstream: Upstream,
  model: string,
  transcriptPath: string,
  command: (baseUrl: string) => { setup?: string; env: Record<string, string>; run: string },
) {
  const transcript = new FileTranscript(transcriptPath);
  const bridge = new ModelBridge({ upstream, allowedModels: [model], transcript });
  const sandbox = await sandboxOf(image);
  const connection = await startRelay(sandbox, bridge);
  const spec = command(connection.baseUrl);
  if (spec.setup) {
    const setup = await sandbox.exec(spec.setup, { env: spec.env });
    expect(setup.exitCode, setup.stderr).toBe(0);
  }
  const result = await sandbox.exec(spec.run, { env: spec.env, timeoutMs: 180_000 });
  connection.close();
  await transcript.close();
  return { sandbox, bridge, result, greet: (await sandbox.readFile('src/greet.js')).toString() };
}

/** Nothing of the real key or the host's canary in the sandbox: its environment, files, processes. */
async function expectNoSecrets(sandbox: Sandbox): Promise<void> {
  const look = await sandbox.exec(
    `env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; grep -rlaF -e "$K" -e "$C" /workspace /home /tmp /etc /opt 2>/dev/null; echo done`,
    { env: { K: REAL_KEY.slice(3), C: CANARY.slice(5) } },
  );
  expect(look.stdout).toContain('done');
  // The search terms themselves are in the grep's own environment; only a hit names a file.
  const hits = look.stdout.split('\n').filter((line) => line.startsWith('/'));
  expect(hits).toEqual([]);
  const environment = look.stdout.split('\n').filter((line) => !/^(K|C)=/.test(line));
  expect(environment.join('\n')).not.toContain(REAL_KEY);
  expect(environment.join('\n')).not.toContain(CANARY);
}

describe('Sandbox.spawn on Docker (what the relay rides on)', () => {
  it('keeps stdin open and passes every byte both ways; ending stdin ends it', async () => {
    const sandbox = await sandboxOf(claudeImage);
    const chunks: Buffer[] = [];
    const process = await sandbox.spawn!(['cat'], {
      stdout: new Writable({
        write(chunk: Buffer, _encoding, callback) {
          chunks.push(chunk);
          callback();
        },
      }),
      stderr: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
    });
    const bytes = Buffer.from(Array.from({ length: 256 * 1024 }, (_, i) => (i * 7919) % 256));
    process.input.write(bytes.subarray(0, 1000));
    process.input.write(bytes.subarray(1000));
    process.input.end();
    expect(await process.exited).toBe(0);
    await expect.poll(() => Buffer.concat(chunks).length).toBe(bytes.length);
    expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
  });

  it('runs as the sandbox user with the sandbox environment only, and kill ends its whole tree', async () => {
    const sandbox = await sandboxOf(claudeImage);
    let out = '';
    const process = await sandbox.spawn!(['sh', '-c', 'id -u; env; setsid sleep 4242 & sleep 4243 & cat'], {
      stdout: new Writable({
        write(chunk: Buffer, _encoding, callback) {
          out += chunk.toString();
          callback();
        },
      }),
      stderr: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
      env: { EXTRA: 'given' },
    });
    await expect.poll(() => out).toContain('EXTRA=given');
    expect(out.split('\n')[0]).toBe('1000');
    expect(out).not.toContain(CANARY);
    const sleepers = async () =>
      (
        await sandbox.exec(
          `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^[s]leep 424' || true`,
        )
      ).stdout.trim();
    expect(await sleepers()).toBe('2');
    await process.kill();
    await expect.poll(sleepers).toBe('0');
    expect(await process.exited).not.toBe(0);
  });
});

describe('claude-code through the model bridge', () => {
  const MODEL = 'claude-sonnet-4-5';
  const script: ScriptStep[] = [
    {
      reply: {
        model: MODEL,
        content: [
          { type: 'text', text: 'Let me read the file.' },
          { type: 'tool_use', id: 'toolu_01', name: 'Read', input: { file_path: '/workspace/src/greet.js' } },
        ],
      },
    },
    {
      reply: {
        model: MODEL,
        content: [
          {
            type: 'tool_use',
            id: 'toolu_02',
            name: 'Edit',
            input: {
              file_path: '/workspace/src/greet.js',
              old_string: 'hello, ${name}',
              new_string: 'hi, ${name}',
            },
          },
        ],
      },
    },
    { reply: { model: MODEL, content: [{ type: 'text', text: 'Done: greet now says hi.' }] } },
  ];
  const claude = (baseUrl: string) => ({
    env: claudeEnv(baseUrl, MODEL, HOME),
    run: claudeCommand(TASK, MODEL),
  });
  let transcriptPath: string;

  it('edits /workspace as the fake server scripts it, with the real key added only on the host', async () => {
    const server = await fakeServer(script);
    transcriptPath = join(scratch, 'claude.jsonl');
    const upstream = new HttpUpstream({ anthropic: { baseUrl: server.anthropicBaseUrl, apiKey: REAL_KEY } });
    const { sandbox, bridge, result, greet } = await runAgent(
      claudeImage,
      upstream,
      MODEL,
      transcriptPath,
      claude,
    );
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ is_error: false, result: 'Done: greet now says hi.' });
    expect(greet).toContain('`hi, ${name}`');
    const calls = server.modelRequests();
    expect(calls.length).toBe(3);
    for (const call of calls) {
      expect(call.headers['x-api-key']).toBe(REAL_KEY);
      expect(call.headers.authorization).toBeUndefined();
      expect((call.body as { stream?: boolean }).stream).toBe(true);
    }
    expect(bridge.problems).toEqual([]);
    await expectNoSecrets(sandbox);
  });

  it('replays the recorded session with no model server running', async () => {
    for (const server of servers) await server.close().catch(() => undefined);
    const exchanges = await readTranscript(transcriptPath);
    expect(exchanges.filter((e) => e.outcome === 'answered')).toHaveLength(3);
    const replay = new ReplayUpstream(exchanges);
    const { result, greet, bridge } = await runAgent(
      claudeImage,
      replay,
      MODEL,
      join(scratch, 'claude-replay.jsonl'),
      claude,
    );
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(greet).toContain('`hi, ${name}`');
    expect(replay.remaining()).toBe(0);
    expect(bridge.problems).toEqual([]);
  });
});

describe('codex through the model bridge', () => {
  const MODEL = 'gpt-5.2-codex';
  const script: ScriptStep[] = [
    {
      reply: {
        model: MODEL,
        content: [
          {
            type: 'tool_use',
            id: 'call_01',
            name: 'exec_command',
            input: { cmd: "sed -i 's/hello, /hi, /' src/greet.js && cat src/greet.js" },
          },
        ],
      },
    },
    { reply: { model: MODEL, content: [{ type: 'text', text: 'Done: greet now says hi.' }] } },
  ];
  const codex = (baseUrl: string) => ({
    env: { ...codexEnv(HOME), CODEX_CONFIG: codexConfig(baseUrl, MODEL) },
    setup: 'mkdir -p "$CODEX_HOME" && printf "%s" "$CODEX_CONFIG" > "$CODEX_HOME/config.toml"',
    run: codexCommand(TASK),
  });
  let transcriptPath: string;

  it('edits /workspace with its shell tool, over the Responses API, streamed', async () => {
    const server = await fakeServer(script);
    transcriptPath = join(scratch, 'codex.jsonl');
    const upstream = new HttpUpstream({ openai: { baseUrl: server.openaiBaseUrl, apiKey: REAL_KEY } });
    const { sandbox, bridge, result, greet } = await runAgent(
      codexImage,
      upstream,
      MODEL,
      transcriptPath,
      codex,
    );
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(greet).toContain('`hi, ${name}`');
    const calls = server.modelRequests();
    expect(calls.map((call) => call.path)).toEqual(['/v1/responses', '/v1/responses']);
    for (const call of calls) expect(call.headers.authorization).toBe(`Bearer ${REAL_KEY}`);
    expect(bridge.problems).toEqual([]);
    await expectNoSecrets(sandbox);
  });

  it('replays the recorded session with no model server running', async () => {
    for (const server of servers) await server.close().catch(() => undefined);
    const replay = new ReplayUpstream(await readTranscript(transcriptPath));
    const { result, greet } = await runAgent(
      codexImage,
      replay,
      MODEL,
      join(scratch, 'codex-replay.jsonl'),
      codex,
    );
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(greet).toContain('`hi, ${name}`');
    expect(replay.remaining()).toBe(0);
  });
});
