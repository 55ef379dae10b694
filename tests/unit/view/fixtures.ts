/**
 * Run folders and eval folders on disk, shaped like the harness writes them today, with
 * hostile text where a sandbox could put it (tool inputs, command output, file names).
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const HOSTILE = '</script><script>alert(1)</script><img src=x onerror=alert(2)>';

export async function tempDir(): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'view-test-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export interface RunOptions {
  id?: string;
  outcome?: string;
  ticket?: string;
  verdict?: string;
  kept?: boolean;
  /** Text of the run_command result (default: a failing test run with a cut mark). */
  toolOutput?: string;
  testOutput?: string;
  patch?: string;
}

const CUT = '[... 5000 of 9000 characters of stdout cut here ...]';

/** A failed run with one attempt: read, run a command, edit, tests fail in verification. */
export async function writeRun(runsDir: string, folder: string, o: RunOptions = {}): Promise<string> {
  const dir = join(runsDir, folder);
  await mkdir(join(dir, 'attempts', '1'), { recursive: true });
  const id = o.id ?? folder;
  const record = {
    id,
    version: 2,
    harnessVersion: '0.1.0',
    startedAt: '2026-11-30T10:00:00.000Z',
    finishedAt: '2026-11-30T10:00:12.000Z',
    durationMs: 12000,
    outcome: o.outcome ?? 'failed',
    exitCode: 1,
    message: 'No verified fix after 1 attempt(s); the last was tests-failed.',
    ticket: { id: o.ticket ?? 'OPS-412', title: 'Free shipping', source: 'file' },
    catalog: { name: 'shipping', file: '/x/catalog.yaml', hash: 'abcdef0123456789' },
    repoDir: '/x/repo',
    provider: { name: 'replay', model: 'recorded' },
    keep: 'on-failure',
    apply: false,
    baseline: { failing: true, failingLayer: 'test', durationMs: 3000 },
    attempts: [
      {
        n: 1,
        verdict: o.verdict ?? 'tests-failed',
        agentStop: 'completed',
        gate: { ok: true, offences: [] },
        turns: 3,
        inputTokens: 100,
        outputTokens: 20,
        durationMs: 8000,
        changedFiles: ['src/shipping.ts'],
        failingLayer: 'test',
        containers: [{ role: 'attempt-1', id: 'a'.repeat(64), kept: o.kept ?? true }],
        feedback: 'The tests fail: expected 0, got 4.95',
      },
    ],
    tokens: { input: 100, output: 20 },
    turns: 3,
    containers: [
      { role: 'baseline', id: 'b'.repeat(64), kept: false },
      { role: 'attempt-1', id: 'a'.repeat(64), kept: o.kept ?? true },
    ],
    testCommand: [{ name: 'test', command: 'npm test' }],
    engine: 'local',
    someFutureField: { anything: 1 },
  };
  const transcript = [
    {
      attempt: 1,
      system: 'You are a software engineer.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: '# Ticket OPS-412\nFree shipping from 39 EUR.' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Running the tests first.' },
            { type: 'tool_use', id: 't1', name: 'run_command', input: { command: `npm test # ${HOSTILE}` } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              toolUseId: 't1',
              content:
                o.toolOutput ??
                `exit code: 1\ntimed out: no\ntruncated: no\nstdout:\nnot ok 1 - free shipping\n${CUT}\nstderr:\n(empty)`,
              isError: false,
            },
          ],
        },
        {
          role: 'assistant',
          content: [
            {
              type: 'tool_use',
              id: 't2',
              name: 'edit_file',
              input: { path: 'src/javascript:alert(3).ts', search: '50', replacement: `40 ${HOSTILE}` },
            },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              toolUseId: 't2',
              content: 'edited src/shipping.ts at line 3',
              isError: false,
            },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: `Done \u202Egnp.exe ${HOSTILE}` }] },
      ],
    },
  ];
  const events = [
    { kind: 'baseline', status: 'failing', durationMs: 3000, exitCode: 1, time: '2026-11-30T10:00:03.000Z' },
    { kind: 'attempt_start', attempt: 1, time: '2026-11-30T10:00:03.100Z' },
    {
      kind: 'model_call',
      attempt: 1,
      turn: 1,
      durationMs: 5,
      tokens: { input: 50, output: 10 },
      time: '2026-11-30T10:00:03.200Z',
    },
    {
      kind: 'tool_call',
      attempt: 1,
      turn: 1,
      tool: 'run_command',
      toolUseId: 't1',
      durationMs: 812,
      exitCode: 1,
      isError: false,
      time: '2026-11-30T10:00:04.000Z',
    },
    {
      kind: 'tool_call',
      attempt: 1,
      turn: 2,
      tool: 'edit_file',
      toolUseId: 't2',
      durationMs: 40,
      isError: false,
      time: '2026-11-30T10:00:04.100Z',
    },
    {
      kind: 'gate',
      attempt: 1,
      status: 'allowed',
      message: '1 changed file(s)',
      time: '2026-11-30T10:00:06.000Z',
    },
    {
      kind: 'verify',
      attempt: 1,
      status: 'failed',
      durationMs: 4000,
      exitCode: 1,
      message: 'failing layer test',
      time: '2026-11-30T10:00:10.000Z',
    },
    {
      kind: 'attempt_end',
      attempt: 1,
      status: o.verdict ?? 'tests-failed',
      durationMs: 8000,
      time: '2026-11-30T10:00:11.000Z',
    },
  ];
  await writeFile(join(dir, 'run.json'), JSON.stringify(record, null, 2));
  await writeFile(join(dir, 'transcript.json'), JSON.stringify(transcript, null, 2));
  await writeFile(join(dir, 'events.jsonl'), `${events.map((e) => JSON.stringify(e)).join('\n')}\n{"torn":`);
  await writeFile(join(dir, 'ticket.md'), '# OPS-412: Free shipping\n\nFrom 39 EUR.\n');
  await writeFile(
    join(dir, 'baseline-test-output.txt'),
    '=== layer test: $ npm test\nnot ok 1\n=== exit 1 after 3.0s\n',
  );
  await writeFile(
    join(dir, 'attempts', '1', 'patch.diff'),
    o.patch ??
      'diff --git a/src/shipping.ts b/src/shipping.ts\n--- a/src/shipping.ts\n+++ b/src/shipping.ts\n@@ -1,3 +1,3 @@\n-export const FREE = 50;\n+export const FREE = 40; // </pre><script>alert(4)</script>\n',
  );
  await writeFile(
    join(dir, 'attempts', '1', 'test-output.txt'),
    o.testOutput ??
      '=== layer test: $ npm test\n\u001b[31mnot ok 1 - orders of 39 EUR ship free\u001b[39m\n=== exit 1 after 4.0s\n',
  );
  return dir;
}

/** An eval output folder: results.jsonl, summary.json (missing fields are fine) and runs/. */
export async function writeEval(
  dir: string,
  trials: { taskId: string; trial: number; category: string; runId?: string | undefined; outcome?: string }[],
  summary: unknown = undefined,
): Promise<void> {
  await mkdir(join(dir, 'runs'), { recursive: true });
  const lines = trials.map((t) =>
    JSON.stringify({
      taskId: t.taskId,
      trial: t.trial,
      outcome: t.outcome ?? (t.category === 'ready-for-review' ? 'passed' : 'failed'),
      category: t.category,
      turns: 3,
      inputTokens: 100,
      outputTokens: 20,
      durationMs: 12000,
      startedAt: '2026-11-30T10:00:00.000Z',
      finishedAt: '2026-11-30T10:00:12.000Z',
      ...(t.runId ? { runId: t.runId } : {}),
      engine: 'local',
    }),
  );
  await writeFile(join(dir, 'results.jsonl'), `${lines.join('\n')}\n`);
  if (summary !== undefined) await writeFile(join(dir, 'summary.json'), JSON.stringify(summary));
}

/** Edits a run's run.json in place. */
export async function editRecord(
  runDir: string,
  edit: (record: Record<string, unknown>) => void,
): Promise<void> {
  const file = join(runDir, 'run.json');
  const record = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  edit(record);
  await writeFile(file, JSON.stringify(record));
}

/** Adds a `delegate` call with a sub-agent conversation, and a checker's conversation, to attempt 1. */
export async function addDelegationAndChecker(runDir: string): Promise<void> {
  const file = join(runDir, 'transcript.json');
  const transcript = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>[];
  const maker = transcript[0] as { messages: unknown[]; delegations?: unknown[]; role?: string };
  maker.role = 'maker';
  maker.messages.push(
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 't3', name: 'delegate', input: { task: 'find the rule' } }],
    },
    {
      role: 'user',
      content: [{ type: 'tool_result', toolUseId: 't3', content: 'the rule is 39 EUR', isError: false }],
    },
  );
  maker.delegations = [
    {
      toolUseId: 't3',
      status: 'completed',
      turns: 2,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'find the rule' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 't1', name: 'run_command', input: { command: 'cat catalog.json' } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              toolUseId: 't1',
              content: 'exit code: 0\n{"threshold":39}',
              isError: false,
            },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: 'SUB-AGENT: the rule is 39 EUR' }] },
      ],
    },
  ];
  transcript.push({
    attempt: 1,
    role: 'checker',
    system: 'You review a patch.',
    messages: [{ role: 'assistant', content: [{ type: 'text', text: 'CHECKER: the threshold is wrong' }] }],
  });
  await writeFile(file, JSON.stringify(transcript));
  const events = join(runDir, 'events.jsonl');
  const sub = {
    kind: 'tool_call',
    attempt: 1,
    turn: 1,
    tool: 'run_command',
    toolUseId: 't1',
    durationMs: 77,
    exitCode: 0,
    agent: 'delegate',
    parent: 't3',
    time: '2026-11-30T10:00:05.000Z',
  };
  await writeFile(events, `${JSON.stringify(sub)}\n${await readFile(events, 'utf8')}`);
}
