/**
 * The two places a CLI agent (claude-code, codex, command) differs from the built-in loop in
 * `fix`: its attempt sandboxes come from the run's image plus the agent's layer (installed on
 * the host from the npm registry, made once per image and kind, then reused), and its turn
 * at an attempt is one run of the CLI behind the model bridge. Everything after (freeze,
 * collect, gate, verify, review, feedback, apply, records) is the same as for the loop.
 */
import { mkdir } from 'node:fs/promises';
import { LoopBudget, type AgentLoopResult } from '../agent/loop.js';
import { buildFirstUserMessage } from '../agent/prompt.js';
import { prepareAgentLayer } from '../agent-kinds/agent-layer.js';
import { runCliAgent } from '../agent-kinds/run-cli-agent.js';
import { ConfigError } from '../errors.js';
import { FileTranscript } from '../model-bridge/transcript.js';
import type { Sandbox } from '../sandbox/types.js';
import type { RepoImage } from '../image-context/request.js';
import type { Run } from './types.js';

/**
 * Puts the CLI agent's layer on the attempt image (the run's image, or its git twin). A
 * backend that cannot add layers cannot run a CLI agent: said before any attempt starts.
 */
export async function layerCliAgent(run: Run, image: RepoImage): Promise<void> {
  const cli = run.agent.cli;
  if (!cli) return;
  const backend = run.deps.backend;
  if (!backend.layerImage) {
    throw new ConfigError(
      `the ${backend.name} backend cannot add an agent's layer to an image; use --agent builtin`,
    );
  }
  run.progress.phase('image', `the ${cli.kind.name} agent's layer`);
  const layer = await prepareAgentLayer(cli.kind, {
    say: (line) => run.progress.detail(line),
    signal: run.signal,
  });
  const layered = await backend.layerImage(run.attemptImage.tag ?? image.tag, layer, { signal: run.signal });
  run.attemptImage.tag = layered.image;
  run.progress.end(`${layered.reused ? 'reused' : 'made'} ${layered.image}`);
}

/** What the CLI agent is asked: the ticket, what it may change, how it is checked, the feedback. */
export function cliTaskText(run: Run, feedback: string | undefined): string {
  const agent = run.catalog.catalog.agent;
  const tests =
    typeof agent.testCommand === 'string'
      ? agent.testCommand
      : agent.testCommand.map((l) => l.command).join(' && ');
  const ticket = buildFirstUserMessage({
    ticket: { id: run.ticket.id, title: run.ticket.title, body: run.ticket.body },
    ...(feedback ? { feedback } : {}),
  });
  return [
    'You are working in the repository in the current folder (/workspace). Fix this ticket:',
    '',
    ticket,
    '## Rules',
    `- Change only files matching: ${agent.editableFiles.join(', ')}. Any other change rejects the whole attempt.`,
    `- Your change is verified by running \`${tests}\` in a fresh copy of the repository.`,
    '- Do not edit tests unless the editable files include them. Stop when the change is made.',
    '',
  ].join('\n');
}

/** The CLI agent's turn at attempt `n`, in the shape of the loop's result for the steps after it. */
export async function cliAgentStep(
  run: Run,
  n: number,
  box: Sandbox,
  feedback: string | undefined,
  signal: AbortSignal,
): Promise<AgentLoopResult> {
  const cli = run.agent.cli!;
  const agent = run.catalog.catalog.agent;
  const used = run.record.tokens.input + run.record.tokens.output;
  const budget = new LoopBudget({
    maxTurns: agent.maxTurns,
    ...(agent.tokenBudget ? { tokenBudget: Math.max(0, agent.tokenBudget - used) } : {}),
    costExceeded: () => run.costs.exceeded(),
  });
  await mkdir(run.dir.path(`attempts/${n}`), { recursive: true });
  // The bridge's record of every exchange: this attempt's transcript (and a cassette to replay).
  const transcript = new FileTranscript(run.dir.path(`attempts/${n}/bridge.jsonl`));
  const task = cliTaskText(run, feedback);
  run.progress.detail(`${cli.kind.name} at work (${cli.model}, through the model bridge)`);
  try {
    const result = await runCliAgent({
      sandbox: box,
      kind: cli.kind,
      task,
      model: cli.model,
      upstream: cli.upstream,
      budget,
      maxTurns: agent.maxTurns,
      costs: run.costs,
      transcript,
      ...(agent.command ? { command: agent.command } : {}),
      ...(agent.mcpServers ? { mcpServers: agent.mcpServers } : {}),
      timeoutMs: run.catalog.catalog.sandbox.timeouts.attemptSec * 1000,
      signal,
      onProblem: (message) => run.progress.detail(`model bridge: ${message}`),
    });
    await run.dir.writeFile(
      `attempts/${n}/agent-output.txt`,
      `${cli.kind.name} exited ${result.exitCode} (${result.status})\n${result.problems.map((p) => `bridge: ${p}\n`).join('')}${result.output}`,
    );
    run.transcript.push({
      attempt: n,
      role: 'maker',
      system: '',
      messages: [{ role: 'user', content: [{ type: 'text', text: task }] }],
    });
    return {
      status: result.status,
      turns: result.turns,
      usage: result.usage,
      messages: [],
      finalText: result.output.slice(-2000),
      delegations: [],
    };
  } finally {
    await transcript.close();
  }
}
