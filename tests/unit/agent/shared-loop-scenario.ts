/**
 * One tool-using conversation that any Sandbox and any provider must get through the same
 * way: read a file, fix a typo with edit_file, check it with run_command, finish. The unit
 * tests run it on a MemorySandbox with the Anthropic SDK, the OpenAI SDK (both against the
 * fake model server) and the replay provider; the Docker integration tests reuse it with a
 * real sandbox.
 *
 * Only POSIX `grep` is needed inside a real sandbox.
 */
import { expect } from 'vitest';
import { createDefaultToolRegistry } from '../../../src/agent/tools/tool-registry.js';
import { runAgentLoop, type AgentLoopResult } from '../../../src/agent/loop.js';
import { MemoryEventSink, type EventSink } from '../../../src/agent/events.js';
import type { Cassette } from '../../../src/llm/replay.js';
import type { Message, ModelProvider, ToolResultBlock } from '../../../src/llm/types.js';
import type { ExecResult, Sandbox } from '../../../src/sandbox/types.js';
import type { ExecHandler } from '../../fakes/memory-sandbox.js';
import type { ScriptedReply } from '../../fake-model-server/server.js';

export const SCENARIO_FILE = 'sandbox-harness-scenario.txt';
export const SCENARIO_BEFORE = 'Hello, wrld!\n';
export const SCENARIO_AFTER = 'Hello, world!\n';
export const SCENARIO_CHECK = `grep -c 'Hello, world!' ${SCENARIO_FILE}`;
export const SCENARIO_FINAL_TEXT = `Fixed the typo in ${SCENARIO_FILE}.`;

export const SCENARIO_TURNS: ScriptedReply[] = [
  {
    content: [
      { type: 'text', text: 'Let me look at the file.' },
      { type: 'tool_use', id: 'toolu_scn_1', name: 'read_file', input: { path: SCENARIO_FILE } },
    ],
    usage: { inputTokens: 500, outputTokens: 30 },
  },
  {
    content: [
      {
        type: 'tool_use',
        id: 'toolu_scn_2',
        name: 'edit_file',
        input: { path: SCENARIO_FILE, search: 'wrld', replacement: 'world' },
      },
    ],
    usage: { inputTokens: 600, outputTokens: 40 },
  },
  {
    content: [
      { type: 'tool_use', id: 'toolu_scn_3', name: 'run_command', input: { command: SCENARIO_CHECK } },
    ],
    usage: { inputTokens: 700, outputTokens: 25 },
  },
  { content: [{ type: 'text', text: SCENARIO_FINAL_TEXT }], usage: { inputTokens: 800, outputTokens: 15 } },
];

export function scenarioCassette(): Cassette {
  return {
    version: 1,
    model: 'scenario',
    turns: SCENARIO_TURNS.map((turn) => ({
      content: turn.content,
      stopReason: turn.content.some((block) => block.type === 'tool_use') ? 'tool_use' : 'end_turn',
      ...(turn.usage ? { usage: turn.usage } : {}),
    })),
  };
}

/** For a MemorySandbox: answers the scenario's one command the way grep -c would. */
export const scenarioExecHandler: ExecHandler = (command, _options, sandbox): Partial<ExecResult> => {
  if (command !== SCENARIO_CHECK)
    return { exitCode: 127, stderr: `unexpected command in scenario: ${command}\n` };
  const text = sandbox.text(SCENARIO_FILE) ?? '';
  const count = text.split('\n').filter((line) => line.includes('Hello, world!')).length;
  return { exitCode: count > 0 ? 0 : 1, stdout: `${count}\n` };
};

export function toolResults(messages: readonly Message[]): ToolResultBlock[] {
  return messages.flatMap((message) =>
    message.role === 'user'
      ? message.content.filter((block): block is ToolResultBlock => block.type === 'tool_result')
      : [],
  );
}

export interface SharedScenarioOptions {
  sandbox: Sandbox;
  provider: ModelProvider;
  events?: EventSink;
}

export async function runSharedLoopScenario(options: SharedScenarioOptions): Promise<AgentLoopResult> {
  const { sandbox, provider } = options;
  await sandbox.writeFiles([{ path: SCENARIO_FILE, content: SCENARIO_BEFORE }]);
  const result = await runAgentLoop({
    sandbox,
    provider,
    tools: createDefaultToolRegistry({
      isEditable: (path) => path === SCENARIO_FILE,
      editableGlobs: [SCENARIO_FILE],
    }),
    system: 'You fix typos.',
    firstUserMessage: `Fix the typo in ${SCENARIO_FILE}.`,
    limits: { maxTurns: 10 },
    events: options.events ?? new MemoryEventSink(),
  });

  expect(result.status).toBe('completed');
  expect(result.turns).toBe(4);
  expect(result.finalText).toBe(SCENARIO_FINAL_TEXT);
  expect((await sandbox.readFile(SCENARIO_FILE)).toString('utf8')).toBe(SCENARIO_AFTER);
  const results = toolResults(result.messages);
  expect(results.map((block) => [block.toolUseId, block.isError])).toEqual([
    ['toolu_scn_1', false],
    ['toolu_scn_2', false],
    ['toolu_scn_3', false],
  ]);
  expect(results[0]?.content).toContain('Hello, wrld!');
  expect(results[2]?.content).toMatch(/exit code: 0/);
  expect(results[2]?.content).toMatch(/stdout:\n1\n/);
  return result;
}
