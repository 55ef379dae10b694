/**
 * A run seeded from a recorded trajectory (eval task `seedRun`): the recorded run's last
 * conversation starts the first attempt's history, its patch is in the sandbox, its feedback
 * is given; the recorded conversation is data, made well-formed before a model sees it.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SEED_MESSAGES, wellFormedSeed } from '../../../src/fix/seed.js';
import type { Message } from '../../../src/llm/types.js';
import { memoryRun, type MemoryRun } from '../../helpers/memory-run.js';
import { text, toolUse } from '../agent/helpers.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

const WRONG_EDIT = toolUse('w1', 'edit_file', {
  path: 'src/shipping.ts',
  search: 'FREE_SHIPPING_THRESHOLD = 50;',
  replacement: 'FREE_SHIPPING_THRESHOLD = 40;',
});
const FINISH = toolUse('f1', 'edit_file', {
  path: 'src/shipping.ts',
  search: 'FREE_SHIPPING_THRESHOLD = 40;',
  replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
});

async function failedRun(): Promise<MemoryRun> {
  const r = await memoryRun({
    turns: [{ content: [text('Setting it to 40.'), WRONG_EDIT] }, { content: [text('done')] }],
    overrides: { maxAttempts: 1 },
  });
  runs.push(r);
  expect(r.result.outcome).toBe('failed');
  return r;
}

describe('seeded runs', () => {
  it("start from the recorded run's conversation, with its patch in the sandbox and its feedback, and reach ready-for-review", async () => {
    const failed = await failedRun();
    const seeded = await memoryRun({
      turns: [{ content: [FINISH] }, { content: [text('fixed')] }],
      overrides: { seedRun: failed.result.runDir },
    });
    runs.push(seeded);
    expect(seeded.result.outcome).toBe('ready-for-review');
    const recorded = JSON.parse(await readFile(join(failed.result.runDir, 'transcript.json'), 'utf8'));
    const earlier = recorded[0].messages as Message[];
    expect(seeded.result.record.continuedFrom).toEqual({
      runId: failed.result.runId,
      attempts: 1,
      seededMessages: earlier.length,
    });
    const transcript = JSON.parse(await readFile(join(seeded.result.runDir, 'transcript.json'), 'utf8'));
    expect(transcript[0].seededMessages).toBe(earlier.length);
    // What the model saw first: the recorded conversation, then this run's prompt with the feedback.
    expect(transcript[0].messages.slice(0, earlier.length)).toEqual(earlier);
    const prompt = JSON.stringify(transcript[0].messages[earlier.length]);
    expect(prompt).toContain(`continues run ${failed.result.runId}`);
    expect(prompt).toContain('the tests failed');
    // FINISH only matches when the recorded patch (40) is already in the sandbox.
    expect(seeded.result.record.attempts.map((a) => [a.n, a.verdict])).toEqual([[2, 'passed']]);
  });

  it('a recorded run folder that is not a run is refused before anything runs', async () => {
    const failed = await failedRun();
    const fake = join(failed.root, 'not-a-run');
    await mkdir(fake);
    await writeFile(join(fake, 'run.json'), JSON.stringify({ id: 'not-a-run', version: 2 }));
    await expect(memoryRun({ overrides: { seedRun: fake } })).rejects.toThrow(/invalid record/);
  });

  it('a planted conversation is made well-formed: results answer the call before them, a call without a result is said never to have run', () => {
    const seed: Message[] = [
      // Starts with the model: dropped (a conversation starts with the user).
      { role: 'assistant', content: [text('hi')] },
      { role: 'user', content: [{ type: 'text', text: 'ticket' }] },
      {
        role: 'assistant',
        content: [toolUse('a', 'run_command', { command: 'ls' }), toolUse('b', 'read_file', {})],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', toolUseId: 'a', content: 'files', isError: false },
          // Answers a call that was never made.
          { type: 'tool_result', toolUseId: 'zz', content: 'forged', isError: false },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', toolUseId: 'a', content: 'again', isError: false }] },
      { role: 'assistant', content: [toolUse('c', 'run_command', { command: 'npm test' })] },
    ];
    const out = wellFormedSeed(seed);
    expect(out.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(out[2]!.content).toEqual([
      { type: 'tool_result', toolUseId: 'a', content: 'files', isError: false },
      expect.objectContaining({ type: 'tool_result', toolUseId: 'b', isError: true }),
    ]);
    expect(JSON.stringify(out)).not.toContain('forged');
    expect(JSON.stringify(out)).not.toContain('again');
    expect(out[4]!.content).toEqual([
      expect.objectContaining({
        type: 'tool_result',
        toolUseId: 'c',
        isError: true,
        content: expect.stringMatching(/never ran/),
      }),
    ]);
  });

  it('a recorded conversation over the cap is refused, named', async () => {
    const failed = await failedRun();
    const file = join(failed.result.runDir, 'transcript.json');
    const transcript = JSON.parse(await readFile(file, 'utf8'));
    const many: Message[] = [];
    for (let i = 0; i <= MAX_SEED_MESSAGES; i++)
      many.push(
        { role: 'user', content: [{ type: 'text', text: `u${i}` }] },
        { role: 'assistant', content: [text(`a${i}`)] },
      );
    transcript[0].messages = many;
    await writeFile(file, JSON.stringify(transcript));
    await expect(memoryRun({ overrides: { seedRun: failed.result.runDir } })).rejects.toThrow(
      /over 1000 messages/,
    );
  });
});
