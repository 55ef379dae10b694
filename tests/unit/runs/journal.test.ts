/**
 * The run journal's fold: `run.json` is computed from the domain events alone, in order,
 * passing over the loop's own facts; folding never changes the events it reads.
 */
import { describe, expect, it } from 'vitest';
import { foldRun, RunJournal, type LoggedEvent, type RunEvent } from '../../../src/runs/journal.js';
import { MemoryEventSink } from '../../../src/agent/events.js';
import type { RunRecord } from '../../../src/runs/record.js';

function opening(): RunRecord {
  return {
    id: '20260101-000000-abcdef',
    version: 2,
    harnessVersion: '0.1.0',
    startedAt: '2026-01-01T00:00:00.000Z',
    outcome: 'running',
    ticket: { id: 'T-1', title: 't', source: 'file' },
    catalog: { name: 'c', file: '/c.yaml', hash: 'h' },
    repoDir: '/repo',
    provider: { name: 'replay', model: 'm' },
    keep: 'on-failure',
    apply: true,
    attempts: [],
    tokens: { input: 0, output: 0 },
    turns: 0,
    containers: [],
    testCommand: [{ name: 'test', command: 'npm test' }],
  };
}

const box = (role: string, id: string) => ({ role, id, kept: false, engine: 'local' });

function attemptEvents(n: number, verdict: 'tests-failed' | 'passed'): RunEvent[] {
  return [
    { kind: 'attempt_start', attempt: n },
    { kind: 'sandbox', attempt: n, container: box(`attempt-${n}`, `${n}`.repeat(12)) },
    { kind: 'agent_end', attempt: n, status: 'completed', turns: 2, inputTokens: 10, outputTokens: 5 },
    { kind: 'change', attempt: n, changedFiles: ['src/a.ts'], changedCount: 1 },
    {
      kind: 'gate',
      attempt: n,
      status: 'allowed',
      message: '1 changed file(s)',
      gate: { ok: true, offences: [] },
    },
    { kind: 'sandbox', attempt: n, container: box(`verify-${n}`, `f${n}`.repeat(6)) },
    {
      kind: 'verify',
      attempt: n,
      status: verdict === 'passed' ? 'passed' : 'failed',
      durationMs: 3,
      exitCode: verdict === 'passed' ? 0 : 1,
      ...(verdict === 'passed' ? {} : { failingLayer: 'test' }),
    },
    {
      kind: 'attempt_end',
      attempt: n,
      status: verdict,
      durationMs: 9,
      costUsd: 0,
      ...(verdict === 'passed' ? {} : { feedback: 'the tests fail' }),
    },
  ];
}

describe('foldRun', () => {
  it('is the opening record plus each event, in order; other kinds of the log are passed over', () => {
    const events: LoggedEvent[] = [
      { kind: 'run_start', record: opening() },
      { kind: 'model_call', turn: 1 },
      ...attemptEvents(1, 'tests-failed'),
      { kind: 'tool_call', tool: 'edit_file' },
      ...attemptEvents(2, 'passed'),
      {
        kind: 'run_end',
        status: 'ready-for-review',
        durationMs: 20,
        message: 'done',
        finishedAt: '2026-01-01T00:00:01.000Z',
        containers: [{ ...box('verify-1', 'f1f1f1f1f1f1'), kept: true }],
      },
    ];
    const record = foldRun(events)!;
    expect(record.outcome).toBe('ready-for-review');
    expect(record.turns).toBe(4);
    expect(record.tokens).toEqual({ input: 20, output: 10 });
    expect(record.attempts.map((a) => a.verdict)).toEqual(['tests-failed', 'passed']);
    expect(record.attempts[0]).toMatchObject({
      failingLayer: 'test',
      feedback: 'the tests fail',
      agentStop: 'completed',
    });
    expect(record.attempts[1]!.failingLayer).toBeUndefined();
    // The kept flags of an attempt's containers come from the run's final list.
    expect(record.attempts[0]!.containers.map((c) => c.kept)).toEqual([false, true]);
    expect(record.finishedAt).toBe('2026-01-01T00:00:01.000Z');
  });

  it('is pure: the events are left as they were, and folding twice gives the same record', () => {
    const events: RunEvent[] = [{ kind: 'run_start', record: opening() }, ...attemptEvents(1, 'passed')];
    const before = JSON.stringify(events);
    const once = foldRun(events);
    expect(JSON.stringify(events)).toBe(before);
    expect(foldRun(events)).toEqual(once);
    expect(once).not.toBe(foldRun(events));
  });

  it("a step's start leaves the record as it is: a run logged before those events folds the same", () => {
    const starts = (n: number): RunEvent[] => [
      { kind: 'collect_start', attempt: n },
      { kind: 'verify_start', attempt: n },
      { kind: 'verify_layer', attempt: n, layer: 'test', command: 'npm test' },
      { kind: 'review_start', attempt: n, round: 1 },
    ];
    const without: RunEvent[] = [
      { kind: 'run_start', record: opening() },
      ...attemptEvents(1, 'tests-failed'),
      ...attemptEvents(2, 'passed'),
      { kind: 'apply', status: 'applied' },
    ];
    const withStarts: RunEvent[] = [
      { kind: 'run_start', record: opening() },
      { kind: 'image_start' },
      ...attemptEvents(1, 'tests-failed').flatMap((e) => (e.kind === 'change' ? [...starts(1), e] : [e])),
      ...attemptEvents(2, 'passed').flatMap((e) => (e.kind === 'change' ? [...starts(2), e] : [e])),
      { kind: 'apply_start' },
      { kind: 'apply', status: 'applied', files: 1 },
    ];
    expect(JSON.stringify(foldRun(withStarts))).toBe(JSON.stringify(foldRun(without)));
  });

  it('has no record without a run_start (a log of an older harness)', () => {
    expect(foldRun([{ kind: 'attempt_start', attempt: 1 }, { kind: 'model_call' }])).toBeUndefined();
  });

  it('an attempt that never was one is dropped; an interrupted run names its last attempt so', () => {
    const record = foldRun([
      { kind: 'run_start', record: opening() },
      { kind: 'attempt_start', attempt: 1 },
      { kind: 'attempt_end', attempt: 1, status: 'error', durationMs: 1, message: 'stopped' },
      { kind: 'attempt_dropped', attempt: 1 },
      { kind: 'attempt_start', attempt: 2 },
      { kind: 'attempt_end', attempt: 2, status: 'error', durationMs: 1, message: 'aborted' },
      {
        kind: 'run_end',
        status: 'interrupted',
        durationMs: 2,
        message: 'Interrupted',
        finishedAt: 'x',
        containers: [],
      },
    ])!;
    expect(record.attempts.map((a) => [a.n, a.verdict, a.message])).toEqual([[2, 'interrupted', 'aborted']]);
  });

  it('a review counts its turns and tokens into the run and lists itself on its attempt', () => {
    const review = {
      round: 1,
      verdict: 'approve' as const,
      summary: 'ok',
      reasons: [],
      turns: 3,
      inputTokens: 7,
      outputTokens: 2,
      durationMs: 4,
    };
    const record = foldRun([
      { kind: 'run_start', record: opening() },
      ...attemptEvents(1, 'passed').slice(0, -1),
      { kind: 'review', attempt: 1, status: 'approve', durationMs: 4, message: 'ok', review },
    ])!;
    expect(record.turns).toBe(5);
    expect(record.tokens).toEqual({ input: 17, output: 7 });
    expect(record.attempts[0]!.reviews).toEqual([review]);
  });
});

describe('RunJournal', () => {
  it('sends every event to the run sink and keeps the fold of what it sent', async () => {
    const sink = new MemoryEventSink();
    let saved: RunRecord | undefined;
    const journal = new RunJournal(
      sink,
      { writeRecord: async (r) => void (saved = structuredClone(r)) },
      opening(),
    );
    for (const event of attemptEvents(1, 'passed')) journal.append(event);
    await journal.save();
    expect(sink.events.map((e) => e.kind)).toEqual([
      'run_start',
      ...attemptEvents(1, 'passed').map((e) => e.kind),
    ]);
    expect(saved).toEqual(foldRun(sink.events));
    expect(journal.record).toEqual(saved);
  });
});
