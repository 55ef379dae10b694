/**
 * Step 3 of `fix`: the catalog's tests on the untouched repo, in a sandbox of their own. A
 * ticket whose tests already pass is reported (`nothing-to-fix`), not "fixed". It runs while
 * the first attempt starts; within an eval it runs once per (image, catalog, test command)
 * and every trial reuses it, saying so in its record.
 */
import { TestCommandBroken } from '../errors.js';
import { SETUP_LAYER, type Catalog } from '../catalog/schema.js';
import { formatTestRun, runTestLayers, type TestLayer, type TestRun } from './test-layers.js';
import { classifyTestRun, detectRunner } from './test-command.js';
import type { Run } from './types.js';
import { hostRepoLookup, testRunHints } from './import-hints.js';
import type { RepoImage } from '../image-context/request.js';
import type { RunRecord } from '../runs/record.js';
import type { Sandbox } from '../sandbox/types.js';
import { testOutputsOf, type TestOutputs } from '../changes/ignore.js';
import type { BaselineResult, BrokenTestCommand } from './baseline-cache.js';

/** What makes two baselines the same: the image's id, the catalog and the test commands. */
export function baselineKey(run: Run, image: RepoImage, layers: readonly TestLayer[]): string {
  return JSON.stringify([image.imageId, run.catalog.hash, layers.map((l) => [l.name, l.command])]);
}

async function measure(
  run: Run,
  layers: readonly TestLayer[],
  onCommandStart: (() => void) | undefined,
): Promise<BaselineResult> {
  const box = await run.sandboxes.create('baseline', {}, true);
  try {
    let started = false;
    const tests: TestRun = await runTestLayers(box, layers, {
      timeoutMs: run.catalog.catalog.sandbox.timeouts.testSec * 1000,
      signal: run.signal,
      onLayer: () => {
        if (!started) onCommandStart?.();
        started = true;
      },
    });
    const broken = brokenLayer(tests);
    const testOutputs = await writtenByTests(box, run.signal);
    return {
      ...(broken ? { broken } : {}),
      ...(testOutputs ? { testOutputs } : {}),
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

/** Paths written by a test command cap what is read of the scan: past that, nothing is assumed. */
const TEST_OUTPUT_SCAN_ENTRIES = 5000;

/**
 * What the tests left in the baseline's workspace. A hint for the gate (it can only keep a
 * path from being copied back), so a scan that fails or overflows means none.
 */
async function writtenByTests(box: Sandbox, signal: AbortSignal): Promise<TestOutputs | undefined> {
  try {
    const scan = await box.changes({ maxEntries: TEST_OUTPUT_SCAN_ENTRIES, signal });
    if (!scan.complete) return undefined;
    const outputs = testOutputsOf(scan.changes);
    return outputs.paths.size > 0 ? outputs : undefined;
  } catch (error) {
    if (signal.aborted) throw error;
    return undefined;
  }
}

/** The first layer that ran whose command did not run the tests (a passing layer counts too: 0 tests). */
export function brokenLayer(tests: TestRun): BrokenTestCommand | undefined {
  for (const layer of tests.layers) {
    const problem = classifyTestRun({
      exitCode: layer.exitCode,
      timedOut: layer.timedOut,
      output: layer.output,
      runner: detectRunner(layer.command, layer.output),
    });
    if (problem) return { layer: layer.name, command: layer.command, exitCode: layer.exitCode, ...problem };
  }
  return undefined;
}

/**
 * The catalog key whose command broke: the setup's (`sandbox.setup`, run as the layer named
 * `setup` of a verification) or the tests'.
 */
export function brokenKey(broken: Pick<BrokenTestCommand, 'layer'>, catalog: Catalog): string {
  return broken.layer === SETUP_LAYER && catalog.sandbox.setup
    ? 'sandbox.setup.command'
    : 'agent.testCommand';
}

/** The configuration error a broken test command ends a run with (exit 2, before any attempt). */
export function testCommandError(
  broken: BrokenTestCommand,
  catalog: { file: string; catalog: Catalog },
  layers: number,
  hints: readonly string[] = [],
): TestCommandBroken {
  const catalogFile = catalog.file;
  const where = layers > 1 ? ` (layer "${broken.layer}")` : '';
  return new TestCommandBroken(
    `the test command itself failed to run: ${broken.reason}; \`${broken.command}\`${where} exited with code ${broken.exitCode} on the untouched repo, so no attempt was started`,
    {
      hint: `${hints.map((h) => `${h.charAt(0).toUpperCase()}${h.slice(1)}. `).join('')}Fix ${brokenKey(broken, catalog.catalog)} in ${catalogFile} (or the repo's scripts), then try it with \`sandbox-harness check --catalog ${catalogFile}\`; the output is in baseline-test-output.txt of the run record.`,
      details: { ...broken },
    },
  );
}

export async function runBaseline(
  run: Run,
  image: RepoImage,
  layers: readonly TestLayer[],
  /** Called when the test command starts in the baseline's sandbox (this run's, or the one another trial measures). */
  onCommandStart?: () => void,
): Promise<BaselineResult> {
  const result = run.deps.baselines
    ? await run.deps.baselines.get(
        baselineKey(run, image, layers),
        (started) => measure(run, layers, started),
        onCommandStart,
      )
    : await measure(run, layers, onCommandStart);
  const reused = result.runId !== run.dir.id;
  await run.dir.writeFile('baseline-test-output.txt', result.output);
  const baseline: NonNullable<RunRecord['baseline']> = {
    failing: !result.passed,
    ...(result.failingLayer ? { failingLayer: result.failingLayer } : {}),
    durationMs: result.durationMs,
    ...(reused ? { reusedFrom: result.runId } : {}),
    ...(result.broken
      ? {
          brokenCommand: {
            layer: result.broken.layer,
            command: result.broken.command,
            kind: result.broken.kind,
            reason: result.broken.reason,
          },
        }
      : {}),
  };
  // Failing tests that no attempt can fix (a src/ package not on PYTHONPATH): said before the attempts fail on
  // it; for a broken command (a conftest that imports that package) it is the way out.
  const hints = await testRunHints(
    result.output,
    result.passed,
    hostRepoLookup(run.repoDir),
    run.catalog.catalog.sandbox.env,
  );
  run.journal.append({
    kind: 'baseline',
    baseline,
    status: result.broken ? 'broken' : result.passed ? 'passing' : 'failing',
    durationMs: result.durationMs,
    exitCode: result.exitCode,
    ...(hints.length > 0 ? { hints } : {}),
    ...(result.broken || reused
      ? {
          message: [result.broken?.reason, reused ? `reused from run ${result.runId}` : undefined]
            .filter(Boolean)
            .join('; '),
        }
      : {}),
  });
  return hints.length > 0 ? { ...result, hints } : result;
}
