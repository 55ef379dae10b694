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
 *   node bench/eval-side-by-side.mjs --other ../ref --instances --by-hand
 *
 * `--by-hand` adds the reference of issue 36's throughput goal after each eval of this build:
 * the same test commands in fresh containers, by hand, at the same concurrency. Every trial's
 * run record names its image and test commands; by hand, each trial is one `docker run --rm
 * --network none` of that image running them (the catalog file mounted where the harness
 * injects it), and each distinct (image, commands) one run more, as the harness's shared
 * baseline. Its trials per minute beside the eval's give `byHandRatio` (eval / by hand).
 *
 * `--cold` gives every eval a fresh cache folder (XDG_CACHE_HOME), so nothing a build remembers
 * between runs (the baselines known to fail) helps it: a first eval of a repo state.
 *
 * Prints the medians of each side and their ratios (this / other: above 1 this build is
 * slower) and writes `bench/results/side-by-side-<date>-<sha>.json` (`--out FILE` to choose).
 */
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cp, mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { checkInterrupted, installSignalHandlers, onCleanup, run, runOk } from './process.mjs';
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

/**
 * The eval's test commands run by hand (see the header), `concurrency` at a time.
 *
 * @param {string} outDir the eval's output folder
 * @param {number} concurrency
 */
async function byHand(outDir, concurrency) {
  const { loadCatalog, catalogForSandbox, CATALOG_SANDBOX_PATH, CATALOG_ENV_VAR } = await import(
    join(HERE, 'dist', 'catalog', 'load.js')
  );
  const results = (await readFile(join(outDir, 'results.jsonl'), 'utf8')).split('\n').filter((l) => l.trim());
  const jobs = [];
  const seen = new Set();
  const files = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-by-hand-'));
  try {
    for (const line of results) {
      const { runId } = JSON.parse(line);
      if (!runId) continue;
      const record = JSON.parse(await readFile(join(outDir, 'runs', runId, 'run.json'), 'utf8'));
      const catalogFile = join(files, `${runId}.json`);
      await writeFile(catalogFile, catalogForSandbox(await loadCatalog(record.catalog.file)));
      const script = record.testCommand
        .map((/** @type {{ command: string }} */ l) => `(${l.command})`)
        .join(' && ');
      const job = { image: record.image.tag, script, catalogFile };
      jobs.push(job);
      const key = `${job.image}\n${script}`;
      if (!seen.has(key)) {
        seen.add(key);
        jobs.push(job);
      }
    }
    const started = performance.now();
    let next = 0;
    const worker = async () => {
      while (next < jobs.length) {
        const job = jobs[next++];
        await run('docker', [
          'run',
          '--rm',
          '--network',
          'none',
          '-v',
          `${job.catalogFile}:${CATALOG_SANDBOX_PATH}:ro`,
          '-e',
          `${CATALOG_ENV_VAR}=${CATALOG_SANDBOX_PATH}`,
          job.image,
          'sh',
          '-c',
          job.script,
        ]);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const wallTimeMs = performance.now() - started;
    const trials = results.length;
    return {
      trials,
      containerRuns: jobs.length,
      wallTimeMs: Math.round(wallTimeMs),
      trialsPerMinute: Math.round((trials / (wallTimeMs / 60_000)) * 100) / 100,
    };
  } finally {
    await rm(files, { recursive: true, force: true });
  }
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
      'by-hand': { type: 'boolean', default: false },
      cold: { type: 'boolean', default: false },
      out: { type: 'string' },
      extra: { type: 'string', multiple: true, default: [] },
    },
  });
  if (!values.other && !values['by-hand'])
    throw new Error(
      '--other DIR is needed (a checkout of the build to compare with, built), or --by-hand alone',
    );
  installSignalHandlers();
  const sides = [
    { name: 'this', root: HERE, extra: values.extra ?? [] },
    ...(values.other ? [{ name: 'other', root: resolve(values.other), extra: [] }] : []),
  ];
  const parent = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-side-by-side-'));
  const unregister = onCleanup(() => rm(parent, { recursive: true, force: true }));
  const n = Number(values.n);
  const concurrency = Number(values.concurrency);
  const pairs = Number(values.pairs);
  /** @type {Record<string, Array<Awaited<ReturnType<typeof runSuite>>>>} */
  const runs = { this: [], other: [] };
  /** @type {Array<Awaited<ReturnType<typeof byHand>>>} */
  const hand = [];
  try {
    const suites = {};
    for (const side of sides)
      suites[side.name] = await copyOf(side.root, join(parent, side.name), values.instances);
    for (let pair = 0; pair < pairs; pair++) {
      const order = pair % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        checkInterrupted();
        const outDir = join(parent, side.name, `out-${pair}`);
        // --cold: nothing this build remembers between runs (baselines known to fail) carries over.
        const cache = values.cold ? await mkdtemp(join(parent, 'cache-')) : undefined;
        const before = process.env.XDG_CACHE_HOME;
        if (cache) process.env.XDG_CACHE_HOME = cache;
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
        if (cache) {
          if (before === undefined) delete process.env.XDG_CACHE_HOME;
          else process.env.XDG_CACHE_HOME = before;
        }
        runs[side.name].push(r);
        if (values['by-hand'] && side.name === 'this') {
          const h = await byHand(outDir, concurrency);
          console.log(
            `  by hand: ${h.trials} trials (${h.containerRuns} containers) in ${(h.wallTimeMs / 1000).toFixed(1)} s, ${h.trialsPerMinute} trials/min`,
          );
          hand.push(h);
        }
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
    ...(values.other ? { other: { ...(await gitFacts(resolve(values.other))), ...b } } : {}),
    ratios: {
      overheadMedian: ratio(a.overheadMs, b.overheadMs),
      overheadP90:
        a.overheadMs && b.overheadMs ? Math.round((a.overheadMs.p90 / b.overheadMs.p90) * 100) / 100 : null,
      trialsPerMinute: ratio(a.trialsPerMinute, b.trialsPerMinute),
      trialMedian: ratio(a.trialMs, b.trialMs),
    },
    ...(hand.length > 0
      ? {
          byHand: { runs: hand, trialsPerMinute: dist(hand.map((h) => h.trialsPerMinute)) },
          byHandRatio: ratio(a.trialsPerMinute, dist(hand.map((h) => h.trialsPerMinute))),
        }
      : {}),
    samples: { this: runs.this.map(({ trialDetails, ...r }) => ({ ...r, trialDetails })), other: runs.other },
  };
  console.log(
    JSON.stringify({ this: a, other: b, ratios: result.ratios, byHandRatio: result.byHandRatio }, null, 2),
  );
  const file =
    values.out ??
    join(
      HERE,
      'bench',
      'results',
      `side-by-side-${result.at.slice(0, 10)}-${result.this.sha}${result.other ? `-vs-${result.other.sha}` : '-by-hand'}.json`,
    );
  await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`written: ${file}`);
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
