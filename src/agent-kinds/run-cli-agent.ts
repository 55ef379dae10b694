/**
 * One CLI agent's turn at a task, in a sandbox that already has its layer: the model relay
 * started (its Node from the layer), the bridge behind it with the run's models, budgets and
 * transcript, the agent's configuration written into a home of its own, then one exec of its
 * command line as the sandbox user under the attempt's time left. The sandbox keeps its
 * network (none, or the catalog's egress): the relay listens on its loopback, and the only
 * way out to a model is the bridge on the host, which holds the keys.
 */
import type { LoopBudget } from '../agent/loop.js';
import type { CostMeter } from '../llm/cost.js';
import type { Usage } from '../llm/types.js';
import { ModelBridge } from '../model-bridge/bridge.js';
import { startRelay } from '../model-bridge/session.js';
import type { TranscriptSink } from '../model-bridge/transcript.js';
import type { Upstream } from '../model-bridge/upstream.js';
import type { McpServers } from '../mcp/agent-config.js';
import type { LoopStop } from '../outcomes.js';
import type { Sandbox } from '../sandbox/types.js';
import { TASK_VARIABLE, type CliKind } from './agent-kind.js';
import { shellWord } from './cli-kinds.js';
import { RELAY_NODE } from './packages.js';

/** The agent's home: the sandbox user's, on the sandbox's tmpfs, never the workspace. */
export const AGENT_HOME = '/tmp/sandbox-harness-agent';
/** Task text past this is cut (it travels in the environment). */
const MAX_TASK_BYTES = 96 * 1024;
/** What is kept of the agent's own output for the record. */
const MAX_OUTPUT_BYTES = 256 * 1024;

export interface CliAgentRun {
  sandbox: Sandbox;
  kind: CliKind;
  task: string;
  model: string;
  upstream: Upstream;
  /** Model calls and tokens: the attempt's budget, the same as the built-in loop's. */
  budget: LoopBudget;
  maxTurns: number;
  costs?: CostMeter;
  transcript?: TranscriptSink;
  /** The catalog's `agent.command`, for the `command` kind. */
  command?: string;
  /** The catalog's `agent.mcpServers`, given to the agent as its MCP configuration. */
  mcpServers?: McpServers | undefined;
  timeoutMs: number;
  signal: AbortSignal;
  /** Host-side problems of the bridge as they happen (a provider failure, a broken relay). */
  onProblem?: (message: string) => void;
}

export interface CliAgentResult {
  status: LoopStop;
  turns: number;
  usage: Usage;
  exitCode: number;
  /** The agent's stdout and stderr, capped: its own words, hostile data. */
  output: string;
  /** What went wrong on the host's side of the bridge. */
  problems: readonly string[];
}

/** Task text as bytes the environment can carry: capped, without NUL. */
function taskValue(task: string): string {
  const clean = task.replace(/\0/g, '');
  const bytes = Buffer.from(clean);
  return bytes.length <= MAX_TASK_BYTES
    ? clean
    : `${bytes.subarray(0, MAX_TASK_BYTES).toString('utf8')}\n[cut]`;
}

/** One shell script writing the kind's files from variables (never from its text). */
function filesScript(files: readonly { path: string }[]): string {
  const lines = [`mkdir -p ${shellWord(AGENT_HOME)}`];
  files.forEach((file, i) => {
    const dir = file.path.slice(0, file.path.lastIndexOf('/'));
    lines.push(
      `mkdir -p ${shellWord(dir)} && printf '%s' "$SANDBOX_HARNESS_FILE_${i}" > ${shellWord(file.path)}`,
    );
  });
  return lines.join(' && ');
}

export async function runCliAgent(run: CliAgentRun): Promise<CliAgentResult> {
  const bridge = new ModelBridge({
    upstream: run.upstream,
    allowedModels: [run.model],
    budget: run.budget,
    ...(run.costs ? { costs: run.costs } : {}),
    ...(run.transcript ? { transcript: run.transcript } : {}),
    ...(run.onProblem ? { onProblem: run.onProblem } : {}),
  });
  const connection = await startRelay(run.sandbox, bridge, { signal: run.signal, node: RELAY_NODE });
  try {
    const launch = run.kind.launch({
      model: run.model,
      baseUrl: connection.baseUrl,
      home: AGENT_HOME,
      maxTurns: run.maxTurns,
      ...(run.command ? { command: run.command } : {}),
      ...(run.mcpServers ? { mcpServers: run.mcpServers } : {}),
    });
    const fileEnv = Object.fromEntries(launch.files.map((f, i) => [`SANDBOX_HARNESS_FILE_${i}`, f.content]));
    const setup = await run.sandbox.exec(filesScript(launch.files), { env: fileEnv, signal: run.signal });
    if (setup.exitCode !== 0) {
      throw new Error(
        `the ${run.kind.name} agent's configuration could not be written: ${setup.stderr.trim().slice(0, 300)}`,
      );
    }
    const result = await run.sandbox.exec(launch.command, {
      env: { ...launch.env, [TASK_VARIABLE]: taskValue(run.task) },
      timeoutMs: Math.max(1000, run.timeoutMs),
      maxOutputBytes: MAX_OUTPUT_BYTES,
      signal: run.signal,
    });
    const status: LoopStop = run.signal.aborted
      ? 'interrupted'
      : (bridge.stopReason ?? (result.timedOut ? 'timeout' : 'completed'));
    return {
      status,
      turns: run.budget.turns,
      usage: { ...run.budget.usage },
      exitCode: result.exitCode,
      output: `${result.stdout}${result.stderr ? `\n--- stderr\n${result.stderr}` : ''}`,
      problems: bridge.problems,
    };
  } finally {
    connection.close();
  }
}
