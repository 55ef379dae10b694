import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { readPreviousSummary } from '../../../src/evals/summary-file.js';
import { compareSummaries, summarize } from '../../../src/evals/summary.js';
import { fakeSuite, result, withTempDir } from './helpers.js';

function aSummary() {
  const suite = fakeSuite(['a']);
  return summarize([result({ taskId: 'a', trial: 0 }, 'ready-for-review')], {
    suite,
    n: 1,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:00:02.000Z',
    harnessVersion: '0.0.0',
  });
}

async function problemOf(text: string): Promise<ConfigError> {
  return withTempDir(async (dir) => {
    const file = path.join(dir, 'summary.json');
    await writeFile(file, text);
    const error = await readPreviousSummary(file, 'prev/summary.json').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  });
}

describe('--compare: the previous summary is validated', () => {
  it('reads back a summary this version wrote, and compares with it', async () => {
    const summary = aSummary();
    await withTempDir(async (dir) => {
      const file = path.join(dir, 'summary.json');
      await writeFile(file, `${JSON.stringify(summary, null, 2)}\n`);
      const previous = await readPreviousSummary(file);
      expect(compareSummaries(summary, previous).regressions).toEqual([]);
    });
  });

  it('names the file, line, field, what was expected and what was found', async () => {
    const summary = aSummary();
    const broken = JSON.stringify(
      { ...summary, tasks: [{ ...summary.tasks[0], passRate: 'high' }] },
      null,
      2,
    );
    const error = await problemOf(broken);
    expect(error.message).toMatch(/^prev\/summary\.json is not valid \(1 problem\)/);
    expect(error.problems).toHaveLength(1);
    expect(error.problems[0]).toMatch(
      /^prev\/summary\.json:\d+:\d+ tasks\[0\]\.passRate: expected a number.*got "high"$/,
    );
  });

  it('says a missing field is missing, and refuses a file that is not a summary', async () => {
    const { overall: _overall, ...rest } = aSummary();
    const missing = await problemOf(JSON.stringify(rest));
    expect(missing.problems.join('\n')).toMatch(/overall: missing required field, expected a mapping/);
    const other = await problemOf('[1, 2]');
    expect(other.problems[0]).toMatch(/expected a mapping/);
  });

  it('says when the file cannot be read, by the name it was given', async () => {
    const error = await readPreviousSummary('/nonexistent/summary.json', 'nope.json').catch(
      (e: unknown) => e,
    );
    expect((error as Error).message).toMatch(/^--compare: cannot read nope\.json: /);
  });

  it.each([
    ['a negative count', { scored: -1 }, /overall\.scored: expected an integer of at least 0, got -1$/],
    ['a fractional count', { passes: 0.5 }, /overall\.passes: expected an integer/],
    [
      'a huge count',
      { scored: 1e15 },
      /overall\.scored: expected an integer of at most 1000000000, got 1000000000000000$/,
    ],
    [
      'more passes than scored trials',
      { scored: 1, passes: 5, passRate: 1 },
      /overall\.passes: expected at most scored \(1\), got 5/,
    ],
    ['a rate beyond 1', { passRate: 7 }, /overall\.passRate: expected a number of at most 1, got 7$/],
    [
      'a rate that is not passes over scored',
      { passRate: 0.25 },
      /overall\.passRate: expected passes \/ scored \(1\), got 0\.25/,
    ],
    [
      'an interval upside down',
      { interval: { low: 0.9, high: 0.1 } },
      /overall\.interval: expected low <= high/,
    ],
    [
      'an interval that misses its rate',
      { interval: { low: 0, high: 0.5 } },
      /overall\.interval: expected it to hold the rate 1/,
    ],
  ])('refuses %s', async (_what, edit, why) => {
    const summary = aSummary();
    const error = await problemOf(
      JSON.stringify({ ...summary, overall: { ...summary.overall, ...edit } }, null, 2),
    );
    expect(error.problems.join('\n')).toMatch(why);
  });
});
