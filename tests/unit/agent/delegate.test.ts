/**
 * Sub-agents: the `delegate` tool runs the same loop with an empty conversation, the same
 * sandbox and tools (but `delegate`), on the parent's budget, with its events nested under
 * the call. The main agent and the sub-agent replay their own queues of one cassette.
 */
import { describe, expect, it } from 'vitest';
import { MemoryEventSink } from '../../../src/agent/events.js';
import { runAgentLoop, type AgentLoopOptions } from '../../../src/agent/loop.js';
import { MAX_CONCLUSION_CHARS } from '../../../src/agent/tools/delegate.js';
import { createDefaultToolRegistry } from '../../../src/agent/tools/tool-registry.js';
import { formatEventLog } from '../../../src/cli/commands/logs.js';
import { ConfigError, SandboxDead } from '../../../src/errors.js';
import { CassettePlayer, ReplayProvider, type CassetteTurn } from '../../../src/llm/replay.js';
import type { AssistantContent, ModelRole, Usage } from '../../../src/llm/types.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';
import { LoopingProvider, text, toolUse } from './helpers.js';
import { toolResults } from './shared-loop-scenario.js';

function turn(
  content: AssistantContent[],
  usage: Usage = { inputTokens: 10, outputTokens: 5 },
): CassetteTurn {
  return {
    content,
    stopReason: content.some((block) => block.type === 'tool_use') ? 'tool_use' : 'end_turn',
    usage,
  } as CassetteTurn;
}

/** The main agent's and the sub-agents' providers, on their own queues of one cassette. */
function roles(main: CassetteTurn[], delegate: CassetteTurn[]) {
  const player = new CassettePlayer({
    version: 2,
    model: 'scripted',
    roles: { main: { turns: main }, delegate: { turns: delegate } },
  });
  const of = (role: ModelRole) => new ReplayProvider(player, undefined, role);
  return { main: of('main'), delegate: of('delegate') };
}

const FILES = {
  'src/shipping.ts': 'export const THRESHOLD = 50; // NOISY-DETAIL-ONLY-THE-SUB-AGENT-READ\n',
  'src/other.ts': 'export const unrelated = true;\n',
};

const FIND = 'Find the file that defines THRESHOLD and report its path and line.';
const CONCLUSION = 'THRESHOLD is defined in src/shipping.ts, line 1 (value 50).';

function options(
  overrides: Partial<AgentLoopOptions> & Pick<AgentLoopOptions, 'provider'>,
): AgentLoopOptions {
  return {
    sandbox: new MemorySandbox(FILES),
    tools: createDefaultToolRegistry({ delegate: true }),
    system: 'system prompt',
    firstUserMessage: 'Fix the ticket.',
    limits: { maxTurns: 20 },
    events: new MemoryEventSink(),
    ...overrides,
  };
}

describe('delegate', () => {
  it("returns only the sub-agent's conclusion: its messages never enter the parent's history", async () => {
    const { main, delegate } = roles(
      [turn([toolUse('d1', 'delegate', { task: FIND })]), turn([text('Found it; done.')])],
      [
        turn([toolUse('s1', 'search', { pattern: 'THRESHOLD' })]),
        turn([toolUse('s2', 'read_file', { path: 'src/shipping.ts' })]),
        turn([text(CONCLUSION)]),
      ],
    );
    const sandbox = new MemorySandbox(FILES, () => ({
      exitCode: 0,
      stdout: 'src/shipping.ts:1:THRESHOLD\n',
    }));
    const result = await runAgentLoop(options({ provider: main, sandbox, subAgent: { provider: delegate } }));

    expect(result.status).toBe('completed');
    expect(toolResults(result.messages)).toEqual([
      { type: 'tool_result', toolUseId: 'd1', content: CONCLUSION, isError: false },
    ]);
    // Neither the parent's history nor anything the main model was sent holds the sub-agent's work.
    expect(result.messages).toHaveLength(4);
    for (const seen of [JSON.stringify(result.messages), JSON.stringify(main.requests)]) {
      expect(seen).not.toContain('NOISY-DETAIL');
      expect(seen).not.toContain('"s1"');
    }
    // The sub-agent started from nothing but the task, in the same sandbox, without delegate.
    const [first] = delegate.requests;
    expect(first?.messages).toHaveLength(1);
    expect(JSON.stringify(first?.messages)).toContain(FIND);
    expect(JSON.stringify(first?.messages)).not.toContain('Fix the ticket.');
    expect(first?.system).toBe('system prompt');
    expect(first?.tools.map((tool) => tool.name)).toEqual([
      'read_file',
      'write_file',
      'edit_file',
      'list_files',
      'search',
      'run_command',
    ]);
    expect(sandbox.commands).toHaveLength(1);
    // Its conversation is kept apart, for the run record.
    expect(result.delegations).toMatchObject([{ toolUseId: 'd1', status: 'completed', turns: 3 }]);
    expect(JSON.stringify(result.delegations[0]?.messages)).toContain('NOISY-DETAIL');
  });

  it("counts the sub-agent's turns and tokens in the result", async () => {
    const { main, delegate } = roles(
      [
        turn([toolUse('d1', 'delegate', { task: FIND })], { inputTokens: 100, outputTokens: 10 }),
        turn([text('ok')]),
      ],
      [turn([text(CONCLUSION)], { inputTokens: 40, outputTokens: 4 })],
    );
    const result = await runAgentLoop(options({ provider: main, subAgent: { provider: delegate } }));
    expect(result.turns).toBe(3);
    expect(result.usage).toEqual({ inputTokens: 100 + 40 + 10, outputTokens: 10 + 4 + 5 });
  });

  it('shares the max-turns budget: a sub-agent that never finishes stops both loops at the limit', async () => {
    const { main } = roles([turn([toolUse('d1', 'delegate', { task: FIND })])], []);
    const sub = new LoopingProvider();
    const result = await runAgentLoop(
      options({ provider: main, subAgent: { provider: sub }, limits: { maxTurns: 4 } }),
    );
    expect(sub.calls).toBe(3);
    expect(result.status).toBe('max-turns');
    expect(result.turns).toBe(4);
    expect(result.delegations).toMatchObject([{ status: 'max-turns', turns: 3 }]);
    expect(toolResults(result.messages)[0]).toMatchObject({ toolUseId: 'd1', isError: true });
    expect(toolResults(result.messages)[0]?.content).toMatch(
      /^the sub-agent stopped before it finished \(max-turns\) after 3 turns/,
    );
  });

  it('shares the token budget', async () => {
    const spend = { inputTokens: 250, outputTokens: 50 };
    const { main, delegate } = roles(
      [turn([toolUse('d1', 'delegate', { task: FIND })], spend), turn([text('never reached')], spend)],
      Array.from({ length: 10 }, (_, i) => turn([toolUse(`s${i}`, 'list_files', {})], spend)),
    );
    const result = await runAgentLoop(
      options({
        provider: main,
        subAgent: { provider: delegate },
        limits: { maxTurns: 50, tokenBudget: 1_000 },
      }),
    );
    expect(result.status).toBe('token-budget');
    expect(result.delegations).toMatchObject([{ status: 'token-budget', turns: 3 }]);
    expect(result.usage).toEqual({ inputTokens: 1_000, outputTokens: 200 });
    expect(main.position).toBe(1);
  });

  it("nests the sub-agent's events under the call, in the log and in `logs`", async () => {
    const { main, delegate } = roles(
      [turn([toolUse('d1', 'delegate', { task: FIND })]), turn([text('done')])],
      [turn([toolUse('s1', 'read_file', { path: 'src/shipping.ts' })]), turn([text(CONCLUSION)])],
    );
    const events = new MemoryEventSink();
    await runAgentLoop(options({ provider: main, subAgent: { provider: delegate }, events, attempt: 1 }));
    expect(
      events.events.map((e) => [e.kind, e.tool ?? e.status ?? '', e.agent ?? 'main', e.parent ?? '']),
    ).toEqual([
      ['model_call', '', 'main', ''],
      ['model_call', '', 'delegate', 'd1'],
      ['tool_call', 'read_file', 'delegate', 'd1'],
      ['model_call', '', 'delegate', 'd1'],
      ['loop_end', 'completed', 'delegate', 'd1'],
      ['tool_call', 'delegate', 'main', ''],
      ['model_call', '', 'main', ''],
      ['loop_end', 'completed', 'main', ''],
    ]);
    expect(events.events.every((e) => e.attempt === 1)).toBe(true);

    // Durations and tokens vary; what is pinned is the order and the indentation.
    const lines = formatEventLog(events.events).map((line) =>
      line
        .slice(10)
        .replace(/\s+\d+ms\b|\s+\d+\+\d+ tok/g, '')
        .replace(/(\S) +/g, '$1 ')
        .trimEnd(),
    );
    expect(lines).toEqual([
      'model_call a1 t1',
      `tool_call a1 t1 delegate ${FIND}`,
      '  model_call a1 t1',
      '  tool_call a1 t1 read_file src/shipping.ts',
      '  model_call a1 t2',
      '  loop_end a1 t2 completed',
      'model_call a1 t2',
      'loop_end a1 t2 completed',
    ]);
  });

  it('offers no recursion: a sub-agent that calls delegate gets an unknown-tool error', async () => {
    const { main, delegate } = roles(
      [turn([toolUse('d1', 'delegate', { task: FIND })]), turn([text('done')])],
      [turn([toolUse('s1', 'delegate', { task: 'and again' })]), turn([text('I could not delegate.')])],
    );
    const result = await runAgentLoop(options({ provider: main, subAgent: { provider: delegate } }));
    expect(result.delegations).toHaveLength(1);
    const inner = toolResults(result.delegations[0]?.messages ?? []);
    expect(inner[0]).toMatchObject({ toolUseId: 's1', isError: true });
    expect(inner[0]?.content).toMatch(/unknown tool "delegate"/);
  });

  it('answers that delegation is unavailable when the loop was given no sub-agent provider', async () => {
    const { main } = roles([turn([toolUse('d1', 'delegate', { task: FIND })]), turn([text('ok')])], []);
    const result = await runAgentLoop(options({ provider: main }));
    expect(toolResults(result.messages)[0]).toMatchObject({ isError: true });
    expect(toolResults(result.messages)[0]?.content).toMatch(/delegate is not available here/);
  });

  it('ends the attempt when the sub-agent meets an error the model cannot fix', async () => {
    const ranOut = roles([turn([toolUse('d1', 'delegate', { task: FIND })]), turn([text('ok')])], []);
    const error = await runAgentLoop(
      options({ provider: ranOut.main, subAgent: { provider: ranOut.delegate } }),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(/ran out for role "delegate": turn 1 was requested/);

    const dead = roles(
      [turn([toolUse('d1', 'delegate', { task: FIND })]), turn([text('ok')])],
      [turn([toolUse('s1', 'read_file', { path: 'src/shipping.ts' })])],
    );
    const sandbox = new MemorySandbox(FILES);
    sandbox.kill();
    // A sandbox that died under the sub-agent stops the parent the same way.
    const stopped = await runAgentLoop(
      options({ provider: dead.main, sandbox, subAgent: { provider: dead.delegate } }),
    );
    expect(stopped.status).toBe('sandbox-stopped');
    expect(stopped.sandboxError).toBeInstanceOf(SandboxDead);
  });

  it('caps a long conclusion', async () => {
    const long = `${'a'.repeat(MAX_CONCLUSION_CHARS)}${'z'.repeat(100)}`;
    const { main, delegate } = roles(
      [turn([toolUse('d1', 'delegate', { task: FIND })]), turn([text('ok')])],
      [turn([text(long)])],
    );
    const result = await runAgentLoop(options({ provider: main, subAgent: { provider: delegate } }));
    const content = toolResults(result.messages)[0]?.content ?? '';
    expect(content.length).toBeLessThan(MAX_CONCLUSION_CHARS + 200);
    expect(content).toMatch(/characters of the sub-agent's answer cut here/);
    expect(content.endsWith('z'.repeat(100))).toBe(true);
  });

  it('refuses an empty task with the expected input', async () => {
    const { main, delegate } = roles(
      [turn([toolUse('d1', 'delegate', { task: '  ' })]), turn([text('ok')])],
      [],
    );
    const result = await runAgentLoop(options({ provider: main, subAgent: { provider: delegate } }));
    expect(toolResults(result.messages)[0]?.content).toMatch(
      /invalid input for delegate: task: .*Expected \{task: string\}/,
    );
    expect(delegate.requests).toHaveLength(0);
  });
});

describe('the tool list', () => {
  it('keeps the six stable tools by default and adds delegate last only when asked', () => {
    const six = ['read_file', 'write_file', 'edit_file', 'list_files', 'search', 'run_command'];
    expect(createDefaultToolRegistry().names()).toEqual(six);
    expect(createDefaultToolRegistry({ delegate: true }).names()).toEqual([...six, 'delegate']);
  });
});

describe('formatEventLog', () => {
  const at = (second: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, second)).toISOString();
  const shape = (lines: string[]) =>
    lines.map((line) =>
      line
        .slice(10)
        .replace(/(\S) +/g, '$1 ')
        .trimEnd(),
    );

  it('puts sub-agents under the right call when attempts reuse tool-use ids', () => {
    const lines = formatEventLog([
      { time: at(0), kind: 'model_call', attempt: 1, agent: 'delegate', parent: 't1' },
      { time: at(1), kind: 'tool_call', attempt: 1, tool: 'delegate', toolUseId: 't1' },
      { time: at(2), kind: 'model_call', attempt: 2, turn: 9, agent: 'delegate', parent: 't1' },
      { time: at(3), kind: 'tool_call', attempt: 2, tool: 'delegate', toolUseId: 't1' },
    ]);
    expect(shape(lines)).toEqual([
      'tool_call a1 delegate',
      '  model_call a1',
      'tool_call a2 delegate',
      '  model_call a2 t9',
    ]);
  });

  it('shows the sub-agent of a call that never ended where it ran, under a note', () => {
    const lines = formatEventLog([
      { time: at(0), kind: 'model_call', attempt: 1, turn: 1 },
      { time: at(1), kind: 'model_call', attempt: 1, turn: 1, agent: 'delegate', parent: 'd7' },
      {
        time: at(2),
        kind: 'tool_call',
        attempt: 1,
        turn: 1,
        tool: 'list_files',
        agent: 'delegate',
        parent: 'd7',
      },
      { time: at(3), kind: 'run_end', status: 'interrupted' },
    ]);
    expect(lines[1]?.trim()).toBe('delegate of call d7 (the call did not finish):');
    expect(shape(lines)).toEqual([
      'model_call a1 t1',
      'delegate of call d7 (the call did not finish):',
      '  model_call a1 t1',
      '  tool_call a1 t1 list_files',
      'run_end interrupted',
    ]);
  });
});
