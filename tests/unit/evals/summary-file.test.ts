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
});
