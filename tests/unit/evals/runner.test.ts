import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, Interrupted, SandboxUnavailable, UsageError } from '../../../src/errors.js';
import type { EvalProgress } from '../../../src/evals/eval-progress.js';
import { LOCK_FILE, RESULTS_FILE } from '../../../src/evals/results-file.js';
import { runEval } from '../../../src/evals/runner.js';
import type { TrialResult, TrialRunner, TrialSpec } from '../../../src/evals/types.js';
import { delay, fakeSuite, result, withTempDir } from './helpers.js';

async function lines(dir: string): Promise<TrialResult[]> {
  const text = await readFile(path.join(dir, RESULTS_FILE), 'utf8');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as TrialResult);
}

function pairs(specs: Array<Pick<TrialSpec, 'taskId' | 'trial'>>): string[] {
  return specs.map((s) => `${s.taskId}#${s.trial}`).sort();
}

const passEverything: TrialRunner = async (spec) => result(spec, 'ready-for-review');

describe('runEval streaming', () => {
  it('appends each trial to results.jsonl before the next one starts', async () => {
    await withTempDir(async (dir) => {
      const seenOnDisk: number[] = [];
      const runner: TrialRunner = async (spec) => {
        seenOnDisk.push(
          (await readFile(path.join(dir, RESULTS_FILE), 'utf8').catch(() => '')).split('\n').length - 1,
        );
        return result(spec, 'ready-for-review');
      };
      await runEval({ suite: fakeSuite(['a', 'b']), n: 2, concurrency: 1, outDir: dir, runner });
      expect(seenOnDisk).toEqual([0, 1, 2, 3]);
      expect(await lines(dir)).toHaveLength(4);
    });
  });

  it('writes a lock naming the suite hash and n', async () => {
    await withTempDir(async (dir) => {
      await runEval({
        suite: fakeSuite(['a'], { sha256: 'f'.repeat(64) }),
        n: 2,
        outDir: dir,
        runner: passEverything,
      });
      const lock = JSON.parse(await readFile(path.join(dir, LOCK_FILE), 'utf8')) as Record<string, unknown>;
      expect(lock).toMatchObject({ suiteSha256: 'f'.repeat(64), n: 2, suiteName: 'fake' });
    });
  });

  it('returns results in suite order then trial order whatever order they finished in', async () => {
    await withTempDir(async (dir) => {
      const runner: TrialRunner = async (spec) => {
        await delay(spec.taskId === 'a' ? 30 - spec.trial * 10 : 1);
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({ suite: fakeSuite(['a', 'b']), n: 3, concurrency: 6, outDir: dir, runner });
      expect(run.results.map((r) => `${r.taskId}#${r.trial}`)).toEqual([
        'a#0',
        'a#1',
        'a#2',
        'b#0',
        'b#1',
        'b#2',
      ]);
      expect(run).toMatchObject({ total: 6, resumed: 0, interrupted: false, n: 3 });
    });
  });

  it('uses the suite defaults for n and concurrency when none are given', async () => {
    await withTempDir(async (dir) => {
      let calls = 0;
      const runner: TrialRunner = async (spec) => {
        calls++;
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({ suite: fakeSuite(['a', 'b'], { n: 2 }), outDir: dir, runner });
      expect(calls).toBe(4);
      expect(run.n).toBe(2);
    });
  });
});

describe('runEval concurrency', () => {
  it('keeps exactly two trials in flight at concurrency 2, and they overlap in time', async () => {
    await withTempDir(async (dir) => {
      let inFlight = 0;
      let maxInFlight = 0;
      const spans: Array<{ start: number; end: number }> = [];
      const runner: TrialRunner = async (spec) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const start = performance.now();
        await delay(25);
        spans.push({ start, end: performance.now() });
        inFlight--;
        return result(spec, 'ready-for-review');
      };
      await runEval({ suite: fakeSuite(['a', 'b', 'c']), n: 2, concurrency: 2, outDir: dir, runner });
      expect(maxInFlight).toBe(2);
      const overlapping = spans.some((s, i) =>
        spans.some((t, j) => i !== j && s.start < t.end && t.start < s.end),
      );
      expect(overlapping).toBe(true);
    });
  });

  it('never overlaps trials at concurrency 1', async () => {
    await withTempDir(async (dir) => {
      let inFlight = 0;
      let maxInFlight = 0;
      const runner: TrialRunner = async (spec) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await delay(5);
        inFlight--;
        return result(spec, 'ready-for-review');
      };
      await runEval({ suite: fakeSuite(['a', 'b']), n: 2, concurrency: 1, outDir: dir, runner });
      expect(maxInFlight).toBe(1);
    });
  });
});

describe('runEval infrastructure failures', () => {
  it('retries an infrastructure failure once and keeps the retry’s result, marked as retried', async () => {
    await withTempDir(async (dir) => {
      const calls: string[] = [];
      const runner: TrialRunner = async (spec) => {
        calls.push(`${spec.taskId}#${spec.trial}`);
        const first = calls.filter((c) => c === `${spec.taskId}#${spec.trial}`).length === 1;
        return result(spec, spec.taskId === 'a' && first ? 'infrastructure' : 'ready-for-review');
      };
      const run = await runEval({ suite: fakeSuite(['a', 'b']), n: 1, outDir: dir, runner });
      expect(calls).toEqual(['a#0', 'a#0', 'b#0']);
      expect(run.results[0]).toMatchObject({ taskId: 'a', category: 'ready-for-review', infraRetried: true });
      expect(run.results[1]?.infraRetried).toBeUndefined();
    });
  });

  it('records a second infrastructure failure as such, without a third try', async () => {
    await withTempDir(async (dir) => {
      let calls = 0;
      const runner: TrialRunner = async (spec) => {
        calls++;
        return result(spec, 'infrastructure', { error: 'daemon went away' });
      };
      const run = await runEval({ suite: fakeSuite(['a']), n: 1, outDir: dir, runner });
      expect(calls).toBe(2);
      expect(run.results).toEqual([
        expect.objectContaining({ category: 'infrastructure', infraRetried: true }),
      ]);
      expect(await lines(dir)).toEqual([
        expect.objectContaining({ category: 'infrastructure', infraRetried: true }),
      ]);
    });
  });

  it('treats a runner that throws as an infrastructure failure and keeps the error', async () => {
    await withTempDir(async (dir) => {
      let calls = 0;
      const runner: TrialRunner = async () => {
        calls++;
        throw new SandboxUnavailable('cannot reach the Docker daemon');
      };
      const run = await runEval({ suite: fakeSuite(['a']), n: 1, outDir: dir, runner });
      expect(calls).toBe(2);
      expect(run.results[0]).toMatchObject({
        category: 'infrastructure',
        outcome: 'failed',
        error: 'SANDBOX_UNAVAILABLE: cannot reach the Docker daemon',
        turns: 0,
      });
    });
  });

  it('does not retry a task failure', async () => {
    await withTempDir(async (dir) => {
      let calls = 0;
      const runner: TrialRunner = async (spec) => {
        calls++;
        return result(spec, 'tests-failed');
      };
      await runEval({ suite: fakeSuite(['a']), n: 2, outDir: dir, runner });
      expect(calls).toBe(2);
    });
  });
});

describe('runEval interruption and time budget', () => {
  it('on abort starts nothing new, aborts in-flight trials and keeps only finished ones on disk', async () => {
    await withTempDir(async (dir) => {
      const controller = new AbortController();
      const started: string[] = [];
      const sawAbort: string[] = [];
      const runner: TrialRunner = async (spec, { signal }) => {
        started.push(`${spec.taskId}#${spec.trial}`);
        if (started.length === 1) return result(spec, 'ready-for-review');
        if (started.length === 3) setTimeout(() => controller.abort(), 5);
        try {
          await delay(5000, signal);
        } catch {
          sawAbort.push(`${spec.taskId}#${spec.trial}`);
          throw new Interrupted();
        }
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({
        suite: fakeSuite(['a', 'b']),
        n: 3,
        concurrency: 2,
        outDir: dir,
        runner,
        signal: controller.signal,
      });
      expect(started).toHaveLength(3);
      expect(sawAbort).toHaveLength(2);
      expect(run.interrupted).toBe(true);
      expect(run.results.filter((r) => r.category === 'interrupted')).toHaveLength(2);
      expect(pairs(await lines(dir))).toEqual(['a#0']);
    });
  });

  it('turns an aborted infrastructure error into "interrupted" rather than retrying it', async () => {
    await withTempDir(async (dir) => {
      const controller = new AbortController();
      let calls = 0;
      const runner: TrialRunner = async (spec) => {
        calls++;
        controller.abort();
        return result(spec, 'infrastructure', { error: 'exec stream closed' });
      };
      const run = await runEval({
        suite: fakeSuite(['a']),
        n: 2,
        outDir: dir,
        runner,
        signal: controller.signal,
      });
      expect(calls).toBe(1);
      expect(run.results).toEqual([expect.objectContaining({ category: 'interrupted' })]);
      expect(await lines(dir)).toEqual([]);
    });
  });

  it('aborts a trial that exceeds its time budget and records it as a timeout', async () => {
    await withTempDir(async (dir) => {
      const runner: TrialRunner = async (spec, { signal }) => {
        await delay(5000, signal);
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({
        suite: fakeSuite(['a']),
        n: 1,
        outDir: dir,
        runner,
        trialTimeoutSec: 0.02,
      });
      expect(run.results[0]).toMatchObject({ category: 'timeout', outcome: 'failed' });
      expect(await lines(dir)).toEqual([expect.objectContaining({ category: 'timeout' })]);
    });
  });
});

describe('runEval --resume', () => {
  it('after an interruption, runs only the trials that are not on disk', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a', 'b', 'c']);
      const controller = new AbortController();
      let firstCalls = 0;
      const interruptAfterFour: TrialRunner = async (spec) => {
        firstCalls++;
        if (firstCalls === 5) {
          controller.abort();
          throw new Interrupted();
        }
        return result(spec, 'ready-for-review');
      };
      await runEval({
        suite,
        n: 3,
        concurrency: 1,
        outDir: dir,
        runner: interruptAfterFour,
        signal: controller.signal,
      });
      const before = pairs(await lines(dir));
      expect(before).toHaveLength(4);

      const resumedSpecs: TrialSpec[] = [];
      const counting: TrialRunner = async (spec) => {
        resumedSpecs.push(spec);
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({ suite, n: 3, concurrency: 1, outDir: dir, resume: true, runner: counting });
      expect(resumedSpecs).toHaveLength(5);
      const all = ['a', 'b', 'c'].flatMap((t) => [0, 1, 2].map((i) => `${t}#${i}`)).sort();
      expect(pairs(resumedSpecs)).toEqual(all.filter((p) => !before.includes(p)));
      expect(run).toMatchObject({ resumed: 4, interrupted: false, total: 9 });
      expect(run.results).toHaveLength(9);
      expect(pairs(await lines(dir))).toEqual(all);
    });
  });

  it('ignores a truncated last line, re-runs that trial and leaves a clean file', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a', 'b']);
      await runEval({ suite, n: 2, outDir: dir, runner: passEverything });
      const file = path.join(dir, RESULTS_FILE);
      const complete = (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
      // Keep three whole lines and half of the fourth: what a crash during a write leaves.
      const partial = (complete[3] ?? '').slice(0, 20);
      await writeFile(file, `${complete.slice(0, 3).join('\n')}\n${partial}`);

      const rerun: TrialSpec[] = [];
      const runner: TrialRunner = async (spec) => {
        rerun.push(spec);
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({ suite, n: 2, outDir: dir, resume: true, runner });
      expect(rerun).toHaveLength(1);
      expect(run.resumed).toBe(3);
      const text = await readFile(file, 'utf8');
      expect(text.endsWith('\n')).toBe(true);
      expect(
        text
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as unknown),
      ).toHaveLength(4);
    });
  });

  it('resuming a finished eval runs nothing', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a']);
      await runEval({ suite, n: 2, outDir: dir, runner: passEverything });
      let calls = 0;
      const run = await runEval({
        suite,
        n: 2,
        outDir: dir,
        resume: true,
        runner: async (spec) => {
          calls++;
          return result(spec, 'ready-for-review');
        },
      });
      expect(calls).toBe(0);
      expect(run.results).toHaveLength(2);
    });
  });

  it('refuses to resume an eval of a different suite file', async () => {
    await withTempDir(async (dir) => {
      await runEval({
        suite: fakeSuite(['a'], { sha256: '1'.repeat(64) }),
        n: 1,
        outDir: dir,
        runner: passEverything,
      });
      const other = fakeSuite(['a'], { sha256: '2'.repeat(64) });
      await expect(
        runEval({ suite: other, n: 1, outDir: dir, resume: true, runner: passEverything }),
      ).rejects.toThrow(/the suite changed/);
    });
  });

  it('refuses to resume with a different n', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a']);
      await runEval({ suite, n: 2, outDir: dir, runner: passEverything });
      await expect(
        runEval({ suite, n: 3, outDir: dir, resume: true, runner: passEverything }),
      ).rejects.toThrow(/-n: the lock says 2, given 3/);
    });
  });

  it('refuses to start a fresh eval over existing results', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a']);
      await runEval({ suite, n: 1, outDir: dir, runner: passEverything });
      await expect(runEval({ suite, n: 1, outDir: dir, runner: passEverything })).rejects.toBeInstanceOf(
        UsageError,
      );
    });
  });

  it('reports damage in the middle of results.jsonl with its line number', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a']);
      await runEval({ suite, n: 2, outDir: dir, runner: passEverything });
      const file = path.join(dir, RESULTS_FILE);
      const [first, second] = (await readFile(file, 'utf8')).split('\n');
      await writeFile(file, `${first}\nnot json\n${second}\n`);
      const error = await runEval({ suite, n: 2, outDir: dir, resume: true, runner: passEverything }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems).toEqual([`${file}:2: not a JSON line`]);
    });
  });

  it('re-runs a trial recorded as interrupted', async () => {
    await withTempDir(async (dir) => {
      const suite = fakeSuite(['a']);
      await runEval({ suite, n: 1, outDir: dir, runner: passEverything });
      const file = path.join(dir, RESULTS_FILE);
      await writeFile(file, `${JSON.stringify(result({ taskId: 'a', trial: 0 }, 'interrupted'))}\n`);
      let calls = 0;
      await runEval({
        suite,
        n: 1,
        outDir: dir,
        resume: true,
        runner: async (spec) => {
          calls++;
          return result(spec, 'ready-for-review');
        },
      });
      expect(calls).toBe(1);
    });
  });
});

describe('runEval progress', () => {
  it('reports done/total, passes, failures and an ETA that is unknown until a trial finishes', async () => {
    await withTempDir(async (dir) => {
      const updates: EvalProgress[] = [];
      const runner: TrialRunner = async (spec) => {
        await delay(2);
        return result(
          spec,
          spec.taskId === 'a' ? 'ready-for-review' : spec.taskId === 'b' ? 'max-turns' : 'infrastructure',
        );
      };
      await runEval({
        suite: fakeSuite(['a', 'b', 'c']),
        n: 1,
        concurrency: 1,
        outDir: dir,
        runner,
        onProgress: (p) => updates.push(p),
      });
      expect(updates.map((u) => u.done)).toEqual([0, 1, 2, 3]);
      expect(updates[0]?.etaMs).toBeNull();
      expect(updates[1]?.etaMs).toBeGreaterThan(0);
      expect(updates.at(-1)).toMatchObject({
        done: 3,
        total: 3,
        passed: 1,
        failed: 1,
        infrastructure: 1,
        etaMs: 0,
      });
      expect(updates.at(-1)?.last?.taskId).toBe('c');
    });
  });
});
