/**
 * ATIF v1.7 as Harbor reads it: the document's own `trajectory_id`, a sub-agent's
 * conversation embedded in `subagent_trajectories` and referenced by its `trajectory_id`
 * from the `delegate` call that started it, and a multi-step task's conversations saying
 * their step. Checked against the format written from the RFC (tests/helpers/atif-schema.ts).
 */
import { describe, expect, it } from 'vitest';
import { ATIF_VERSION, runToAtif, type TranscriptEntry } from '../../../src/runs/atif.js';
import type { RunRecord } from '../../../src/runs/record.js';
import { atifTrajectorySchema } from '../../helpers/atif-schema.js';

const record = {
  id: 'run-1',
  harnessVersion: '0.1.0',
  provider: { name: 'replay', model: 'recorded' },
  tokens: { input: 10, output: 5 },
  outcome: 'ready-for-review',
  attempts: [{ n: 1, verdict: 'passed' }],
  turns: 2,
  ticket: { id: 'T-1' },
  catalog: { name: 'svc' },
  startedAt: '2026-01-01T00:00:00.000Z',
} as unknown as RunRecord;

const transcript: TranscriptEntry[] = [
  {
    attempt: 1,
    role: 'maker',
    step: 'first',
    system: 'You fix tickets.',
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Write A.' }] },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'd1', name: 'delegate', input: { task: 'write A' } }],
      },
      { role: 'user', content: [{ type: 'tool_result', toolUseId: 'd1', content: 'done' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Done.' }] },
    ],
    delegations: [
      {
        toolUseId: 'd1',
        status: 'done',
        turns: 2,
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'write A' }] },
          {
            role: 'assistant',
            content: [
              { type: 'tool_use', id: 'c1', name: 'run_command', input: { command: 'echo A > a.txt' } },
            ],
          },
          { role: 'user', content: [{ type: 'tool_result', toolUseId: 'c1', content: 'exit 0' }] },
          { role: 'assistant', content: [{ type: 'text', text: 'Wrote it.' }] },
        ],
      },
    ],
  },
  {
    attempt: 1,
    role: 'maker',
    step: 'second',
    system: 'You fix tickets.',
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Write B.' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Nothing to do.' }] },
    ],
  },
] as TranscriptEntry[];

describe('ATIF v1.7', () => {
  const atif = runToAtif(record, transcript, []);

  it('validates as v1.7: its own trajectory_id, the run as session_id', () => {
    const parsed = atifTrajectorySchema.safeParse(atif);
    expect(parsed.success, parsed.success ? '' : parsed.error.message).toBe(true);
    expect(atif).toMatchObject({ schema_version: 'ATIF-v1.7', trajectory_id: 'run-1', session_id: 'run-1' });
    expect(ATIF_VERSION).toBe('ATIF-v1.7');
  });

  it("embeds a sub-agent's conversation and refers to it by trajectory_id", () => {
    const delegateStep = atif.steps.find((s) => s.tool_calls?.[0]?.function_name === 'delegate');
    const ref = delegateStep?.observation?.results[0]?.subagent_trajectory_ref?.[0];
    expect(ref).toMatchObject({ trajectory_id: 'run-1/delegate/d1', session_id: 'run-1' });
    expect(atif.subagent_trajectories).toHaveLength(1);
    const sub = atif.subagent_trajectories![0]!;
    expect(sub.trajectory_id).toBe(ref?.trajectory_id);
    expect(sub.steps.map((s) => s.source)).toEqual(['user', 'agent', 'agent']);
    expect(sub.steps[1]).toMatchObject({
      tool_calls: [{ tool_call_id: 'c1', function_name: 'run_command' }],
      observation: { results: [{ source_call_id: 'c1', content: 'exit 0' }] },
    });
  });

  it("says each conversation's step", () => {
    const systems = atif.steps.filter((s) => s.source === 'system');
    expect(systems.map((s) => s.extra?.step)).toEqual(['first', 'second']);
  });

  it('the format check refuses a reference to no embedded sub-agent (so the checks above can fail)', () => {
    const broken = structuredClone(atif);
    broken.subagent_trajectories = [];
    expect(atifTrajectorySchema.safeParse(broken).success).toBe(false);
  });
});
