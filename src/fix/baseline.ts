/**
 * Step 3 of `fix`: the catalog's tests on the untouched repo, in a sandbox of their own. A
 * ticket whose tests already pass is reported (`nothing-to-fix`), not "fixed". It runs while
 * the first attempt starts; within an eval it runs once per (image, catalog, test command)
 * and every trial reuses it, saying so in its record.
 */
import { formatTestRun, runTestLayers, type TestLayer, type TestRun } from './test-layers.js';
import type { Run, SandboxImage } from './context.js';

export interface BaselineResult {
  passed: boolean;
  failingLayer?: string;
  exitCode: number;
  durationMs: number;
  /** The whole output, for `baseline-test-output.txt`. */
  output: string;
  /** The run that measured it. */
  runId: string;
}

/** Baselines shared between the trials of one eval. */
export interface BaselineCache {
  get(key: string, measure: () => Promise<BaselineResult>): Promise<BaselineResult>;
}

export function memoryBaselineCache(): BaselineCache {
  const results = new Map<string, Promise<BaselineResult>>();
  return {
    get(key, measure) {
      let pending = results.get(key);
      if (!pending) {
        pending = measure();
        results.set(key, pending);
        // A failed measurement (Ctrl-C, a lost engine) is not a result: the next trial measures again.
        pending.catch(() => results.delete(key));
      }
      return pending;
    },
  };
}

function baselineKey(run: Run, image: SandboxImage, layers: readonly TestLayer[]): string {
  return JSON.stringify([image.imageId, run.catalog.hash, layers.map((l) => [l.name, l.command])]);
}

async function measure(run: Run, layers: readonly TestLayer[]): Promise<BaselineResult> {
  const box = await run.sandboxes.create('baseline', {}, true);
  try {
    const tests: TestRun = await runTestLayers(box, layers, {
      timeoutMs: run.catalog.catalog.sandbox.timeouts.testSec * 1000,
      signal: run.signal,
    });
    return {
      passed: tests.passed,
      ...(tests.failingLayer ? { failingLayer: tests.failingLayer.name } : {}),
      exitCode: tests.failingLayer?.exitCode ?? 0,
      durationMs: tests.durationMs,
      output: formatTestRun(tests),
      runId: run.dir.id,
    };
  } finally {
    await run.sandboxes.release(box);
  }
}

export async function runBaseline(
  run: Run,
  image: SandboxImage,
  layers: readonly TestLayer[],
): Promise<BaselineResult> {
  const result = run.deps.baselines
    ? await run.deps.baselines.get(baselineKey(run, image, layers), () => measure(run, layers))
    : await measure(run, layers);
  const reused = result.runId !== run.dir.id;
  await run.dir.writeFile('baseline-test-output.txt', result.output);
  run.record.baseline = {
    failing: !result.passed,
    ...(result.failingLayer ? { failingLayer: result.failingLayer } : {}),
    durationMs: result.durationMs,
    ...(reused ? { reusedFrom: result.runId } : {}),
  };
  run.events.emit({
    kind: 'baseline',
    status: result.passed ? 'passing' : 'failing',
    durationMs: result.durationMs,
    exitCode: result.exitCode,
    ...(reused ? { message: `reused from run ${result.runId}` } : {}),
  });
  return result;
}
