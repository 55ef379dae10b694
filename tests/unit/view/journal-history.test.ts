/**
 * The viewer reads a run's history from its journal (the events the record is folded from):
 * a run still going, whose run.json was written before its attempt ended, shows that attempt
 * as the log has it; a log that cannot be folded leaves run.json's account, with a note.
 */
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadRunBundle } from '../../../src/view/bundle.js';
import { openViewSource } from '../../../src/view/source.js';
import { memoryRun, type MemoryRun } from '../../helpers/memory-run.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

describe('run page history from the journal', () => {
  it('shows an attempt that run.json does not have yet, as the events tell it', async () => {
    const run = await memoryRun();
    runs.push(run);
    const dir = run.result.runDir;
    // run.json as it stands while the first attempt runs: the opening record.
    const opening = (await readFile(join(dir, 'events.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { kind: string; record?: unknown })
      .find((e) => e.kind === 'run_start')!.record;
    await writeFile(join(dir, 'run.json'), `${JSON.stringify(opening, null, 2)}\n`);
    const bundle = await loadRunBundle(await openViewSource(run.repo), run.result.runId);
    expect(bundle.problems).toEqual([]);
    expect(bundle.attempts.map((a) => [a.n, a.verdict, a.agentStatus, a.changedFiles])).toEqual([
      [1, 'passed', 'completed', ['src/shipping.ts']],
    ]);
    expect(bundle.attempts[0]!.containers.map((c) => c.role)).toEqual(['attempt-1', 'verify-1']);
  });

  it('a journal that cannot be folded leaves the history of run.json, and says so', async () => {
    const run = await memoryRun();
    runs.push(run);
    const dir = run.result.runDir;
    // A hostile line: a review of an attempt without the review it names.
    await appendFile(join(dir, 'events.jsonl'), `${JSON.stringify({ kind: 'review', attempt: 1 })}\n`);
    const bundle = await loadRunBundle(await openViewSource(run.repo), run.result.runId);
    expect(bundle.problems.join('\n')).toMatch(/journal could not be read/);
    expect(bundle.attempts.map((a) => a.verdict)).toEqual(['passed']);
  });
});
