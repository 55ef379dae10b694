/**
 * The model bridge's numbers, run by `bridge-bench.mjs` with tsx (it uses the tests' fake
 * model server and agent-CLI helpers) and printed as one JSON object on stdout.
 *
 * 1. Overhead per model call: one small non-streamed Messages call at a time, `reps` rounds
 *    after `warmup`, by the same client program (Node's fetch, keep-alive), the two sides of
 *    each pair call by call in turn:
 *    - on the host: `direct` (straight to the fake model server) against `localRelay` (the
 *      relay run as a host child process, through the bridge to the same server: framing,
 *      checks, metering, records; no container);
 *    - in a network-none Docker sandbox, which can reach nothing else: `sandboxDirect` (a
 *      stand-in server started inside it) against `sandbox` (the relay there, over the exec
 *      stream to the bridge and the host's server: what an agent in a sandbox pays).
 *    Overhead = the pair's median difference.
 * 2. Agent start, per CLI (Claude Code, Codex) in its image: from the `exec` of a one-turn
 *    task to the first model request the server receives (`firstCallMs`), and to the agent's
 *    exit after the answer "Done." (`sessionMs`). Fresh sandbox and relay each repetition.
 *
 * Usage: node --import tsx bench/bridge-measure.ts [--reps N] [--warmup N] [--agent-reps N] [--skip-agents]
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { ModelBridge } from '../src/model-bridge/bridge.js';
import { startRelay, type BridgeConnection } from '../src/model-bridge/session.js';
import { HttpUpstream } from '../src/model-bridge/upstream.js';
import { sandboxProvider } from '../src/sandbox/backend-registry.js';
import type { Sandbox } from '../src/sandbox/types.js';
import {
  startFakeModelServer,
  toAnthropicWire,
  type FakeModelServer,
  type ScriptStep,
} from '../tests/fake-model-server/server.js';
import { MemorySandbox } from '../tests/fakes/memory-sandbox.js';
import {
  agentImage,
  CLAUDE_CODE,
  claudeCommand,
  claudeEnv,
  CODEX,
  codexCommand,
  codexConfig,
  codexEnv,
} from '../tests/helpers/agent-clis.js';
import { fixtureImage } from '../tests/helpers/docker.js';
import { localSpawn } from '../tests/helpers/local-process.js';

const MODEL = 'claude-sonnet-4-5';
const KEY = 'sk-bench-not-a-real-key';
const SMALL_REPLY = {
  model: MODEL,
  content: [{ type: 'text' as const, text: 'ok' }],
  usage: { inputTokens: 8, outputTokens: 1 },
};

/**
 * A stand-in model server as a script any Node runs: answers every Messages call with the
 * same small JSON the fake model server gives, prints its URL. The "direct" reference inside
 * a sandbox, where the host's server cannot be reached.
 */
export const LOCAL_SERVER = `
const answer = ${JSON.stringify(JSON.stringify(toAnthropicWire(SMALL_REPLY, 0)))};
require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
    res.end(answer);
  });
}).listen(0, '127.0.0.1', function () { process.stdout.write('http://127.0.0.1:' + this.address().port + '\\n'); });
process.stdin.on('end', () => process.exit(0)).resume();
`;

/**
 * The client, as a script any Node runs: `reps` rounds after `warmup`, each round one small
 * call to every URL in turn (so load drift hits them all alike); samples in ms per URL as JSON.
 * `local` stands for a LOCAL_SERVER the client starts as its own child process.
 */
export const CLIENT = `
const [warmup, reps, ...targets] = [Number(process.argv[1]), Number(process.argv[2]), ...process.argv.slice(3)];
const body = JSON.stringify({ model: '${MODEL}', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
const call = async (url) => {
  const response = await fetch(url + '/v1/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'placeholder', 'anthropic-version': '2023-06-01' },
    body,
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error('HTTP ' + response.status + ': ' + text);
};
const startLocal = () => new Promise((resolve, reject) => {
  const child = require('node:child_process').spawn(process.execPath, ['-e', process.env.LOCAL_SERVER], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdout.once('data', (chunk) => resolve({ url: chunk.toString().trim(), child }));
  child.once('error', reject);
});
let local;
(async () => {
  const urls = [];
  for (const target of targets) {
    if (target === 'local') { local = await startLocal(); urls.push(local.url); } else urls.push(target);
  }
  for (let i = 0; i < warmup; i++) for (const url of urls) await call(url);
  const samples = urls.map(() => []);
  for (let i = 0; i < reps; i++) {
    for (let u = 0; u < urls.length; u++) {
      const t = performance.now();
      await call(urls[u]);
      samples[u].push(performance.now() - t);
    }
  }
  local?.child.stdin.end();
  process.stdout.write(JSON.stringify(samples));
})().catch((e) => { process.stderr.write(String(e)); process.exitCode = 1; local?.child.kill(); });
`;

function parseArgs(argv: string[]) {
  const options = { reps: 50, warmup: 20, agentReps: 3, skipAgents: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const next = () => Number(argv[++i]);
    if (arg === '--reps') options.reps = next();
    else if (arg === '--warmup') options.warmup = next();
    else if (arg === '--agent-reps') options.agentReps = next();
    else if (arg === '--skip-agents') options.skipAgents = true;
    else throw new Error(`unknown argument ${arg}`);
  }
  return options;
}

const log = (line: string) => process.stderr.write(`${line}\n`);

function smallReplies(count: number): ScriptStep[] {
  return Array.from({ length: count }, () => ({ reply: SMALL_REPLY }));
}

function hostClient(warmup: number, reps: number, targets: string[]): Promise<number[][]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', CLIENT, String(warmup), String(reps), ...targets], {
      env: { LOCAL_SERVER },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out) as number[][]) : reject(new Error(err)),
    );
  });
}

async function sandboxClient(
  sandbox: Sandbox,
  warmup: number,
  reps: number,
  targets: string[],
): Promise<number[][]> {
  const result = await sandbox.exec(`node -e "$CLIENT" ${warmup} ${reps} ${targets.join(' ')}`, {
    env: { CLIENT, LOCAL_SERVER },
    timeoutMs: 600_000,
  });
  if (result.exitCode !== 0) throw new Error(`client in the sandbox failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as number[][];
}

function bridgeFor(server: FakeModelServer): ModelBridge {
  return new ModelBridge({
    upstream: new HttpUpstream({ anthropic: { baseUrl: server.anthropicBaseUrl, apiKey: KEY } }),
    allowedModels: [MODEL],
  });
}

/**
 * Host: the host's model server directly and through a relay on the host, call by call in
 * turn. Sandbox: a model server inside the sandbox directly (a network-none sandbox can reach
 * nothing else) and the host's server through the sandbox's relay, call by call in turn.
 */
async function overhead(reps: number, warmup: number) {
  // Three ways reach the fake server: straight, through the host's relay, through the sandbox's.
  const per = (reps + warmup) * 3;
  const server = await startFakeModelServer(smallReplies(per));
  const memory = new MemorySandbox({});
  memory.onSpawn = localSpawn;
  let localConnection: BridgeConnection | undefined;
  let sandbox: Sandbox | undefined;
  let dockerConnection: BridgeConnection | undefined;
  try {
    localConnection = await startRelay(memory, bridgeFor(server));
    log(`  on the host: ${reps} calls straight to the model server and through a relay, in turn ...`);
    const [directMs, localRelayMs] = await hostClient(warmup, reps, [server.url, localConnection.baseUrl]);
    const provider = await sandboxProvider('docker');
    sandbox = await provider.backend.create({ image: await fixtureImage('tiny-node'), role: 'bridge-bench' });
    dockerConnection = await startRelay(sandbox, bridgeFor(server));
    log(`  in a network-none sandbox: ${reps} calls to a server there and through the relay, in turn ...`);
    const [sandboxDirectMs, sandboxMs] = await sandboxClient(sandbox, warmup, reps, [
      'local',
      dockerConnection.baseUrl,
    ]);
    return {
      directMs: directMs!,
      localRelayMs: localRelayMs!,
      sandboxDirectMs: sandboxDirectMs!,
      sandboxMs: sandboxMs!,
    };
  } finally {
    localConnection?.close();
    dockerConnection?.close();
    await sandbox?.dispose();
    await server.close();
  }
}

interface AgentRun {
  firstCallMs: number;
  sessionMs: number;
}

async function agentStart(cli: typeof CLAUDE_CODE, reps: number): Promise<AgentRun[]> {
  const image = await agentImage(await fixtureImage('tiny-node'), cli);
  const provider = await sandboxProvider('docker');
  const model = cli === CLAUDE_CODE ? MODEL : 'gpt-5.2-codex';
  const runs: AgentRun[] = [];
  for (let i = 0; i < reps; i++) {
    const server = await startFakeModelServer([
      { reply: { model, content: [{ type: 'text', text: 'Done.' }] } },
    ]);
    let firstCallAt: number | undefined;
    const upstream = new HttpUpstream({
      anthropic: { baseUrl: server.anthropicBaseUrl, apiKey: KEY },
      openai: { baseUrl: server.openaiBaseUrl, apiKey: KEY },
    });
    const timed = {
      families: upstream.families,
      send: (...args: Parameters<HttpUpstream['send']>) => {
        firstCallAt ??= performance.now();
        return upstream.send(...args);
      },
    };
    const sandbox = await provider.backend.create({ image, role: 'bridge-bench' });
    const connection = await startRelay(
      sandbox,
      new ModelBridge({ upstream: timed, allowedModels: [model] }),
    );
    try {
      const home = '/home/sandbox';
      let env: Record<string, string>;
      let command: string;
      if (cli === CLAUDE_CODE) {
        env = claudeEnv(connection.baseUrl, model, home);
        command = claudeCommand('Say done.', model);
      } else {
        env = { ...codexEnv(home), CODEX_CONFIG: codexConfig(connection.baseUrl, model) };
        await sandbox.exec(
          'mkdir -p "$CODEX_HOME" && printf "%s" "$CODEX_CONFIG" > "$CODEX_HOME/config.toml"',
          { env },
        );
        command = codexCommand('Say done.');
      }
      const started = performance.now();
      const result = await sandbox.exec(command, { env, timeoutMs: 180_000 });
      const sessionMs = performance.now() - started;
      if (result.exitCode !== 0 || firstCallAt === undefined) {
        throw new Error(`${cli.name} failed (exit ${result.exitCode}): ${result.stderr.slice(-500)}`);
      }
      runs.push({ firstCallMs: firstCallAt - started, sessionMs });
    } finally {
      connection.close();
      await sandbox.dispose();
      await server.close();
    }
  }
  return runs;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  log(`model bridge overhead: ${options.reps} small calls after ${options.warmup} warm-up(s), in pairs ...`);
  const calls = await overhead(options.reps, options.warmup);
  const agents: Record<string, AgentRun[]> = {};
  if (!options.skipAgents) {
    for (const cli of [CLAUDE_CODE, CODEX]) {
      log(`  ${cli.name} ${cli.version}: ${options.agentReps} one-turn sessions ...`);
      agents[cli.name] = await agentStart(cli, options.agentReps);
    }
  }
  process.stdout.write(
    JSON.stringify({
      calls,
      agents,
      versions: { 'claude-code': CLAUDE_CODE.version, codex: CODEX.version },
    }),
  );
}

// Run as a program; imported (to read the scripts above), it does nothing.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href)
  main().catch((error: unknown) => {
    log(`bridge bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  });
