/**
 * The targets of issue 12 ("the change path at the speed of the change"), each checked
 * against the medians of one bench run: printed as a table and saved in the JSON
 * (`targets`). A target whose benchmark did not run, or that is shown by several rows
 * rather than one number, has `met: null`.
 *
 * The trials-per-minute target is relative to "today", the results file the issue quotes
 * (`REFERENCE_RESULTS`): its concurrency-2 eval of the example suite as it was then (three
 * tasks). The bench runs those same tasks again for that comparison (`eval-bench.mjs`).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The results file whose numbers issue 12 quotes as today's. */
export const REFERENCE_RESULTS = 'bench/results/2026-11-30-5e3cb81.json';
const REFERENCE_CONCURRENCY = 2;

/**
 * The reference eval run, or why there is none.
 *
 * @param {string} packageRoot
 * @returns {Promise<{ reference?: { file: string, tasks: string[], n: number, concurrency: number, trialsPerMinute: number }, problem?: string }>}
 */
export async function loadReference(packageRoot) {
  let parsed;
  try {
    parsed = JSON.parse(await readFile(join(packageRoot, REFERENCE_RESULTS), 'utf8'));
  } catch (error) {
    return {
      problem: `${REFERENCE_RESULTS} could not be read: ${error instanceof Error ? error.message : error}`,
    };
  }
  const run = (parsed?.eval?.runs ?? []).find(
    (/** @type {{ concurrency?: number }} */ r) => r.concurrency === REFERENCE_CONCURRENCY,
  );
  const tasks = Object.keys(run?.passesByTask ?? {});
  if (!run || typeof run.trialsPerMinute !== 'number' || tasks.length === 0) {
    return { problem: `${REFERENCE_RESULTS} has no eval run at concurrency ${REFERENCE_CONCURRENCY}` };
  }
  return {
    reference: {
      file: REFERENCE_RESULTS,
      tasks,
      n: parsed.eval.n,
      concurrency: REFERENCE_CONCURRENCY,
      trialsPerMinute: run.trialsPerMinute,
    },
  };
}

/**
 * @typedef {object} TargetRow
 * @property {string} id stable name, for scripts
 * @property {string} target the target in the issue's words
 * @property {{ op: '<=' | '>=', value: number, unit: 'ms' | 'x' } | null} threshold
 * @property {number | null} measured the median (or ratio) the threshold is checked against
 * @property {string} shown the measured value as printed
 * @property {boolean | null} met
 * @property {string} note
 */

const fmt = (/** @type {number} */ ms) => (ms >= 100 ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`);

/**
 * @param {string} id
 * @param {string} target
 * @param {{ op: '<=' | '>=', value: number, unit: 'ms' | 'x' }} threshold
 * @param {number | null | undefined} measured
 * @param {string} note
 * @param {string} [problem] why the measurement does not count (wrong answers, the wrong path
 *   measured): then the target is not met, whatever the number
 * @returns {TargetRow}
 */
function check(id, target, threshold, measured, note, problem) {
  if (measured === null || measured === undefined || Number.isNaN(measured)) {
    return { id, target, threshold, measured: null, shown: '-', met: null, note };
  }
  const within = threshold.op === '<=' ? measured <= threshold.value : measured >= threshold.value;
  return {
    id,
    target,
    threshold,
    measured,
    shown: threshold.unit === 'ms' ? fmt(measured) : `${measured.toFixed(2)}x`,
    met: within && problem === undefined,
    note: problem === undefined ? note : `${problem}; ${note}`,
  };
}

/**
 * A median that must stay under `maxMs`; the note gives the p90.
 *
 * @param {string} id
 * @param {string} target
 * @param {number} maxMs
 * @param {{ medianMs: number, p90Ms: number }} stats
 * @param {boolean} right whether every answer of the benchmark was right
 */
const medianAtMost = (id, target, maxMs, stats, right) =>
  check(
    id,
    target,
    { op: '<=', value: maxMs, unit: 'ms' },
    stats.medianMs,
    `p90 ${fmt(stats.p90Ms)}`,
    wrong(right),
  );

/** @param {boolean} right */
const wrong = (right) => (right ? undefined : 'WRONG ANSWERS in some repetitions (changePath.checks)');

/**
 * @param {object} results what `run.mjs` collected (sandbox, changePath, eval)
 * @returns {TargetRow[]}
 */
export function evaluateTargets(results) {
  /** @type {TargetRow[]} */
  const rows = [];
  const cp = results.changePath;
  const notRun = (/** @type {string} */ why) => `not measured: ${why}`;
  if (cp) {
    const c = cp.changes;
    rows.push(
      medianAtMost(
        'changes-one',
        'change detection, 1 changed of 20,000 files: <= 100 ms median',
        100,
        c.one,
        cp.checks.one,
      ),
      check(
        'changes-one-vs-archive',
        'change detection, 1 changed: >= 10x faster than the /workspace archive pull',
        { op: '>=', value: 10, unit: 'x' },
        cp.archiveToChanges.median,
        `archive pull ${fmt(cp.archivePull.medianMs)} / changes() ${fmt(c.one.medianMs)}`,
        wrong(cp.checks.one),
      ),
      medianAtMost(
        'changes-none',
        'change detection, nothing changed: <= 50 ms median',
        50,
        c.none,
        cp.checks.none,
      ),
      {
        id: 'changes-grow-with-change',
        target: 'change detection grows with the change, not the image (rows for 0, 1, 100, 1,000)',
        threshold: null,
        measured: null,
        shown: `${fmt(c.none.medianMs)} / ${fmt(c.one.medianMs)} / ${fmt(c.hundred.medianMs)} / ${fmt(c.thousand.medianMs)}`,
        met: null,
        note: `0 / 1 / 100 / 1,000 changed of 20,000; nothing changed in an empty workspace: ${fmt(cp.baseImageNone.medianMs)}; the engine's diff: ${fmt(cp.engineDiff.medianMs)}`,
      },
      medianAtMost(
        'export-thousand',
        'export of 1,000 changed files: <= 1 s median',
        1000,
        cp.exportThousand,
        cp.checks.exportThousand,
      ),
    );
  } else {
    rows.push({
      id: 'changes',
      target: 'change detection and export',
      threshold: null,
      measured: null,
      shown: '-',
      met: null,
      note: notRun('no change-path results'),
    });
  }

  const ev = results.eval;
  const c1 = ev?.runs?.find((/** @type {{ concurrency: number }} */ r) => r.concurrency === 1);
  const c2 = ev?.runs?.find((/** @type {{ concurrency: number }} */ r) => r.concurrency === 2);
  const overheadTarget = 'harness overhead per trial on examples/evals/suite.yaml: <= 0.5 s median';
  const overheadThreshold = /** @type {const} */ ({ op: '<=', value: 500, unit: 'ms' });
  if (c1) {
    const others = [
      c2 ? `concurrency 2: ${fmt(c2.overheadMs?.median)}` : undefined,
      c1.referenceTasksOnly
        ? `the reference's three tasks only: ${fmt(c1.referenceTasksOnly.overheadMs?.median)}`
        : undefined,
    ].filter(Boolean);
    rows.push(
      check(
        'eval-overhead',
        overheadTarget,
        overheadThreshold,
        c1.overheadMs?.median,
        `concurrency 1, all ${Object.keys(c1.passesByTask).length} tasks (the checker's model time counts as model time); ${others.join('; ')}`,
      ),
    );
  } else {
    rows.push(check('eval-overhead', overheadTarget, overheadThreshold, null, notRun('--skip-eval')));
  }
  const rateTarget = "trials per minute at concurrency 2: >= 1.5x today's";
  const rateThreshold = /** @type {const} */ ({ op: '>=', value: 1.5, unit: 'x' });
  const cmp = ev?.comparison;
  if (cmp) {
    rows.push(
      check(
        'eval-trials-per-minute',
        rateTarget,
        rateThreshold,
        cmp.trialsPerMinuteRatio,
        `${cmp.run.trialsPerMinute} now / ${cmp.reference.trialsPerMinute} in ${cmp.reference.file} (tasks ${cmp.reference.tasks.join(', ')}, -n ${cmp.run.n}` +
          `${cmp.sameTrialsPerTask ? '' : `; the reference ran -n ${cmp.reference.n}: not like for like`})`,
      ),
    );
  } else {
    rows.push(
      check(
        'eval-trials-per-minute',
        rateTarget,
        rateThreshold,
        null,
        notRun(ev ? (ev.comparisonProblem ?? 'no reference run') : '--skip-eval'),
      ),
    );
  }

  const ex = results.sandbox?.exec;
  const callTarget = 'tool-call round trip of `true` over the command channel: <= 10 ms median';
  const callThreshold = /** @type {const} */ ({ op: '<=', value: 10, unit: 'ms' });
  if (ex) {
    rows.push(
      check(
        'tool-call',
        callTarget,
        callThreshold,
        ex.channel.medianMs,
        `engine's own exec ${fmt(ex.engineExec.medianMs)}; one exec per call ${fmt(ex.sandbox.medianMs)}`,
        ex.channelCheck?.channelUsed === true
          ? undefined
          : 'the fast calls did NOT run over the command channel (sandbox.exec.channelCheck)',
      ),
    );
  } else {
    rows.push(check('tool-call', callTarget, callThreshold, null, notRun('no sandbox results')));
  }
  return rows;
}
