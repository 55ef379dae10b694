/**
 * Eval benchmark: the offline example suite (`examples/evals/suite.yaml`, recorded model
 * sessions, real Docker) run by the built CLI, once with `--concurrency 1` and once with
 * `--concurrency 2`, on a throw-away copy of the example (the repo is never written to).
 *
 * What each number means:
 *
 * - `trialsPerMinute`: finished trials divided by the eval's own wall time
 *   (`summary.wallTimeMs`: first trial started to last trial finished; building or finding
 *   the sandbox image beforehand is not in it). `processWallMs` is the whole CLI process,
 *   Node start-up and image preparation included.
 * - per trial, from its run record (`<out>/runs/<runId>/`):
 *   - `trialMs`: the trial's wall time as the eval recorded it (`results.jsonl` durationMs).
 *   - `modelMs`: the sum of `model_call` durations in `events.jsonl` (~0 with cassettes).
 *   - `testMs`: the catalog's test command: `run.json` `baseline.durationMs` when this trial
 *     measured the baseline (not when it reused another trial's, `reusedFrom`) plus, for each
 *     attempt that was verified, the `=== exit N after X.Xs` times in
 *     `attempts/<n>/test-output.txt` (0.1 s resolution).
 *   - `baselineWaitMs`: the baseline runs alongside the first attempt; this is how long the
 *     trial waited for its result after the first attempt ended (the `baseline` event after
 *     the first `attempt_end`), 0 when it was there in time.
 *   - `agentCommandMs`: the agent's own `run_command` tool calls (`tool_call` events).
 *   - `overheadMs` = trialMs - modelMs - verification test time - baselineWaitMs -
 *     agentCommandMs: what the harness itself costs per trial (image check, container
 *     create/start/remove, other tool calls such as read/edit, the change set and gate,
 *     writing files into the verification sandbox, run records). `overheadShare` =
 *     overheadMs / trialMs.
 *   - `phases` split the trial at its events (image, attempt_start, loop_end,
 *     attempt_end), each with the measured work above subtracted, so the overhead can be
 *     placed: `prepare` (catalog, ticket, image content hash), `baseline` (image to the
 *     first attempt's start; the baseline test itself runs alongside the attempt),
 *     `agent` (model loop minus model and `run_command` time), `changeAndVerify` (change
 *     set, gate, verification sandbox around the test run), `finish` (disposing, patch,
 *     run record; minus `baselineWaitMs`).
 */
import { cp, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkInterrupted, onCleanup, run, runOk } from './process.mjs';
import { median, quantile, round1 } from './stats.mjs';

/**
 * @typedef {{ taskId: string, trial: number, outcome: string, category: string, durationMs: number, startedAt: string, finishedAt: string, runId?: string, provider?: string }} TrialResult
 * @typedef {{ time: string, kind: string, attempt?: number, tool?: string, durationMs?: number }} HarnessEvent
 */

/**
 * Copies `examples/shipping-service` and `examples/evals` side by side into a temp folder
 * (as `dist/demo.js` `prepareExampleCopy` does), so the suite's relative paths hold and
 * nothing is written into the repo. The example's host-installed `node_modules` comes
 * along when present (the sandbox image build has no network); otherwise `npm ci` runs in
 * the copy.
 *
 * @param {string} packageRoot
 * @param {string} parent
 * @param {(line: string) => void} log
 */
export async function prepareCopy(packageRoot, parent, log) {
  const skip = (/** @type {string} */ source) => !source.split(/[\\/]/).includes('.sandbox-harness');
  const example = join(parent, 'shipping-service');
  // verbatimSymlinks: node_modules/.bin links stay relative; resolved to absolute paths they
  // would point outside the repo, and the image build (rightly) leaves such links out.
  const copy = { recursive: true, filter: skip, verbatimSymlinks: true };
  await cp(join(packageRoot, 'examples', 'shipping-service'), example, copy);
  await cp(join(packageRoot, 'examples', 'evals'), join(parent, 'evals'), copy);
  const repo = join(example, 'repo');
  const installed = await stat(join(repo, 'node_modules', 'typescript')).then(
    () => true,
    () => false,
  );
  if (!installed) {
    log('  installing the example\u2019s dev dependencies in the copy (npm ci --prefer-offline) ...');
    await runOk('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], {
      cwd: repo,
    });
  }
  return { suite: join(parent, 'evals', 'suite.yaml') };
}

/** @param {string} file */
async function readJsonl(file) {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/**
 * A test layer that "exited 137" in under a second without printing anything: the
 * harness's exec gave up on a command the daemon had not started yet (its exec inspect
 * said not running, no exit code), not a real test result. Counted so a skewed run shows.
 */
const PHANTOM_EXIT = /^=== layer [^\n]*\n=== exit 137 after 0\.\ds$/gm;

/**
 * Milliseconds of every `=== exit N ... after X.Xs` line of a test-output file, and how
 * many of its layers look like a phantom exit.
 *
 * @param {string} file
 */
async function testTimeIn(file) {
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return { ms: 0, phantomExits: 0 };
  let ms = 0;
  for (const match of text.matchAll(/^=== exit -?\d+(?: \(timed out\))? after (\d+(?:\.\d+)?)s$/gm)) {
    ms += Number(match[1]) * 1000;
  }
  return { ms, phantomExits: [...text.matchAll(PHANTOM_EXIT)].length };
}

/**
 * @param {string} outDir
 * @param {TrialResult} result
 */
async function analyseTrial(outDir, result) {
  const trialMs = result.durationMs;
  const base = { taskId: result.taskId, trial: result.trial, category: result.category, trialMs };
  if (!result.runId) return { ...base, runId: null, note: 'no run record (failed before the run started)' };
  const dir = join(outDir, 'runs', result.runId);
  const record = JSON.parse(await readFile(join(dir, 'run.json'), 'utf8'));
  /** @type {HarnessEvent[]} */
  const events = await readJsonl(join(dir, 'events.jsonl'));
  const at = (/** @type {HarnessEvent | undefined} */ e) => (e ? Date.parse(e.time) : undefined);

  // Within an eval one trial measures the baseline and the others reuse it (`reusedFrom`):
  // only a trial's own measurement is its test time.
  const baselineTestMs = record.baseline?.reusedFrom ? 0 : (record.baseline?.durationMs ?? 0);
  let phantomExits = (await testTimeIn(join(dir, 'baseline-test-output.txt'))).phantomExits;
  /** @type {Record<number, number>} */
  const verifyTestMsByAttempt = {};
  for (const attempt of record.attempts ?? []) {
    const verify = await testTimeIn(join(dir, 'attempts', String(attempt.n), 'test-output.txt'));
    verifyTestMsByAttempt[attempt.n] = verify.ms;
    phantomExits += verify.phantomExits;
  }
  const verifyTestMs = Object.values(verifyTestMsByAttempt).reduce((a, b) => a + b, 0);
  const sum = (/** @type {HarnessEvent[]} */ list) => list.reduce((a, e) => a + (e.durationMs ?? 0), 0);
  const modelCalls = events.filter((e) => e.kind === 'model_call');
  const commands = events.filter((e) => e.kind === 'tool_call' && e.tool === 'run_command');
  const modelMs = sum(modelCalls);
  const agentCommandMs = sum(commands);
  const testMs = baselineTestMs + verifyTestMs;
  // The baseline runs alongside the first attempt; the trial only waits for it when the
  // first attempt ends before the baseline's result is there (its own or another trial's).
  const baselineAt = at(events.find((e) => e.kind === 'baseline'));
  const firstAttemptEnd = at(events.find((e) => e.kind === 'attempt_end'));
  const baselineWaitMs =
    baselineAt !== undefined && firstAttemptEnd !== undefined ? Math.max(0, baselineAt - firstAttemptEnd) : 0;
  const overheadMs = trialMs - modelMs - verifyTestMs - baselineWaitMs - agentCommandMs;

  // Phases: consecutive spans between events; each loses the measured work inside it.
  const start = Date.parse(result.startedAt);
  const end = Date.parse(result.finishedAt);
  const image = at(events.find((e) => e.kind === 'image'));
  const attemptStarts = events.filter((e) => e.kind === 'attempt_start');
  const firstAttempt = at(attemptStarts[0]);
  const runEnd = at(events.find((e) => e.kind === 'run_end'));
  /** @type {Record<string, number> | null} */
  let phases = null;
  if (image !== undefined) {
    let agent = 0;
    let changeAndVerify = 0;
    let lastAttemptEnd;
    for (const startEvent of attemptStarts) {
      const n = startEvent.attempt;
      const loopEnd = at(events.find((e) => e.kind === 'loop_end' && e.attempt === n));
      const attemptEnd = at(events.find((e) => e.kind === 'attempt_end' && e.attempt === n));
      const began = at(startEvent) ?? 0;
      const inAttempt = (/** @type {HarnessEvent} */ e) => e.attempt === n;
      if (loopEnd !== undefined) {
        agent += loopEnd - began - sum(modelCalls.filter(inAttempt)) - sum(commands.filter(inAttempt));
        if (attemptEnd !== undefined) {
          changeAndVerify += attemptEnd - loopEnd - (verifyTestMsByAttempt[n ?? 0] ?? 0);
        }
      }
      lastAttemptEnd = attemptEnd ?? loopEnd ?? lastAttemptEnd;
    }
    const baselineEnd = firstAttempt ?? runEnd ?? end;
    phases = {
      prepare: image - start,
      // Image to first attempt: the baseline's own test runs alongside the attempts now.
      baseline: baselineEnd - image,
      agent,
      changeAndVerify,
      finish: end - (lastAttemptEnd ?? baselineEnd) - baselineWaitMs,
    };
  }
  return {
    ...base,
    runId: result.runId,
    provider: result.provider ?? null,
    modelMs,
    baselineTestMs,
    baselineWaitMs,
    verifyTestMs,
    testMs,
    agentCommandMs,
    overheadMs,
    overheadShare: trialMs > 0 ? Math.round((overheadMs / trialMs) * 1000) / 1000 : null,
    phantomExits,
    phases,
  };
}

/**
 * The suite's `fixes-threshold` task replays a session that fixes the bug, so it should pass
 * every trial; if it does not, the set-up is broken (e.g. the example's dependencies did
 * not reach the image) and the timings would describe a different workload.
 *
 * @param {string} outDir
 * @param {TrialResult[]} results
 */
async function checkSane(outDir, results) {
  const task = results.filter((r) => r.taskId === 'fixes-threshold');
  const broken = task[0];
  // One failed trial can be a flake (see PHANTOM_EXIT); none passing is a broken set-up.
  if (!broken || task.some((r) => r.outcome === 'passed')) return;
  let tail = '';
  if (broken.runId) {
    const runDir = join(outDir, 'runs', broken.runId);
    const output =
      (await readFile(join(runDir, 'attempts', '1', 'test-output.txt'), 'utf8').catch(() => undefined)) ??
      (await readFile(join(runDir, 'baseline-test-output.txt'), 'utf8').catch(() => ''));
    tail = output.trim().split('\n').slice(-8).join('\n');
  }
  throw new Error(
    `the example task fixes-threshold should pass but no trial did (trial ${broken.trial} ended ${broken.category}` +
      `${broken.error ? `: ${broken.error}` : ''}); the eval set-up is broken, so no eval timings were kept.` +
      `${tail ? `\nlast test output:\n${tail}` : ''}\n(rerun with --keep-temp to keep the eval folder)`,
  );
}

/**
 * @param {number[]} values
 * @param {(value: number) => number} [round] default: to 0.1 (milliseconds)
 */
const dist = (values, round = round1) =>
  values.length === 0
    ? null
    : { n: values.length, median: round(median(values)), p90: round(quantile(values, 0.9)) };

/** Shares keep three decimals (0.259 = 25.9%). */
const round3 = (/** @type {number} */ value) => Math.round(value * 1000) / 1000;

/**
 * @param {string} cli path of dist/main.js
 * @param {string} cwd
 * @param {string} suite
 * @param {string} outDir
 * @param {number} n
 * @param {number} concurrency
 * @param {string[]} [extra] more CLI arguments (the fleet bench adds `--engines FILE`)
 */
export async function runSuite(cli, cwd, suite, outDir, n, concurrency, extra = []) {
  const args = [cli, 'eval', suite, '-n', String(n), '--concurrency', String(concurrency)];
  args.push(...extra, '--out', outDir, '--json');
  const result = await run(process.execPath, args, { cwd });
  checkInterrupted();
  if (result.code !== 0) {
    throw new Error(
      `the eval at concurrency ${concurrency} exited with ${result.code ?? result.signal}:\n` +
        `${result.stderr.trim().slice(-3000)}\n(command: node ${args.join(' ')})`,
    );
  }
  const report = JSON.parse(result.stdout);
  /** @type {TrialResult[]} */
  const results = await readJsonl(join(outDir, 'results.jsonl'));
  await checkSane(outDir, results);
  const trials = [];
  for (const r of results) trials.push(await analyseTrial(outDir, r));
  const wallTimeMs = report.summary.wallTimeMs;
  const measured = trials.filter((t) => typeof t.overheadMs === 'number');
  const totalTrialMs = measured.reduce((a, t) => a + (t.trialMs ?? 0), 0);
  const totalOverheadMs = measured.reduce((a, t) => a + (t.overheadMs ?? 0), 0);
  /** @type {Record<string, ReturnType<typeof dist>>} */
  const phaseOverhead = {};
  for (const name of ['prepare', 'baseline', 'agent', 'changeAndVerify', 'finish']) {
    phaseOverhead[name] = dist(measured.flatMap((t) => (t.phases ? [t.phases[name] ?? 0] : [])));
  }
  const byTask = /** @type {Record<string, { passed: number, trials: number }>} */ ({});
  for (const r of results) {
    const entry = (byTask[r.taskId] ??= { passed: 0, trials: 0 });
    entry.trials += 1;
    if (r.outcome === 'passed') entry.passed += 1;
  }
  return {
    concurrency,
    n,
    ...(extra.length ? { args: extra } : {}),
    trials: results.length,
    wallTimeMs,
    processWallMs: Math.round(result.ms),
    trialsPerMinute: Math.round((results.length / (wallTimeMs / 60_000)) * 100) / 100,
    providers: [...new Set(results.map((r) => r.provider ?? 'none'))],
    passesByTask: byTask,
    trialMs: dist(measured.map((t) => t.trialMs ?? 0)),
    testMs: dist(measured.map((t) => t.testMs ?? 0)),
    modelMs: dist(measured.map((t) => t.modelMs ?? 0)),
    agentCommandMs: dist(measured.map((t) => t.agentCommandMs ?? 0)),
    overheadMs: dist(measured.map((t) => t.overheadMs ?? 0)),
    overheadShare: dist(
      measured.map((t) => t.overheadShare ?? 0),
      round3,
    ),
    phantomTestExits: measured.reduce((a, t) => a + (t.phantomExits ?? 0), 0),
    overheadShareOfAllTrialTime:
      totalTrialMs > 0 ? Math.round((totalOverheadMs / totalTrialMs) * 1000) / 1000 : null,
    phaseOverheadMs: phaseOverhead,
    trialDetails: trials,
    engines: report.summary.engines,
  };
}

/**
 * `afterRun` sees each eval's output folder before the temp copy is removed (the viewer
 * benchmark measures its pages there).
 *
 * @param {{ packageRoot: string, n: number, log: (line: string) => void, keepTemp: boolean, afterRun?: (outDir: string, concurrency: number) => Promise<void> }} o
 */
export async function benchEval(o) {
  const parent = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-eval-'));
  const remove = () => rm(parent, { recursive: true, force: true });
  const unregister = onCleanup(remove);
  try {
    const { suite } = await prepareCopy(o.packageRoot, parent, o.log);
    const cli = join(o.packageRoot, 'dist', 'main.js');
    const runs = [];
    for (const concurrency of [1, 2]) {
      checkInterrupted();
      o.log(`  eval -n ${o.n} --concurrency ${concurrency} (a minute or two) ...`);
      const outDir = join(parent, `out-c${concurrency}`);
      const r = await runSuite(cli, parent, suite, outDir, o.n, concurrency);
      await o.afterRun?.(outDir, concurrency);
      o.log(
        `  concurrency ${concurrency}: ${r.trials} trials in ${(r.wallTimeMs / 1000).toFixed(1)} s, ${r.trialsPerMinute} trials/min`,
      );
      if (r.phantomTestExits > 0) {
        o.log(
          `  warning: ${r.phantomTestExits} test run(s) "exited 137" in under a second with no output: the harness gave up on an exec the daemon had not started yet; those trials' outcomes and times are off`,
        );
      }
      runs.push(r);
    }
    const [c1, c2] = runs;
    return {
      suite: 'examples/evals/suite.yaml',
      n: o.n,
      runs,
      speedupAtConcurrency2:
        c1 && c2 ? Math.round((c2.trialsPerMinute / c1.trialsPerMinute) * 100) / 100 : null,
      ...(o.keepTemp ? { keptTempDir: parent } : {}),
    };
  } finally {
    if (!o.keepTemp) await remove();
    unregister();
  }
}
