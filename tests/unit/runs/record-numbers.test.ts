/**
 * Numbers read back from a run record, an eval's results file and a cassette are numbers a
 * person could mean: whole and capped where they count, never negative. A record that says
 * a run cost minus a million dollars, or took 1e300 ms, is refused before anything sums it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { resolveRun } from '../../../src/runs/record.js';
import { trialResultSchema } from '../../../src/evals/types.js';
import { CassetteTurnSchema } from '../../../src/llm/replay.js';
import { memoryRun, type MemoryRun } from '../../helpers/memory-run.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

interface Json {
  tokens: { input: number; output: number };
  attempts: Record<string, unknown>[];
  [field: string]: unknown;
}

describe('run.json numbers', () => {
  it.each([
    ['tokens.input', (r: Json) => (r.tokens.input = -1_000_000), /tokens\.input: .*>=0/],
    ['tokens.output', (r: Json) => (r.tokens.output = 1.5), /tokens\.output: .*int/],
    ['tokens.input (huge)', (r: Json) => (r.tokens.input = 1e18), /tokens\.input: .*<=/],
    ['cost.usd', (r: Json) => (r.cost = { usd: -1_000_000, byRole: {} }), /cost\.usd: .*>=0/],
    ['cost.byRole', (r: Json) => (r.cost = { usd: 1, byRole: { main: 1e12 } }), /cost\.byRole\.main: .*<=/],
    ['durationMs', (r: Json) => (r.durationMs = 1e300), /durationMs: .*<=/],
    ['turns', (r: Json) => (r.turns = -3), /turns: .*>=0/],
    ['attempts.0.inputTokens', (r: Json) => (r.attempts[0]!.inputTokens = -7), /attempts\.0\.inputTokens/],
    ['attempts.0.durationMs', (r: Json) => (r.attempts[0]!.durationMs = -1), /attempts\.0\.durationMs/],
    ['attempts.0.costUsd', (r: Json) => (r.attempts[0]!.costUsd = 1e9), /attempts\.0\.costUsd: .*<=/],
    [
      'attempts.0.reward.score',
      (r: Json) => (r.attempts[0]!.reward = { status: 'read', score: -1e9 }),
      /attempts\.0\.reward\.score: .*>=0/,
    ],
  ])('refuses a record whose %s is impossible', async (_field, edit, why) => {
    const run = await memoryRun();
    runs.push(run);
    const stored = await resolveRun(run.runsDir, 'last');
    const file = join(stored.dir, 'run.json');
    const record = JSON.parse(await readFile(file, 'utf8')) as Json;
    edit(record);
    await writeFile(file, JSON.stringify(record));
    await expect(resolveRun(run.runsDir, stored.record.id)).rejects.toThrow(why);
  });
});

describe('results.jsonl and cassette numbers', () => {
  const good = {
    taskId: 't',
    trial: 0,
    outcome: 'passed',
    category: 'ready-for-review',
    turns: 3,
    inputTokens: 100,
    outputTokens: 20,
    durationMs: 1000,
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:00:01Z',
  };

  it('a trial result with impossible numbers is not read back for --resume', () => {
    expect(trialResultSchema.safeParse(good).success).toBe(true);
    for (const edit of [
      { inputTokens: -1 },
      { outputTokens: 2.5 },
      { durationMs: -5 },
      { costUsd: -1_000_000 },
      { costUsd: 1e300 },
      { score: -1 },
      { turns: 1e12 },
    ]) {
      expect(trialResultSchema.safeParse({ ...good, ...edit }).success, JSON.stringify(edit)).toBe(false);
    }
  });

  it("a cassette's recorded usage is bounded like a live server's", () => {
    const turn = { content: [{ type: 'text', text: 'hi' }], stopReason: 'end_turn' };
    expect(
      CassetteTurnSchema.safeParse({ ...turn, usage: { inputTokens: 5, outputTokens: 1 } }).success,
    ).toBe(true);
    for (const usage of [
      { inputTokens: -5, outputTokens: 1 },
      { inputTokens: 5, outputTokens: 1e12 },
      { inputTokens: 5.5, outputTokens: 1 },
    ])
      expect(CassetteTurnSchema.safeParse({ ...turn, usage }).success, JSON.stringify(usage)).toBe(false);
  });
});
