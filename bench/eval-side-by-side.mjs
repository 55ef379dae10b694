#!/usr/bin/env node
/**
 * Two builds of the harness side by side on the same eval, in the same hour: this checkout's
 * `dist/` against another checkout's (`--other DIR`, e.g. a worktree of an earlier commit,
 * built there). Each side evaluates its own copy of its own examples (so each runs the suite
 * and cassettes its commit knew), and the two alternate eval by eval (A B, B A, ...), so the
 * drift of a shared machine hits both alike. Every eval is analysed by `runSuite` of
 * `eval-bench.mjs` (harness overhead per trial, trials per minute, phases).
 *
 *   node bench/eval-side-by-side.mjs --other ../ref --pairs 3 --n 2 --concurrency 2
 *   node bench/eval-side-by-side.mjs --other ../ref --instances   # the oracle instance suite instead
 *
 * Prints the medians of each side and their ratios (this / other: above 1 this build is
 * slower) and writes `bench/results/side-by-side-<date>-<sha>.json` (`--out FILE` to choose).
 */
import { cp, mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkInterrupted, installSignalHandlers, onCleanup, runOk } from './process.mjs';
import { prepareCopy, runSuite } from './eval-bench.mjs';
import { median, quantile, round1 } from './stats.mjs';

const HERE = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** @param {string} root */
async function gitFacts(root) {
  const sha = (await runOk('git', ['rev-parse', '--short', 'HEAD'], { cwd: root })).stdout.trim();
  const dirty = (
    await runOk('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root })
  ).stdout.trim();
  return { sha, dirty: dirty !== '' };
}

/**
 * A copy of one side's examples and the suite to run there.
 *
 * @param {string} root
 * @param {string} parent
 * @param {boolean} instances
 */
async function copyOf(root, parent, instances) {
  await mkdir(parent, { recursive: true });
  if (!instances) return (await prepareCopy(root, parent, (line) => console.log(line))).suite;
  const skip = (/** @type {string} */ source) => !source.split(/[\\/]/).includes('.sandbox-harness');
  for (const folder of ['shipping-service', 'parcels', 'instances'])
    await cp(join(root, 'examples', folder), join(parent, folder), {
      recursive: true,
      filter: skip,
      verbatimSymlinks: true,
    });
  return join(parent, 'instances', 'suite.yaml');
}

/** @param {number[]} values */
const dist = (values) =>
  values.length === 0
    ? null
    : { n: values.length, median: round1(median(values)), p90: round1(quantile(values, 0.9)) };

/** @param {Array<Awaited<ReturnType<typeof runSuite>>>} runs */
function sideSummary(runs) {
  const trials = runs.flatMap((r) => r.trialDetails);
  const measured = trials.filter((t) => typeof t.overheadMs === 'number');
  const phases = /** @type {Record<string, ReturnType<typeof dist>>} */ ({});
  for (const name of ['prepare', 'plan', 'agent', 'changeAndVerify', 'review', 'baseline', 'finish'])
    phases[name] = dist(measured.flatMap((t) => (t.phases ? [t.phases[name] ?? 0] : [])));
  return {
    evals: runs.length,
    trialsPerMinute: dist(runs.map((r) => r.trialsPerMinute)),
    wallTimeMs: dist(runs.map((r) => r.wallTimeMs)),
    trialMs: dist(measured.map((t) => t.trialMs ?? 0)),
    testMs: dist(measured.map((t) => t.testMs ?? 0)),
    overheadMs: dist(measured.map((t) => t.overheadMs ?? 0)),
    overheadRanBaselineMs: dist(measured.filter((t) => t.baseline === 'ran').map((t) => t.overheadMs ?? 0)),
    overheadReusedBaselineMs: dist(
      measured.filter((t) => t.baseline !== 'ran').map((t) => t.overheadMs ?? 0),
    ),
    phaseOverheadMs: phases,
  };
}

/**
 * @param {{ median: number } | null} a
 * @param {{ median: number } | null} b
 */
const ratio = (a, b) => (a && b && b.median > 0 ? Math.round((a.median / b.median) * 100) / 100 : null);

async function main() {
  const { values } = parseArgs({
    options: {
      other: { type: 'string' },
      pairs: { type: 'string', default: '2' },
      n: { type: 'string', default: '2' },
      concurrency: { type: 'string', default: '2' },
      instances: { type: 'boolean', default: false },
      out: { type: 'string' },
      extra: { type: 'string', multiple: true, default: [] },
    },
  });
  if (!values.other)
    throw new Error('--other DIR is needed: a checkout of the build to compare with, built (npm run build)');
  installSignalHandlers();
  const sides = [
    { name: 'this', root: HERE, extra: values.extra ?? [] },
    { name: 'other', root: resolve(values.other), extra: [] },
  ];
  const parent = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-side-by-side-'));
  const unregister = onCleanup(() => rm(parent, { recursive: true, force: true }));
  const n = Number(values.n);
  const concurrency = Number(values.concurrency);
  const pairs = Number(values.pairs);
  /** @type {Record<string, Array<Awaited<ReturnType<typeof runSuite>>>>} */
  const runs = { this: [], other: [] };
  try {
    const suites = {};
    for (const side of sides)
      suites[side.name] = await copyOf(side.root, join(parent, side.name), values.instances);
    for (let pair = 0; pair < pairs; pair++) {
      const order = pair % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        checkInterrupted();
        const outDir = join(parent, side.name, `out-${pair}`);
        const r = await runSuite({
          cli: join(side.root, 'dist', 'main.js'),
          cwd: join(parent, side.name),
          suite: suites[side.name],
          outDir,
          n,
          concurrency,
          extra: [...(values.instances ? ['--oracle'] : []), ...side.extra],
        });
        console.log(
          `  ${side.name}: ${r.trials} trials in ${(r.wallTimeMs / 1000).toFixed(1)} s, ${r.trialsPerMinute} trials/min, overhead median ${r.overheadMs?.median} ms p90 ${r.overheadMs?.p90} ms`,
        );
        runs[side.name].push(r);
        await rm(outDir, { recursive: true, force: true });
      }
    }
  } finally {
    await rm(parent, { recursive: true, force: true });
    unregister();
  }
  const a = sideSummary(runs.this);
  const b = sideSummary(runs.other);
  const result = {
    kind: 'side-by-side',
    suite: values.instances ? 'examples/instances/suite.yaml --oracle' : 'examples/evals/suite.yaml',
    at: new Date().toISOString(),
    n,
    concurrency,
    pairs,
    this: { ...(await gitFacts(HERE)), extra: values.extra, ...a },
    other: { ...(await gitFacts(resolve(values.other))), ...b },
    ratios: {
      overheadMedian: ratio(a.overheadMs, b.overheadMs),
      overheadP90:
        a.overheadMs && b.overheadMs ? Math.round((a.overheadMs.p90 / b.overheadMs.p90) * 100) / 100 : null,
      trialsPerMinute: ratio(a.trialsPerMinute, b.trialsPerMinute),
      trialMedian: ratio(a.trialMs, b.trialMs),
    },
    samples: { this: runs.this.map(({ trialDetails, ...r }) => ({ ...r, trialDetails })), other: runs.other },
  };
  console.log(JSON.stringify({ this: a, other: b, ratios: result.ratios }, null, 2));
  const file =
    values.out ??
    join(
      HERE,
      'bench',
      'results',
      `side-by-side-${result.at.slice(0, 10)}-${result.this.sha}-vs-${result.other.sha}.json`,
    );
  await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`written: ${file}`);
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
