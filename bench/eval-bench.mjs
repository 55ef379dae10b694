/**
 * Eval benchmark: the offline example suite (`examples/evals/suite.yaml`, recorded model
 * sessions, real Docker) run by the built CLI on a throw-away copy of the example (the repo
 * is never written to): the whole suite with `--concurrency 1`, then with `--concurrency 2`,
 * then, for a like-for-like comparison with the reference results file (`targets.mjs`), a
 * suite of only the tasks that file ran, with `--concurrency 2`.
 *
 * What each number means:
 *
 * - `trialsPerMinute`: finished trials divided by the eval's own wall time
 *   (`summary.wallTimeMs`: first trial started to last trial finished; building or finding
 *   the sandbox image beforehand is not in it). `processWallMs` is the whole CLI process,
 *   Node start-up and image preparation included.
 * - per trial, from its run record (`<out>/runs/<runId>/`):
 *   - `trialMs`: the trial's wall time as the eval recorded it (`results.jsonl` durationMs).
 *   - `modelMs`: every `model_call` in `events.jsonl`: the agent's, its sub-agents' and the
 *     checker's (~0 with cassettes); `checkerModelMs` is the checker's part.
 *   - `agentCommandMs`: every `run_command` tool call (the agent's, its sub-agents', the
 *     checker's).
 *   - `verifyTestMs`: the catalog's tests in each verification sandbox (`verify` events;
 *     `attempts/<n>/test-output.txt` when an event lacks its duration).
 *   - the baseline runs while attempt 1 does, and within an eval once per (image, catalog,
 *     test command): a trial either ran it (`run.json` `baseline` without `reusedFrom`) or
 *     reused another trial's (with `reusedFrom`, whose `durationMs` is that other trial's
 *     test time). Only what the trial waited for counts: `baselineWaitMs` is the time from
 *     the end of attempt 1 to the baseline's result, when that came later; up to the
 *     baseline's test duration it is test time (`ownBaselineTestWaitMs` when the trial ran
 *     it, `sharedBaselineWaitMs` when it waited for another trial's run, which is not this
 *     trial's test-command time), the rest is the baseline sandbox's own overhead.
 *   - `testMs` = verifyTestMs + ownBaselineTestWaitMs: test-command time on the trial's
 *     critical path.
 *   - `overheadMs` = trialMs - modelMs - testMs - agentCommandMs - sharedBaselineWaitMs: what
 *     the harness itself costs per trial (image check, sandboxes created and removed, the
 *     other tool calls such as read/edit, freeze, change set and gate, writing the change
 *     into the verification sandbox and checking it, the checker's sandbox, run records).
 *     `overheadShare` = overheadMs / trialMs. A trial that ended `nothing-to-fix` has no
 *     overhead figure (its attempt was stopped midway by the baseline).
 *   - `phases` place that overhead between the trial's events, each with the measured work
 *     inside it subtracted; they add up to `overheadMs`: `prepare` (start -> `image`:
 *     catalog, ticket, image content hash), `plan` (-> first `attempt_start`: pristine tree,
 *     prompt), `agent` (-> the agent's `loop_end`, minus model and `run_command` time),
 *     `changeAndVerify` (-> `attempt_end`: freeze, change set, gate, verification sandbox,
 *     minus its tests and the review), `review` (the checker's `review` duration minus its
 *     model and `run_command` time: its sandbox, its other tools), `baseline` (the part of the
 *     wait for the baseline that was not its test), `finish` (the rest after the attempts:
 *     records, removing sandboxes, patch).
 */
import { cp, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { checkInterrupted, onCleanup, run, runOk } from './process.mjs';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { median, quantile, round1 } from './stats.mjs';

/**
 * @typedef {{ taskId: string, trial: number, outcome: string, category: string, durationMs: number, startedAt: string, finishedAt: string, runId?: string, provider?: string }} TrialResult
 * @typedef {{ time: string, kind: string, attempt?: number, tool?: string, durationMs?: number, agent?: string }} HarnessEvent
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

/** @typedef {Awaited<ReturnType<typeof analyseTrial>>} TrialAnalysis */

/** @param {HarnessEvent[]} list */
const sumMs = (list) => list.reduce((a, e) => a + (e.durationMs ?? 0), 0);

/**
 * @param {string} outDir
 * @param {TrialResult} result
 */
export async function analyseTrial(outDir, result) {
  const trialMs = result.durationMs;
  const base = { taskId: result.taskId, trial: result.trial, category: result.category, trialMs };
  if (!result.runId) return { ...base, runId: null, note: 'no run record (failed before the run started)' };
  const dir = join(outDir, 'runs', result.runId);
  const record = JSON.parse(await readFile(join(dir, 'run.json'), 'utf8'));
  /** @type {HarnessEvent[]} */
  const events = await readJsonl(join(dir, 'events.jsonl'));
  const at = (/** @type {HarnessEvent | undefined} */ e) => (e ? Date.parse(e.time) : undefined);
  // The harness's own events; the agent's sub-agents and the checker tag theirs with `agent`.
  const own = events.filter((e) => e.agent === undefined);
  const ofAttempt = (/** @type {string} */ kind, /** @type {number} */ n) =>
    own.find((e) => e.kind === kind && e.attempt === n);

  let phantomExits = (await testTimeIn(join(dir, 'baseline-test-output.txt'))).phantomExits;
  /** @type {Record<number, number>} */
  const verifyTestMsByAttempt = {};
  for (const attempt of record.attempts ?? []) {
    const fromFile = await testTimeIn(join(dir, 'attempts', String(attempt.n), 'test-output.txt'));
    phantomExits += fromFile.phantomExits;
    const event = ofAttempt('verify', attempt.n);
    verifyTestMsByAttempt[attempt.n] = event?.durationMs ?? fromFile.ms;
  }
  const verifyTestMs = Object.values(verifyTestMsByAttempt).reduce((a, b) => a + b, 0);
  const modelCalls = events.filter((e) => e.kind === 'model_call');
  const commands = events.filter((e) => e.kind === 'tool_call' && e.tool === 'run_command');
  const isChecker = (/** @type {HarnessEvent} */ e) => e.agent === 'checker';
  const modelMs = sumMs(modelCalls);
  const agentCommandMs = sumMs(commands);

  // Timeline: start, image, then attempts (the baseline runs alongside attempt 1), end.
  const start = Date.parse(result.startedAt);
  const end = Date.parse(result.finishedAt);
  const image = at(own.find((e) => e.kind === 'image'));
  const attemptStarts = own.filter((e) => e.kind === 'attempt_start');
  const firstEnd = at(ofAttempt('attempt_end', 1));
  const secondStart = at(ofAttempt('attempt_start', 2));
  const baselineAt = at(own.find((e) => e.kind === 'baseline'));
  const baselineTestMs = record.baseline?.durationMs ?? 0;
  const ranBaseline = record.baseline !== undefined && record.baseline.reusedFrom === undefined;
  // Attempt 1 over, the trial waits for the baseline's result if it has not come yet.
  const waitUntil = Math.min(baselineAt ?? 0, secondStart ?? end);
  const baselineWaitMs =
    firstEnd !== undefined && baselineAt !== undefined ? Math.max(0, waitUntil - firstEnd) : 0;
  const baselineTestWaitMs = Math.min(baselineWaitMs, baselineTestMs);
  const ownBaselineTestWaitMs = ranBaseline ? baselineTestWaitMs : 0;
  const sharedBaselineWaitMs = ranBaseline ? 0 : baselineTestWaitMs;
  const testMs = verifyTestMs + ownBaselineTestWaitMs;
  const measurable = record.outcome !== 'nothing-to-fix';
  const overheadMs = measurable ? trialMs - modelMs - testMs - agentCommandMs - sharedBaselineWaitMs : null;

  /** @type {Record<string, number> | null} */
  let phases = null;
  if (measurable && image !== undefined && attemptStarts.length > 0) {
    let agent = 0;
    let changeAndVerify = 0;
    let review = 0;
    let inAttempts = 0;
    for (const startEvent of attemptStarts) {
      const n = startEvent.attempt ?? 0;
      const began = at(startEvent) ?? 0;
      const ended = at(ofAttempt('attempt_end', n)) ?? end;
      const loopEnd = at(ofAttempt('loop_end', n)) ?? ended;
      const inAttempt = (/** @type {HarnessEvent} */ e) => e.attempt === n;
      const maker = (/** @type {HarnessEvent} */ e) => inAttempt(e) && !isChecker(e);
      const checker = (/** @type {HarnessEvent} */ e) => inAttempt(e) && isChecker(e);
      const reviewMs = sumMs(own.filter((e) => e.kind === 'review' && inAttempt(e)));
      agent += loopEnd - began - sumMs(modelCalls.filter(maker)) - sumMs(commands.filter(maker));
      changeAndVerify += ended - loopEnd - (verifyTestMsByAttempt[n] ?? 0) - reviewMs;
      review += reviewMs - sumMs(modelCalls.filter(checker)) - sumMs(commands.filter(checker));
      inAttempts += ended - began;
    }
    const firstStart = at(attemptStarts[0]) ?? image;
    // Everything after the first attempt began that is not inside an attempt: the wait for
    // the baseline, the gaps between attempts, the end of the run.
    const outside = end - firstStart - inAttempts;
    phases = {
      prepare: image - start,
      plan: firstStart - image,
      agent,
      changeAndVerify,
      review,
      baseline: baselineWaitMs - baselineTestWaitMs,
      finish: outside - baselineWaitMs,
    };
  }
  return {
    ...base,
    runId: result.runId,
    provider: result.provider ?? null,
    attempts: (record.attempts ?? []).length,
    reviews: own.filter((e) => e.kind === 'review').length,
    modelMs,
    checkerModelMs: sumMs(modelCalls.filter(isChecker)),
    baseline: ranBaseline ? 'ran' : record.baseline ? 'reused' : 'none',
    baselineTestMs,
    baselineWaitMs,
    ownBaselineTestWaitMs,
    sharedBaselineWaitMs,
    verifyTestMs,
    testMs,
    agentCommandMs,
    overheadMs,
    overheadShare:
      overheadMs !== null && trialMs > 0 ? Math.round((overheadMs / trialMs) * 1000) / 1000 : null,
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
 * Distributions over the trials that have an overhead figure.
 *
 * @param {TrialAnalysis[]} trials
 */
function aggregate(trials) {
  const measured = trials.filter((t) => typeof t.overheadMs === 'number');
  const pick = (/** @type {(t: TrialAnalysis) => number} */ f) => dist(measured.map(f));
  const totalTrialMs = measured.reduce((a, t) => a + (t.trialMs ?? 0), 0);
  const totalOverheadMs = measured.reduce((a, t) => a + (t.overheadMs ?? 0), 0);
  /** @type {Record<string, ReturnType<typeof dist>>} */
  const phaseOverheadMs = {};
  for (const name of PHASES) {
    const applies = PHASE_APPLIES[name] ?? (() => true);
    phaseOverheadMs[name] = dist(
      measured.flatMap((t) => (t.phases && applies(t) ? [t.phases[name] ?? 0] : [])),
    );
  }
  return {
    measuredTrials: measured.length,
    trialMs: pick((t) => t.trialMs ?? 0),
    testMs: pick((t) => t.testMs ?? 0),
    modelMs: pick((t) => t.modelMs ?? 0),
    agentCommandMs: pick((t) => t.agentCommandMs ?? 0),
    sharedBaselineWaitMs: pick((t) => t.sharedBaselineWaitMs ?? 0),
    overheadMs: pick((t) => t.overheadMs ?? 0),
    overheadShare: dist(
      measured.map((t) => t.overheadShare ?? 0),
      round3,
    ),
    overheadShareOfAllTrialTime: totalTrialMs > 0 ? round3(totalOverheadMs / totalTrialMs) : null,
    phaseOverheadMs,
  };
}

/** The overhead phases of `analyseTrial`, in the order they happen. */
export const PHASES = ['prepare', 'plan', 'agent', 'changeAndVerify', 'review', 'baseline', 'finish'];

/**
 * Phases only some trials have: their distributions are over those trials, not diluted by
 * the zeros of the others.
 *
 * @type {Record<string, (t: TrialAnalysis) => boolean>}
 */
export const PHASE_APPLIES = {
  review: (t) => (t.reviews ?? 0) > 0,
  baseline: (t) => (t.baselineWaitMs ?? 0) > 0,
};

/**
 * @param {{ cli: string, cwd: string, suite: string, outDir: string, n: number, concurrency: number, tasksOf?: readonly string[], extra?: string[], env?: NodeJS.ProcessEnv }} o
 *   `tasksOf`: also aggregate the trials of only these tasks (those of the reference run);
 *   `extra`: more CLI arguments (the fleet eval bench adds `--engines FILE`); `env`: the CLI's
 *   environment (the Slurm bench points SLURM_CONF at its lab)
 */
export async function runSuite(o) {
  const args = [o.cli, 'eval', o.suite, '-n', String(o.n), '--concurrency', String(o.concurrency)];
  args.push(...(o.extra ?? []), '--out', o.outDir, '--json');
  const result = await run(process.execPath, args, { cwd: o.cwd, ...(o.env ? { env: o.env } : {}) });
  checkInterrupted();
  if (result.code !== 0) {
    throw new Error(
      `the eval at concurrency ${o.concurrency} exited with ${result.code ?? result.signal}:\n` +
        `${result.stderr.trim().slice(-3000)}\n(command: node ${args.join(' ')})`,
    );
  }
  const report = JSON.parse(result.stdout);
  /** @type {TrialResult[]} */
  const results = await readJsonl(join(o.outDir, 'results.jsonl'));
  await checkSane(o.outDir, results);
  const trials = [];
  for (const r of results) trials.push(await analyseTrial(o.outDir, r));
  const wallTimeMs = report.summary.wallTimeMs;
  const byTask = /** @type {Record<string, { passed: number, trials: number }>} */ ({});
  for (const r of results) {
    const entry = (byTask[r.taskId] ??= { passed: 0, trials: 0 });
    entry.trials += 1;
    if (r.outcome === 'passed') entry.passed += 1;
  }
  const tasksOf = o.tasksOf;
  return {
    suite: relative(o.cwd, o.suite),
    concurrency: o.concurrency,
    n: o.n,
    trials: results.length,
    wallTimeMs,
    processWallMs: Math.round(result.ms),
    trialsPerMinute: Math.round((results.length / (wallTimeMs / 60_000)) * 100) / 100,
    providers: [...new Set(results.map((r) => r.provider ?? 'none'))],
    passesByTask: byTask,
    baselinesRun: trials.filter((t) => t.baseline === 'ran').length,
    baselinesReused: trials.filter((t) => t.baseline === 'reused').length,
    ...aggregate(trials),
    phantomTestExits: trials.reduce((a, t) => a + (t.phantomExits ?? 0), 0),
    // What each engine did (one `local` row without a fleet).
    engines: report.summary.engines,
    ...(tasksOf
      ? {
          referenceTasksOnly: {
            tasks: tasksOf,
            ...aggregate(trials.filter((t) => tasksOf.includes(t.taskId))),
          },
        }
      : {}),
    trialDetails: trials,
  };
}

/**
 * A suite of only `tasks`, next to `suite` (so its relative paths hold), for the
 * like-for-like comparison with a reference run that had only those tasks.
 *
 * @param {string} suite
 * @param {readonly string[]} tasks
 */
async function suiteOf(suite, tasks) {
  const parsed = parseYaml(await readFile(suite, 'utf8'));
  const all = /** @type {Array<{ id: string }>} */ (parsed.tasks ?? []);
  const missing = tasks.filter((id) => !all.some((t) => t.id === id));
  if (missing.length > 0) {
    throw new Error(`the reference run's tasks ${missing.join(', ')} are not in ${suite} any more`);
  }
  const file = join(dirname(suite), 'suite-reference-tasks.yaml');
  await writeFile(file, stringifyYaml({ ...parsed, tasks: all.filter((t) => tasks.includes(t.id)) }));
  return file;
}

/**
 * @param {(line: string) => void} log
 * @param {string} what
 * @param {Awaited<ReturnType<typeof runSuite>>} r
 */
function logRun(log, what, r) {
  log(
    `  ${what}: ${r.trials} trials in ${(r.wallTimeMs / 1000).toFixed(1)} s, ${r.trialsPerMinute} trials/min`,
  );
  if (r.phantomTestExits > 0) {
    log(
      `  warning: ${r.phantomTestExits} test run(s) "exited 137" in under a second with no output: the harness gave up on an exec the daemon had not started yet; those trials' outcomes and times are off`,
    );
  }
}

/**
 * `afterRun` sees the output folder of each run of the whole suite before the temp copy is
 * removed (the viewer benchmark measures its pages there). `reference` is the run the
 * trials-per-minute target compares with (see `targets.mjs`); without it the comparison
 * run is left out.
 *
 * @param {{ packageRoot: string, n: number, log: (line: string) => void, keepTemp: boolean,
 *   afterRun?: (outDir: string, concurrency: number) => Promise<void>,
 *   reference?: { file: string, tasks: string[], n: number, concurrency: number, trialsPerMinute: number } }} o
 */
export async function benchEval(o) {
  const parent = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-eval-'));
  const remove = () => rm(parent, { recursive: true, force: true });
  const unregister = onCleanup(remove);
  try {
    const { suite } = await prepareCopy(o.packageRoot, parent, o.log);
    const cli = join(o.packageRoot, 'dist', 'main.js');
    const common = { cli, cwd: parent, n: o.n, ...(o.reference ? { tasksOf: o.reference.tasks } : {}) };
    const runs = [];
    for (const concurrency of [1, 2]) {
      checkInterrupted();
      o.log(`  eval -n ${o.n} --concurrency ${concurrency} (a minute or two) ...`);
      const outDir = join(parent, `out-c${concurrency}`);
      const r = await runSuite({ ...common, suite, outDir, concurrency });
      await o.afterRun?.(outDir, concurrency);
      logRun(o.log, `concurrency ${concurrency}`, r);
      runs.push(r);
    }
    let comparison;
    if (o.reference) {
      const ref = o.reference;
      checkInterrupted();
      o.log(
        `  eval of the reference run's tasks only (${ref.tasks.join(', ')}), -n ${o.n} --concurrency ${ref.concurrency} ...`,
      );
      const r = await runSuite({
        ...common,
        suite: await suiteOf(suite, ref.tasks),
        outDir: join(parent, 'out-reference-tasks'),
        concurrency: ref.concurrency,
      });
      logRun(o.log, 'reference tasks', r);
      comparison = {
        reference: ref,
        run: r,
        // Baselines are shared between trials now, so fewer trials per task share less.
        sameTrialsPerTask: ref.n === o.n,
        trialsPerMinuteRatio: Math.round((r.trialsPerMinute / ref.trialsPerMinute) * 100) / 100,
      };
    }
    const [c1, c2] = runs;
    return {
      suite: 'examples/evals/suite.yaml',
      n: o.n,
      runs,
      speedupAtConcurrency2:
        c1 && c2 ? Math.round((c2.trialsPerMinute / c1.trialsPerMinute) * 100) / 100 : null,
      ...(comparison ? { comparison } : {}),
      ...(o.keepTemp ? { keptTempDir: parent } : {}),
    };
  } finally {
    if (!o.keepTemp) await remove();
    unregister();
  }
}
