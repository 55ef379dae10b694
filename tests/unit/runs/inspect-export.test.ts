/**
 * `export --format inspect`: a run as an Inspect eval log of one sample, an eval's output
 * folder as one log with a sample per trial (task = sample id, trial = epoch), both valid
 * against Inspect's log format (tests/helpers/inspect-schema.ts); the eval's files are data.
 */
import { cp, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { exportCommand } from '../../../src/cli/commands/export.js';
import { inspectLogSchema, type InspectLogParsed } from '../../helpers/inspect-schema.js';
import { fixingTurns, memoryRun, type MemoryRun } from '../../helpers/memory-run.js';
import { capturedContext } from '../../helpers/cli.js';
import { text, toolUse } from '../agent/helpers.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

const turns = [
  {
    content: [text('Let me run the tests.'), toolUse('c1', 'run_command', { command: 'npm test' })],
    usage: { inputTokens: 1000, outputTokens: 30 },
  },
  { ...fixingTurns[0]!, usage: { inputTokens: 1200, outputTokens: 40 } },
  { ...fixingTurns[1]!, usage: { inputTokens: 1500, outputTokens: 20 } },
];

async function run(): Promise<MemoryRun> {
  const r = await memoryRun({ turns });
  runs.push(r);
  expect(r.result.outcome).toBe('ready-for-review');
  return r;
}

async function exported(cwd: string, ref: string, options: Record<string, string> = {}) {
  const ctx = capturedContext(cwd);
  const code = await exportCommand(ctx, ref, { format: 'inspect', ...options });
  expect(code).toBe(0);
  const parsed = inspectLogSchema.safeParse(JSON.parse(ctx.out()));
  expect(parsed.success, parsed.success ? '' : parsed.error.message).toBe(true);
  return parsed.data as InspectLogParsed;
}

describe('export --format inspect', () => {
  it('a fix run is a log of one sample: its conversation, a model event per call, a tool event per call, the verdict as its score', async () => {
    const r = await run();
    const log = await exported(r.root, r.result.runId, { runsDir: r.runsDir });
    expect(log.status).toBe('success');
    expect(log.eval.model).toBe(`replay/${r.result.record.provider.model}`);
    expect(log.samples).toHaveLength(1);
    const sample = log.samples![0]!;
    expect(sample).toMatchObject({ id: 'OPS-412', epoch: 1, scores: { verified: { value: 'C' } } });
    expect(sample.input).toContain('OPS-412');
    expect(sample.messages.map((m) => m.role)).toEqual([
      'system',
      'user',
      'assistant',
      'tool',
      'assistant',
      'tool',
      'assistant',
    ]);
    const edit = sample.messages[4]!;
    expect(edit.role === 'assistant' && edit.tool_calls?.[0]).toMatchObject({
      id: 'e1',
      function: 'edit_file',
      arguments: { path: 'src/shipping.ts' },
    });
    expect(sample.messages[5]).toMatchObject({ role: 'tool', tool_call_id: 'e1', function: 'edit_file' });
    const models = sample.events.filter((e) => e.event === 'model');
    expect(models).toHaveLength(r.result.record.turns);
    expect(sample.events.filter((e) => e.event === 'tool').map((e) => (e as { id: string }).id)).toEqual([
      'c1',
      'e1',
    ]);
    expect(sample.events.some((e) => e.event === 'score')).toBe(true);
    const usage = Object.values(sample.model_usage)[0]!;
    expect(usage).toMatchObject({ input_tokens: 3700, output_tokens: 90, total_tokens: 3790 });
    expect(r.result.record.tokens).toEqual({ input: 3700, output: 90 });
    expect(log.results?.scores[0]?.metrics['accuracy']?.value).toBe(1);
  });

  it("an eval's output folder is one log: a sample per trial (task id, trial as epoch), unscored trials as errors", async () => {
    const r = await run();
    const out = join(r.root, 'eval-out');
    await mkdir(join(out, 'runs'), { recursive: true });
    await cp(r.result.runDir, join(out, 'runs', r.result.runId), { recursive: true });
    const trial = (n: number, extra: Record<string, unknown>) => ({
      taskId: 'threshold',
      trial: n,
      outcome: 'failed',
      category: 'tests-failed',
      turns: 0,
      inputTokens: 0,
      outputTokens: 0,
      durationMs: 1000,
      startedAt: '2026-12-01T10:00:00.000Z',
      finishedAt: '2026-12-01T10:00:01.000Z',
      ...extra,
    });
    const lines = [
      trial(0, {
        outcome: 'passed',
        category: 'ready-for-review',
        runId: r.result.runId,
        provider: 'replay',
      }),
      // A run id is data: one that names a path is never joined into one.
      trial(1, { runId: '../../../etc', provider: 'replay' }),
      trial(2, { category: 'infrastructure', error: 'engine lost', provider: 'replay' }),
    ];
    await writeFile(join(out, 'results.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    await writeFile(
      join(out, 'summary.json'),
      JSON.stringify({
        suite: { name: 'shipping', file: '/suites/shipping.yaml' },
        n: 3,
        startedAt: '2026-12-01T10:00:00.000Z',
        finishedAt: '2026-12-01T10:05:00.000Z',
        harnessVersion: '0.1.0',
      }),
    );
    const log = await exported(r.root, out);
    expect(log.eval).toMatchObject({ task: 'shipping', config: { epochs: 3 } });
    expect(log.samples!.map((s) => [s.id, s.epoch])).toEqual([
      ['threshold', 1],
      ['threshold', 2],
      ['threshold', 3],
    ]);
    const [first, second, third] = log.samples!;
    expect(first!.scores?.['verified']?.value).toBe('C');
    expect(first!.messages.length).toBeGreaterThan(3);
    expect(second!.scores?.['verified']?.value).toBe('I');
    expect(second!.messages).toEqual([]);
    expect(third!.scores).toBeUndefined();
    expect(third!.error?.message).toBe('engine lost');
    expect(log.results).toMatchObject({ total_samples: 3, completed_samples: 2 });
    expect(log.results?.scores[0]).toMatchObject({ scored_samples: 2, unscored_samples: 1 });
    expect(log.results?.scores[0]?.metrics['accuracy']?.value).toBe(0.5);
  });

  it("an eval's transcript behind a link is not followed; a results line that is not a trial is named", async () => {
    const r = await run();
    const out = join(r.root, 'eval-out');
    const runDir = join(out, 'runs', r.result.runId);
    await cp(r.result.runDir, runDir, { recursive: true });
    const secret = join(r.root, 'secret.json');
    await writeFile(secret, await readFile(join(runDir, 'transcript.json')));
    const { rm } = await import('node:fs/promises');
    await rm(join(runDir, 'transcript.json'));
    await symlink(secret, join(runDir, 'transcript.json'));
    const line = {
      taskId: 't',
      trial: 0,
      outcome: 'passed',
      category: 'ready-for-review',
      turns: 1,
      inputTokens: 0,
      outputTokens: 0,
      durationMs: 1,
      startedAt: '2026-12-01T10:00:00.000Z',
      finishedAt: '2026-12-01T10:00:01.000Z',
      runId: r.result.runId,
    };
    await writeFile(join(out, 'results.jsonl'), JSON.stringify(line) + '\n');
    const log = await exported(r.root, out);
    expect(log.status).toBe('started');
    expect(log.samples![0]!.messages).toEqual([]);

    await writeFile(join(out, 'results.jsonl'), '{"taskId": 1}\n');
    await expect(exportCommand(capturedContext(r.root), out, { format: 'inspect' })).rejects.toThrow(
      /results.jsonl line 1 .* is not a trial result/,
    );
    await expect(exportCommand(capturedContext(r.root), out, { format: 'atif' })).rejects.toThrow(
      /is an eval's output folder/,
    );
  });
});
