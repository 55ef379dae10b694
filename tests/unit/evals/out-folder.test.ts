/**
 * The out folder of an eval across runs: `--rerun-unscored`, shards writing into one folder
 * at once, `eval merge` equal to the unsharded eval, and the settings `--resume` takes from
 * the lock.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/errors.js';
import { mergeEval } from '../../../src/evals/eval-merge.js';
import { RESULTS_FILE, SUPERSEDED_FILE } from '../../../src/evals/results-file.js';
import { loadSource, runSuite } from '../../../src/evals/run-suite.js';
import { runEval, SHARDS_DIR } from '../../../src/evals/runner.js';
import type { Suite } from '../../../src/evals/suite.js';
import type { TrialCategory, TrialResult, TrialRunner } from '../../../src/evals/types.js';
import { ROOT } from '../../helpers/cli.js';
import { delay, fakeSuite, result, withTempDir } from './helpers.js';

const label = (r: { taskId: string; trial: number }) => `${r.taskId}#${r.trial}`;

/** A runner whose verdict is a function of the trial alone (as a cassette's), counting its calls. */
function countingRunner(verdict: (taskId: string, trial: number) => TrialCategory) {
  const calls: string[] = [];
  const runner: TrialRunner = async (spec) => {
    calls.push(label(spec));
    await delay(Math.floor(Math.random() * 5));
    return result(spec, verdict(spec.taskId, spec.trial));
  };
  return { runner, calls };
}

const lines = async (file: string) =>
  (await readFile(file, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TrialResult);

describe('--rerun-unscored', () => {
  it('runs again exactly the trials that ended unscored, keeps the others, and keeps the old results as history', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a', 'b', 'c']);
      const first = countingRunner((task, trial) =>
        task === 'b' && trial === 1
          ? 'infrastructure'
          : task === 'c' && trial === 0
            ? 'error'
            : 'tests-failed',
      );
      await runEval({ suite, n: 2, outDir: dir, runner: first.runner });
      const second = countingRunner(() => 'ready-for-review');
      const run = await runEval({ suite, n: 2, outDir: dir, rerunUnscored: true, runner: second.runner });
      expect(second.calls.sort()).toEqual(['b#1', 'c#0']);
      expect(run.rerun).toBe(2);
      expect(run.resumed).toBe(4);
      const stored = await lines(path.join(dir, RESULTS_FILE));
      expect(stored.map(label).sort()).toEqual(['a#0', 'a#1', 'b#0', 'b#1', 'c#0', 'c#1']);
      expect(
        stored
          .filter((r) => r.category === 'ready-for-review')
          .map(label)
          .sort(),
      ).toEqual(['b#1', 'c#0']);
      expect(
        (await lines(path.join(dir, SUPERSEDED_FILE))).map((r) => `${label(r)}:${r.category}`).sort(),
      ).toEqual(['b#1:infrastructure', 'c#0:error']);
      // Nothing unscored left: a second rerun runs nothing.
      const third = countingRunner(() => 'ready-for-review');
      await runEval({ suite, n: 2, outDir: dir, rerunUnscored: true, runner: third.runner });
      expect(third.calls).toEqual([]);
    });
  });
});

describe('shards sharing one out folder', () => {
  it('run at once, each trial exactly once across them, each in its own folder; the lock written by one', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a', 'b', 'c', 'd', 'e']);
      const counter = countingRunner(() => 'ready-for-review');
      const runs = await Promise.all(
        [1, 2, 3].map((index) =>
          runEval({ suite, n: 3, outDir: dir, shard: { index, count: 3 }, runner: counter.runner }),
        ),
      );
      expect(counter.calls).toHaveLength(15);
      expect(new Set(counter.calls).size).toBe(15);
      expect(runs.map((r) => r.total)).toEqual([5, 5, 5]);
      expect(new Set(runs.map((r) => r.planSha256)).size).toBe(1);
      for (const r of runs) expect(r.resultsFile).toContain(path.join(dir, SHARDS_DIR));
    });
  });

  it('refuses a shard count that is not the folder’s, and a second process of the same shard while the first runs', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a', 'b']);
      await runEval({
        suite,
        n: 2,
        outDir: dir,
        shard: { index: 1, count: 2 },
        runner: countingRunner(() => 'ready-for-review').runner,
      });
      await expect(
        runEval({
          suite,
          n: 2,
          outDir: dir,
          shard: { index: 1, count: 3 },
          runner: countingRunner(() => 'ready-for-review').runner,
        }),
      ).rejects.toThrow(/split into 2 shards, given --shard 1\/3/);
      await expect(
        runEval({ suite, n: 2, outDir: dir, runner: countingRunner(() => 'ready-for-review').runner }),
      ).rejects.toThrow(/split into 2 shards, this run is not sharded/);
      let release = () => undefined as void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const slow = runEval({
        suite,
        n: 2,
        outDir: dir,
        shard: { index: 2, count: 2 },
        runner: async (spec) => {
          await gate;
          return result(spec, 'ready-for-review');
        },
      });
      await delay(100);
      await expect(
        runEval({
          suite,
          n: 2,
          outDir: dir,
          shard: { index: 2, count: 2 },
          resume: true,
          runner: countingRunner(() => 'ready-for-review').runner,
        }),
      ).rejects.toThrow(/is in use by pid/);
      release();
      await slow;
    });
  });
});

/** The example suite as `eval` loads it (a suite file on disk: `eval merge` opens it again). */
async function exampleSuite(dir: string): Promise<Suite> {
  const file = path.join(ROOT, 'examples/evals/suite.yaml');
  const { made } = await loadSource(
    { suiteFile: file, displayPath: 'examples/evals/suite.yaml', cwd: ROOT, outDir: dir },
    {},
    () => dir,
    () => undefined,
  );
  return made.suite;
}

/** As the example's cassettes: one task always passes, one never, one every other trial, one not approved. */
const exampleVerdict = (task: string, trial: number): TrialCategory =>
  task === 'fixes-threshold' || (task === 'flaky-fix' && trial % 2 === 0)
    ? 'ready-for-review'
    : task === 'hard-codes-reviewed'
      ? 'not-approved'
      : 'no-changes';

/** A summary without what two runs of the same trials may differ in: times and durations. */
function comparable(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(comparable);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => !/(At|Ms|Sec|[dD]uration.*)$/.test(key))
        .map(([key, v]) => [key, comparable(v)]),
    );
  return value;
}

describe('eval merge', () => {
  it('gives the summary, report and results an unsharded run of the same trials gives; names what is missing and writes nothing then', async () => {
    await withTempDir(async (dir) => {
      const suite = await exampleSuite(dir);
      const settings = { source: {} };
      const plain = path.join(dir, 'plain');
      const sharded = path.join(dir, 'sharded');
      await runEval({ suite, n: 3, outDir: plain, settings, runner: countingRunner(exampleVerdict).runner });
      await Promise.all(
        [1, 2].map((index) =>
          runEval({
            suite,
            n: 3,
            outDir: sharded,
            settings,
            shard: { index, count: 2 },
            runner: countingRunner(exampleVerdict).runner,
          }),
        ),
      );
      const one = await mergeEval({ outDir: plain, cwd: ROOT, partial: false });
      const two = await mergeEval({ outDir: sharded, cwd: ROOT, partial: false });
      expect(two.missing).toEqual([]);
      expect(two.written).toBeDefined();
      expect(comparable(two.written!.summary)).toEqual(comparable(one.written!.summary));
      expect(two.written!.summary.overall).toMatchObject({ scored: 12, passes: 5 });
      const report = async (out: string) =>
        (await readFile(path.join(out, 'report.md'), 'utf8'))
          .replace(/\d[\d.]* ?(ms|s|min|h)\b/g, 'T')
          .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'D');
      expect(await report(sharded)).toEqual(await report(plain));
      // The same trials (an unsharded eval's file is in the order they finished, the merge's in the suite's).
      expect((await lines(path.join(sharded, RESULTS_FILE))).map(label).sort()).toEqual(
        (await lines(path.join(plain, RESULTS_FILE))).map(label).sort(),
      );

      // A shard's results gone: its trials are named, nothing is written.
      await rm(path.join(sharded, 'summary.json'));
      await rm(path.join(sharded, SHARDS_DIR, '2-of-2'), { recursive: true });
      const partial = await mergeEval({ outDir: sharded, cwd: ROOT, partial: false });
      expect(partial.missing).toHaveLength(6);
      expect(partial.written).toBeUndefined();
      await expect(readFile(path.join(sharded, 'summary.json'))).rejects.toThrow();
    });
  });
});

describe('--resume takes the settings from the lock', () => {
  const options = (dir: string, extra: Partial<Parameters<typeof runSuite>[0]> = {}) => ({
    suiteFile: path.join(ROOT, 'examples/evals/suite.yaml'),
    displayPath: 'examples/evals/suite.yaml',
    cwd: ROOT,
    env: {},
    signal: new AbortController().signal,
    outDir: dir,
    resume: true,
    ...extra,
  });
  const noEngine = {
    provider: () => Promise.reject(new Error('the engine was asked for')),
    engines: () => Promise.reject(new Error('the engines were asked for')),
  };

  it('refuses a flag that disagrees with the lock before any engine is asked for, and needs --out', async () => {
    await withTempDir(async (dir) => {
      const suite = await exampleSuite(dir);
      await runEval({
        suite,
        n: 2,
        outDir: dir,
        settings: { source: {} },
        runner: countingRunner(exampleVerdict).runner,
      });
      await expect(runSuite(options(dir, { n: 5 }), noEngine)).rejects.toThrow(
        /-n: the lock says 2, given 5/,
      );
      await expect(runSuite(options(dir, { costLimitUsd: 1 }), noEngine)).rejects.toThrow(
        /--cost-limit: the lock says not given, given 1/,
      );
      const { outDir: _omitted, ...withoutOut } = options(dir);
      await expect(runSuite({ ...withoutOut, rerunUnscored: true }, noEngine)).rejects.toThrow(
        new UsageError('--rerun-unscored needs --out: the folder of the eval'),
      );
    });
  });
});
