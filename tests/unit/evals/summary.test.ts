import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  compareSummaries,
  readHarnessVersion,
  summarize,
  type EvalSummary,
} from '../../../src/evals/summary.js';
import type { TrialCategory, TrialResult } from '../../../src/evals/types.js';
import { fakeSuite, result } from './helpers.js';

function trials(
  taskId: string,
  categories: TrialCategory[],
  extra: Partial<TrialResult> = {},
): TrialResult[] {
  return categories.map((c, trial) => result({ taskId, trial }, c, extra));
}

function times(category: TrialCategory, count: number): TrialCategory[] {
  return Array.from({ length: count }, () => category);
}

function summaryOf(
  results: TrialResult[],
  ids: string[],
  n: number,
  meta: { harnessVersion?: string; sha256?: string } = {},
): EvalSummary {
  return summarize(results, {
    suite: fakeSuite(ids, { sha256: meta.sha256 }),
    n,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:02:05.000Z',
    harnessVersion: meta.harnessVersion ?? '1.0.0',
  });
}

describe('summarize', () => {
  it('keeps infrastructure failures out of the pass-rate denominator but reports them', () => {
    const s = summaryOf(
      trials('a', ['ready-for-review', 'infrastructure', 'tests-failed', 'ready-for-review']),
      ['a'],
      4,
    );
    const a = s.tasks[0];
    expect(a).toMatchObject({ recorded: 4, scored: 3, passes: 2, failures: 1, infrastructure: 1 });
    expect(a?.passRate).toBeCloseTo(2 / 3, 12);
    expect(s.overall).toMatchObject({ scored: 3, passes: 2, infrastructure: 1 });
  });

  it('keeps interrupted trials out of the denominator too', () => {
    const s = summaryOf(trials('a', ['ready-for-review', 'interrupted']), ['a'], 2);
    expect(s.tasks[0]).toMatchObject({ scored: 1, passes: 1, interrupted: 1, passRate: 1 });
  });

  it('counts trials that needed an infrastructure retry', () => {
    const results = [
      result({ taskId: 'a', trial: 0 }, 'ready-for-review', { infraRetried: true }),
      result({ taskId: 'a', trial: 1 }, 'ready-for-review'),
    ];
    expect(summaryOf(results, ['a'], 2).tasks[0]?.infraRetried).toBe(1);
  });

  it('leaves pass@k unknown for k beyond the scored trials of a task', () => {
    // 3 planned, one lost to infrastructure: pass@3 cannot be estimated from 2 trials
    const s = summaryOf(
      [
        ...trials('a', ['ready-for-review', 'tests-failed', 'infrastructure']),
        ...trials('b', ['ready-for-review', 'ready-for-review', 'ready-for-review']),
      ],
      ['a', 'b'],
      3,
    );
    expect(s.tasks[0]?.passAtK.map((v) => v.value)).toEqual([0.5, 1, null]);
    // Overall k=3 would average over task b alone, a different population: unknown instead.
    expect(s.overall.passAtK.map((v) => v.value)).toEqual([0.75, 1, null]);
  });

  it('lists a suite task with no results with zero trials and an unknown rate', () => {
    const s = summaryOf(trials('a', ['ready-for-review']), ['a', 'b'], 1);
    expect(s.tasks[1]).toMatchObject({
      taskId: 'b',
      recorded: 0,
      scored: 0,
      passRate: null,
      interval: { low: 0, high: 1 },
    });
    expect(s.overall.planned).toBe(2);
    expect(s.overall.recorded).toBe(1);
  });

  it('excludes unscored trials from turns, tokens and time', () => {
    const results = [
      result({ taskId: 'a', trial: 0 }, 'ready-for-review', {
        turns: 4,
        inputTokens: 100,
        outputTokens: 10,
        durationMs: 1000,
      }),
      result({ taskId: 'a', trial: 1 }, 'tests-failed', {
        turns: 8,
        inputTokens: 300,
        outputTokens: 30,
        durationMs: 3000,
      }),
      result({ taskId: 'a', trial: 2 }, 'infrastructure', {
        turns: 99,
        inputTokens: 9999,
        durationMs: 99999,
      }),
    ];
    const a = summaryOf(results, ['a'], 3).tasks[0];
    expect(a?.turns).toEqual({ mean: 6, median: 6, total: 12 });
    expect(a?.inputTokens).toEqual({ mean: 200, median: 200, total: 400 });
    expect(a?.outputTokens.total).toBe(40);
    expect(a?.durationMs.mean).toBe(2000);
  });

  it('records provenance: providers, models, image ids, catalog hashes, suite and wall time', () => {
    const results = [
      result({ taskId: 'a', trial: 0 }, 'ready-for-review', {
        provider: 'replay',
        model: 'm1',
        imageId: 'sha256:img1',
        catalogHash: 'c1',
      }),
      result({ taskId: 'a', trial: 1 }, 'ready-for-review', {
        provider: 'replay',
        model: 'm1',
        imageId: 'sha256:img1',
        catalogHash: 'c1',
      }),
      result({ taskId: 'b', trial: 0 }, 'ready-for-review', {
        provider: 'replay',
        model: 'm2',
        imageId: 'sha256:img2',
        catalogHash: 'c2',
      }),
    ];
    const s = summaryOf(results, ['a', 'b'], 2, { harnessVersion: '9.9.9', sha256: 'b'.repeat(64) });
    expect(s).toMatchObject({
      harnessVersion: '9.9.9',
      suite: { name: 'fake', file: '/suites/fake.yaml', sha256: 'b'.repeat(64) },
      providers: ['replay'],
      models: ['m1', 'm2'],
      imageIds: ['sha256:img1', 'sha256:img2'],
      catalogHashes: { a: ['c1'], b: ['c2'] },
      wallTimeMs: 125_000,
    });
  });

  it('does not call a task that always fails flaky', () => {
    const s = summaryOf(
      [...trials('a', ['tests-failed', 'rejected']), ...trials('b', ['ready-for-review', 'rejected'])],
      ['a', 'b'],
      2,
    );
    expect(s.tasks.map((t) => t.flaky)).toEqual([false, true]);
    expect(s.overall.flakyTasks).toEqual(['b']);
  });
});

describe('compareSummaries', () => {
  const previous = summaryOf(
    [
      ...trials('drop', times('ready-for-review', 10)),
      ...trials('dip', times('ready-for-review', 3)),
      ...trials('rise', times('tests-failed', 10)),
      ...trials('gone', times('ready-for-review', 1)),
    ],
    ['drop', 'dip', 'rise', 'gone'],
    10,
    { harnessVersion: '1.0.0' },
  );
  const current = summaryOf(
    [
      ...trials('drop', times('tests-failed', 10)),
      ...trials('dip', ['ready-for-review', 'tests-failed', 'tests-failed']),
      ...trials('rise', times('ready-for-review', 10)),
      ...trials('new', times('ready-for-review', 1)),
    ],
    ['drop', 'dip', 'rise', 'new'],
    10,
    { harnessVersion: '1.1.0' },
  );
  const comparison = compareSummaries(current, previous);
  const byId = (id: string) => comparison.tasks.find((t) => t.taskId === id);

  it('flags a drop whose intervals do not overlap as a regression', () => {
    // 10/10 -> [0.7225, 1]; 0/10 -> [0, 0.2775]: separated, and the rate went down
    expect(byId('drop')).toMatchObject({ status: 'both', delta: -1, regression: true, improvement: false });
    expect(comparison.regressions).toEqual(['drop']);
  });

  it('does not flag a drop whose intervals overlap', () => {
    // 3/3 -> [0.4385, 1]; 1/3 -> [0.0615, 0.7923]: they overlap, so the drop may be luck
    const dip = byId('dip');
    expect(dip?.delta).toBeCloseTo(-2 / 3, 12);
    expect(dip).toMatchObject({ regression: false, improvement: false });
  });

  it('flags a rise whose intervals do not overlap as an improvement', () => {
    expect(byId('rise')).toMatchObject({ delta: 1, regression: false, improvement: true });
    expect(comparison.improvements).toEqual(['rise']);
  });

  it('marks tasks that appear in only one summary as added or removed, with no delta', () => {
    expect(byId('new')).toMatchObject({ status: 'added', delta: null, previous: null, regression: false });
    expect(byId('gone')).toMatchObject({ status: 'removed', delta: null, current: null, regression: false });
  });

  it('lists what differs between the runs besides the results', () => {
    expect(comparison.differences).toContain('harness version: 1.0.0 -> 1.1.0');
  });

  it('says nothing differs when comparing a summary with itself', () => {
    const same = compareSummaries(current, current);
    expect(same.differences).toEqual([]);
    expect(same.regressions).toEqual([]);
    expect(same.overall.delta).toBe(0);
  });
});

describe('readHarnessVersion', () => {
  it('finds the version in the package.json above this module', async () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
    expect(await readHarnessVersion()).toBe(pkg.version);
  });

  it('says "unknown" when no package.json of the harness is above the folder', async () => {
    expect(await readHarnessVersion('/')).toBe('unknown');
  });
});

describe('per engine', () => {
  it('counts trial runs, passes, infrastructure failures and mean time where they ran, first tries included', () => {
    const results: TrialResult[] = [
      result({ taskId: 'a', trial: 0 }, 'ready-for-review', { engine: 'local', durationMs: 1000 }),
      result({ taskId: 'a', trial: 1 }, 'tests-failed', { engine: 'box-a', durationMs: 3000 }),
      // First try lost with engine box-b after 500 ms, retried on box-a, passed there.
      result({ taskId: 'a', trial: 2 }, 'ready-for-review', {
        engine: 'box-a',
        durationMs: 2000,
        infraRetried: true,
        firstTry: { engine: 'box-b', category: 'infrastructure', durationMs: 500, error: 'lost' },
      }),
      result({ taskId: 'a', trial: 3 }, 'infrastructure', { engine: 'box-b', durationMs: 100 }),
    ];
    const s = summaryOf(results, ['a'], 4);
    expect(s.engines).toEqual([
      { engine: 'local', trials: 1, passes: 1, infrastructure: 0, retriedElsewhere: 0, meanTrialMs: 1000 },
      { engine: 'box-a', trials: 2, passes: 1, infrastructure: 0, retriedElsewhere: 0, meanTrialMs: 2500 },
      { engine: 'box-b', trials: 2, passes: 0, infrastructure: 2, retriedElsewhere: 1, meanTrialMs: 300 },
    ]);
  });

  it('names results that do not say where they ran `unknown`', () => {
    const s = summaryOf(trials('a', ['ready-for-review']), ['a'], 1);
    expect(s.engines.map((e) => e.engine)).toEqual(['unknown']);
  });
});
