/**
 * Fleet eval: the offline example suite (`examples/evals/suite.yaml`, recorded model
 * sessions) on the local engine alone against the same eval over three engines on this
 * machine (the local one plus two extra engines, each in its own network namespace on TCP
 * with mutual TLS, started by `scripts/test-engines.ts`), at the same total concurrency:
 * `--concurrency 3` locally, `capacity: 1` per engine over the fleet. The machine's cores
 * are the same either way, so this measures what placement, TLS and per-engine preparation
 * cost (overhead), not a speed-up.
 *
 * Order: two engines started (the base image shipped to them at start: its time is the
 * fleet image benchmark's business); one cold fleet eval (`-n 1`: each fresh engine builds
 * the repo image before its first trial; its wall time is reported as `cold`); then `reps`
 * pairs of measured evals alternating local/fleet and fleet/local, so drift on a shared
 * machine hits both alike. Each eval's numbers are those of `eval-bench.mjs` (`runSuite`):
 * trials per minute over the eval's own wall time, trial time, and the harness overhead per
 * trial; the fleet runs add what each engine did (`summary.json` `engines`).
 *
 * The engines are stopped at the end, whatever happens.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { prepareCopy, runSuite } from './eval-bench.mjs';
import { testEngines } from './fleet-bench.mjs';
import { checkInterrupted, onCleanup } from './process.mjs';
import { median, summarize } from './stats.mjs';

const CONCURRENCY = 3;

/**
 * @param {{ packageRoot: string, n: number, reps: number, log: (line: string) => void, keepTemp: boolean }} o
 */
export async function benchFleetEval(o) {
  if (process.getuid?.() !== 0) {
    throw Object.assign(
      new Error(
        'the fleet eval benchmark starts Docker engines in network namespaces and needs root (or use --skip-fleet)',
      ),
      { exitCode: 3 },
    );
  }
  const parent = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-fleet-eval-'));
  /** @type {string[]} */
  let names = [];
  const cleanUp = async () => {
    if (names.length) await testEngines(o.packageRoot, ['stop', ...names]).catch(() => undefined);
    names = [];
    if (!o.keepTemp) await rm(parent, { recursive: true, force: true });
  };
  const unregister = onCleanup(cleanUp);
  try {
    const { suite } = await prepareCopy(o.packageRoot, parent, o.log);
    const cli = join(o.packageRoot, 'dist', 'main.js');
    o.log('  starting two fresh engines and shipping the base image to them ...');
    const started = performance.now();
    const { stdout } = await testEngines(o.packageRoot, [
      'start',
      '--count',
      '2',
      '--owner-pid',
      String(process.pid),
      '--image',
      'sandbox-harness/base-node:20',
      '--json',
    ]);
    const enginesReadyMs = Math.round(performance.now() - started);
    /** @type {Array<{ name: string, url: string, certDir: string }>} */
    const engines = JSON.parse(stdout);
    names = engines.map((e) => e.name);
    const file = join(parent, 'engines.yaml');
    await writeFile(
      file,
      [
        'engines:',
        '  - context: default',
        '    capacity: 1',
        ...engines.flatMap((e, i) => [
          `  - name: engine-${i + 1}`,
          `    host: ${e.url}`,
          `    tls: { ca: ${join(e.certDir, 'ca.pem')}, cert: ${join(e.certDir, 'cert.pem')}, key: ${join(e.certDir, 'key.pem')} }`,
          '    capacity: 1',
        ]),
        '',
      ].join('\n'),
    );
    const fleetArgs = ['--engines', file];

    checkInterrupted();
    o.log('  cold fleet eval -n 1 (repo images built on the fresh engines) ...');
    const common = { cli, cwd: parent, suite, concurrency: CONCURRENCY };
    const cold = await runSuite({ ...common, outDir: join(parent, 'out-cold'), n: 1, extra: fleetArgs });

    /** @type {{ local: any[], fleet: any[] }} */
    const runs = { local: [], fleet: [] };
    for (let rep = 0; rep < o.reps; rep++) {
      const order = rep % 2 === 0 ? ['local', 'fleet'] : ['fleet', 'local'];
      for (const where of order) {
        checkInterrupted();
        o.log(
          `  eval -n ${o.n} on ${where === 'local' ? 'the local engine' : '3 engines'} (${rep + 1}/${o.reps}) ...`,
        );
        const out = join(parent, `out-${where}-${rep}`);
        const r = await runSuite({
          ...common,
          outDir: out,
          n: o.n,
          extra: where === 'fleet' ? fleetArgs : [],
        });
        o.log(
          `    ${r.trials} trials in ${(r.wallTimeMs / 1000).toFixed(1)} s, ${r.trialsPerMinute} trials/min`,
        );
        runs[where].push(r);
      }
    }
    const side = (/** @type {any[]} */ list) => ({
      runs: list.length,
      trials: list.reduce((a, r) => a + r.trials, 0),
      trialsPerMinute: {
        median: Math.round(median(list.map((r) => r.trialsPerMinute)) * 100) / 100,
        samples: list.map((r) => r.trialsPerMinute),
      },
      wallTimeMs: summarize(list.map((r) => r.wallTimeMs)),
      trialMedianMs: summarize(list.map((r) => r.trialMs.median)),
      overheadMedianMs: summarize(list.map((r) => r.overheadMs.median)),
      phantomTestExits: list.reduce((a, r) => a + (r.phantomTestExits ?? 0), 0),
      // Per-trial details stay out: the per-run numbers and each engine's share are what matter here.
      details: list.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'trialDetails'))),
    });
    const local = side(runs.local);
    const fleet = side(runs.fleet);
    const ratio = (/** @type {number} */ a, /** @type {number} */ b) =>
      b ? Math.round((a / b) * 100) / 100 : null;
    return {
      suite: 'examples/evals/suite.yaml',
      n: o.n,
      reps: o.reps,
      concurrency: CONCURRENCY,
      engines: engines.map((e) => e.url),
      enginesReadyMs,
      cold: {
        trials: cold.trials,
        wallTimeMs: cold.wallTimeMs,
        processWallMs: cold.processWallMs,
        engines: cold.engines,
      },
      local,
      fleet,
      fleetToLocal: {
        trialsPerMinute: ratio(fleet.trialsPerMinute.median, local.trialsPerMinute.median),
        trialMedian: ratio(fleet.trialMedianMs.medianMs, local.trialMedianMs.medianMs),
        overheadMedian: ratio(fleet.overheadMedianMs.medianMs, local.overheadMedianMs.medianMs),
      },
      ...(o.keepTemp ? { keptTempDir: parent } : {}),
    };
  } finally {
    unregister();
    await cleanUp();
  }
}
