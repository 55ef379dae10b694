/**
 * The eval scheduler over several engines, with fake engines and fake trials: where trials
 * are placed, where an infrastructure failure is retried, what a lost engine does to the
 * trials on it, and what `--resume` makes of results from other engines.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SandboxUnavailable } from '../../../src/errors.js';
import { fleetPlacement, sharedBaselines } from '../../../src/evals/engines.js';
import type { EvalProgress } from '../../../src/evals/eval-progress.js';
import { RESULTS_FILE } from '../../../src/evals/results-file.js';
import { runEval } from '../../../src/evals/runner.js';
import type { TrialResult, TrialRunner } from '../../../src/evals/types.js';
import type { BaselineResult } from '../../../src/fix/baseline-cache.js';
import { memoryBaselineCache } from '../../../src/fix/baseline-cache.js';
import type { EngineSpec } from '../../../src/sandbox/docker/fleet/engines-file.js';
import { connectFleet, type EngineClient, type Fleet } from '../../../src/fleet/fleet.js';
import type { EngineInfo } from '../../../src/sandbox/docker/engine/index.js';
import { delay, fakeSuite, result, withTempDir } from './helpers.js';

class FakeEngine implements EngineClient {
  answering = true;
  async ping(): Promise<void> {
    if (!this.answering) throw new SandboxUnavailable('cannot reach the engine (ECONNREFUSED)');
  }
  async info(): Promise<EngineInfo> {
    return { cpus: 1 } as EngineInfo;
  }
}

async function fleetOf(engines: Record<string, { capacity: number; fake?: FakeEngine }>): Promise<{
  fleet: Fleet<FakeEngine>;
  fakes: Record<string, FakeEngine>;
}> {
  const fakes = Object.fromEntries(
    Object.entries(engines).map(([name, e]) => [name, e.fake ?? new FakeEngine()]),
  );
  const specs: EngineSpec[] = Object.entries(engines).map(([name, e]) => ({
    name,
    endpoint: { transport: 'unix', socketPath: `/run/${name}.sock` },
    origin: `test (${name})`,
    capacity: e.capacity,
  }));
  const fleet = await connectFleet<FakeEngine>(specs, { trialCpus: 1, connect: (s) => fakes[s.name]! });
  return { fleet, fakes };
}

const placementOf = (fleet: Fleet<FakeEngine>) => fleetPlacement(fleet as unknown as Fleet);

async function lines(dir: string): Promise<TrialResult[]> {
  return (await readFile(path.join(dir, RESULTS_FILE), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TrialResult);
}

describe('trials over several engines', () => {
  it('places trials by free capacity and records on each result where it ran', async () => {
    await withTempDir(async (dir) => {
      const { fleet } = await fleetOf({ a: { capacity: 2 }, b: { capacity: 1 } });
      const running = new Map<string, number>();
      let most = { a: 0, b: 0 } as Record<string, number>;
      const runner: TrialRunner = async (spec, { engine }) => {
        running.set(engine, (running.get(engine) ?? 0) + 1);
        most = { ...most, [engine]: Math.max(most[engine] ?? 0, running.get(engine) ?? 0) };
        await delay(10);
        running.set(engine, (running.get(engine) ?? 1) - 1);
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({
        suite: fakeSuite(['t', 'u', 'v']),
        n: 3,
        outDir: dir,
        runner,
        placement: placementOf(fleet),
      });
      expect(run.results).toHaveLength(9);
      // Capacities are never exceeded, and both engines were used.
      expect(most).toEqual({ a: 2, b: 1 });
      const onDisk = await lines(dir);
      expect(new Set(onDisk.map((r) => r.engine))).toEqual(new Set(['a', 'b']));
    });
  });

  it('retries an infrastructure failure on another engine, and says where the first try failed', async () => {
    await withTempDir(async (dir) => {
      const { fleet } = await fleetOf({ a: { capacity: 1 }, b: { capacity: 1 } });
      const tries: string[] = [];
      const runner: TrialRunner = async (spec, { engine }) => {
        tries.push(`${spec.taskId}@${engine}`);
        // The model API failed once for task x, wherever it ran; the engine still answers.
        if (spec.taskId === 'x' && tries.filter((t) => t.startsWith('x@')).length === 1) {
          return result(spec, 'infrastructure', { error: 'MODEL: overloaded', runId: 'x-first' });
        }
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({
        suite: fakeSuite(['x']),
        n: 1,
        outDir: dir,
        runner,
        placement: placementOf(fleet),
      });
      const [first, second] = tries;
      expect(second?.split('@')[1]).not.toBe(first?.split('@')[1]);
      expect(run.results[0]).toMatchObject({
        category: 'ready-for-review',
        infraRetried: true,
        engine: second?.split('@')[1],
        firstTry: {
          engine: first?.split('@')[1],
          category: 'infrastructure',
          error: 'MODEL: overloaded',
          runId: 'x-first',
        },
      });
      // The engine answered: it is not lost.
      expect(fleet.loads().every((l) => !l.lost)).toBe(true);
    });
  });

  it('stops the trials of an engine found lost at once, retries them elsewhere and never places on it again', async () => {
    await withTempDir(async (dir) => {
      const { fleet, fakes } = await fleetOf({ a: { capacity: 1 }, b: { capacity: 1 } });
      const where: string[] = [];
      let aborts = 0;
      const runner: TrialRunner = async (spec, { engine, signal }) => {
        where.push(`${spec.taskId}#${spec.trial}@${engine}`);
        if (engine === 'b' && where.filter((w) => w.endsWith('@b')).length === 1) {
          // The engine dies under this trial; another trial's check finds out, not this one.
          fakes.b!.answering = false;
          void fleet.checkEngine('b', { attempts: 1 });
          try {
            await delay(60_000, signal);
          } catch (error) {
            aborts++;
            throw error;
          }
        }
        await delay(5);
        return result(spec, 'ready-for-review');
      };
      const notices: string[] = [];
      const run = await runEval({
        suite: fakeSuite(['p', 'q']),
        n: 3,
        outDir: dir,
        runner,
        placement: placementOf(fleet),
        onProgress: (p) => (p.notice ? notices.push(p.notice) : undefined),
      });
      expect(aborts).toBe(1);
      const lost = where.find((w) => w.endsWith('@b'))!;
      // Only the first trial ever went to b.
      expect(where.filter((w) => w.endsWith('@b'))).toEqual([lost]);
      expect(run.results).toHaveLength(6);
      expect(run.results.every((r) => r.category === 'ready-for-review' && r.engine === 'a')).toBe(true);
      const retried = run.results.find((r) => r.infraRetried)!;
      expect(`${retried.taskId}#${retried.trial}@b`).toBe(lost);
      expect(retried.firstTry).toMatchObject({ engine: 'b', category: 'infrastructure' });
      expect(retried.firstTry?.error).toMatch(/engine b .* stopped answering/);
      expect(notices).toEqual([expect.stringMatching(/^engine b lost \(no answer to 1 pings/)]);
      // Every trial once on disk.
      const onDisk = await lines(dir);
      expect(new Set(onDisk.map((r) => `${r.taskId}#${r.trial}`)).size).toBe(6);
      expect(onDisk).toHaveLength(6);
    });
  });

  it('gives up on a trial that hangs on a lost engine after the grace period', async () => {
    await withTempDir(async (dir) => {
      const { fleet } = await fleetOf({ a: { capacity: 1 }, b: { capacity: 1 } });
      let hung = 0;
      const runner: TrialRunner = async (spec, { engine }) => {
        if (engine === 'b') {
          hung++;
          fleet.markLost('b', 'hangs');
          // Ignores its signal, as a call on a connection that never answers does.
          return new Promise<TrialResult>(() => undefined);
        }
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({
        suite: fakeSuite(['h']),
        n: 2,
        outDir: dir,
        runner,
        placement: placementOf(fleet),
        lostEngineGraceMs: 20,
      });
      expect(hung).toBe(1);
      expect(run.results.map((r) => [r.category, r.engine])).toEqual([
        ['ready-for-review', 'a'],
        ['ready-for-review', 'a'],
      ]);
      expect(run.results.find((r) => r.infraRetried)?.firstTry?.engine).toBe('b');
    });
  });

  it('stops placing once every engine is lost: the trials left are not run, and --resume runs them', async () => {
    await withTempDir(async (dir) => {
      const first = await fleetOf({ a: { capacity: 1 }, b: { capacity: 1 } });
      const runner: TrialRunner = async (spec, { engine }) => {
        if (spec.trial === 1) {
          first.fleet.markLost(engine, 'gone');
          return result(spec, 'infrastructure', { error: 'SANDBOX_UNAVAILABLE: gone' });
        }
        return result(spec, 'ready-for-review');
      };
      const run = await runEval({
        suite: fakeSuite(['s']),
        n: 4,
        outDir: dir,
        runner,
        placement: placementOf(first.fleet),
      });
      expect(run.interrupted).toBe(false);
      expect(run.enginesLost).toMatch(/every engine of this eval is lost: a \(gone\), b \(gone\)/);
      // Trial 0 passed; trial 1 failed on one engine, was retried on the other, which was lost too.
      expect(run.results.map((r) => [r.trial, r.category])).toEqual([
        [0, 'ready-for-review'],
        [1, 'infrastructure'],
      ]);
      expect(run.results[1]?.infraRetried).toBe(true);

      const second = await fleetOf({ c: { capacity: 2 } });
      const progress: EvalProgress[] = [];
      const resumed = await runEval({
        suite: fakeSuite(['s']),
        n: 4,
        outDir: dir,
        resume: true,
        runner: async (spec) => result(spec, 'ready-for-review'),
        placement: placementOf(second.fleet),
        onProgress: (p) => progress.push(p),
      });
      expect(resumed.resumed).toBe(2);
      expect(resumed.results.map((r) => [r.trial, r.engine])).toEqual([
        [0, expect.stringMatching(/^[ab]$/)],
        [1, expect.stringMatching(/^[ab]$/)],
        [2, 'c'],
        [3, 'c'],
      ]);
      // Progress lists the engines of this run first, then the ones only resumed results name.
      const last = progress[progress.length - 1]!;
      expect(last.engines?.[0]).toMatchObject({ name: 'c', inFleet: true, trials: 2, passes: 2 });
      expect(last.engines?.slice(1).every((e) => !e.inFleet)).toBe(true);
    });
  });
});

describe('one baseline cache for trials on several engines', () => {
  const baseline = (runId: string): BaselineResult => ({
    passed: false,
    exitCode: 1,
    durationMs: 5,
    output: 'failing',
    runId,
  });

  it('measures once and shares the result', async () => {
    const cache = sharedBaselines(memoryBaselineCache());
    let measured = 0;
    const measure = (id: string) => async () => (measured++, await delay(5), baseline(id));
    const results = await Promise.all([cache.get('k', measure('r1')), cache.get('k', measure('r2'))]);
    expect(measured).toBe(1);
    expect(results.map((r) => r.runId)).toEqual(['r1', 'r1']);
  });

  it('does not hand another engine’s failure to a trial that waited for it: that trial measures itself', async () => {
    const cache = sharedBaselines(memoryBaselineCache());
    const lostEngine = cache.get('k', async () => {
      await delay(5);
      throw new SandboxUnavailable('engine b stopped answering');
    });
    const waiting = cache.get('k', async () => baseline('on-a'));
    await expect(lostEngine).rejects.toThrow(/engine b stopped answering/);
    expect((await waiting).runId).toBe('on-a');
  });
});
