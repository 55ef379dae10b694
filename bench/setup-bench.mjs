#!/usr/bin/env node
/**
 * The catalog's setup shared by an eval's trials against each trial's own (issue 36: "an
 * eval that prepares once per task and forks per trial"). A tiny project whose tests read a
 * file only the setup makes; its setup takes `--setup-sec` seconds (a `sleep`, so the
 * comparison does not depend on the machine's speed at some build) plus writing that file.
 * The same eval (`-n`, `--concurrency`, one task, a replayed fix) runs with `shared: true`
 * and `shared: false`, alternating pair by pair in the same process and hour.
 *
 *   npm run build && node bench/setup-bench.mjs [--pairs 3] [--n 4] [--concurrency 2] [--setup-sec 1]
 *
 * Per side: the eval's wall time and trials per minute; the trial time of trials that made a
 * setup and of those that reused one; the setup's own time (command plus fork) from the runs'
 * records. Writes bench/results/setup-latest.json (`--out FILE` to choose).
 */
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { checkInterrupted, installSignalHandlers, onCleanup, run, runOk } from './process.mjs';
import { median, quantile, round1 } from './stats.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The repo images the evals built, removed at the end. */
const images = new Set();

/** @param {string} dir @param {number} setupSec */
async function project(dir, setupSec) {
  await mkdir(join(dir, 'repo', 'src'), { recursive: true });
  await mkdir(join(dir, 'repo', 'test'), { recursive: true });
  await writeFile(
    join(dir, 'repo', 'package.json'),
    JSON.stringify({
      name: 'setup-bench',
      private: true,
      type: 'module',
      scripts: { test: 'node test/app.test.js' },
    }),
  );
  await writeFile(join(dir, 'repo', 'src', 'app.js'), 'export const limit = 10;\n');
  await writeFile(
    join(dir, 'repo', 'test', 'app.test.js'),
    [
      "import { readFileSync } from 'node:fs';",
      "import { limit } from '../src/app.js';",
      "const expected = Number(readFileSync('generated/expected.txt', 'utf8'));",
      'if (limit !== expected) process.exit(1);',
      '',
    ].join('\n'),
  );
  await writeFile(join(dir, 'ticket.md'), '# Make the limit what the generated file says\n');
  await writeFile(
    join(dir, 'fixes.json'),
    JSON.stringify({
      version: 1,
      model: 'setup-bench',
      turns: [
        {
          content: [
            {
              type: 'tool_use',
              id: 'c',
              name: 'run_command',
              input: { command: 'cat generated/expected.txt' },
            },
          ],
          stopReason: 'tool_use',
        },
        {
          content: [
            {
              type: 'tool_use',
              id: 'w',
              name: 'write_file',
              input: { path: 'src/app.js', content: 'export const limit = 12;\n' },
            },
          ],
          stopReason: 'tool_use',
        },
        { content: [{ type: 'text', text: 'fixed' }], stopReason: 'end_turn' },
      ],
    }),
  );
  for (const shared of [true, false]) {
    await writeFile(
      join(dir, `catalog-${shared}.yaml`),
      [
        'name: setup-bench',
        'owner: bench',
        'repo: repo',
        'agent:',
        '  editableFiles: ["src/**"]',
        '  testCommand: npm test',
        '  maxAttempts: 1',
        'sandbox:',
        '  timeouts: { commandSec: 60, testSec: 120 }',
        `  setup: { command: "sleep ${setupSec} && mkdir -p generated && printf 12 > generated/expected.txt", shared: ${shared} }`,
        '',
      ].join('\n'),
    );
    await writeFile(
      join(dir, `suite-${shared}.yaml`),
      [
        `name: setup-bench-${shared}`,
        'defaults: { keep: never }',
        'tasks:',
        '  - id: setup',
        `    catalog: catalog-${shared}.yaml`,
        '    ticket: ticket.md',
        '    cassette: fixes.json',
        '',
      ].join('\n'),
    );
  }
}

/**
 * One eval, and what its records say.
 *
 * @param {string} dir @param {boolean} shared @param {string} out @param {{ n: number, concurrency: number }} o
 */
async function evalOnce(dir, shared, out, o) {
  const started = performance.now();
  await runOk(
    process.execPath,
    [
      join(ROOT, 'dist', 'main.js'),
      'eval',
      `suite-${shared}.yaml`,
      '-n',
      String(o.n),
      '--concurrency',
      String(o.concurrency),
      '--out',
      out,
    ],
    { cwd: dir, env: { ...process.env, XDG_CACHE_HOME: join(dir, 'cache') } },
  );
  const wallMs = performance.now() - started;
  const made = [];
  const reused = [];
  const setupMs = [];
  for (const id of await readdir(join(out, 'runs'))) {
    const record = JSON.parse(await readFile(join(out, 'runs', id, 'run.json'), 'utf8'));
    if (record.image?.tag) images.add(record.image.tag);
    if (record.outcome !== 'ready-for-review') throw new Error(`run ${id} ended ${record.outcome}`);
    if (record.setup?.reusedFrom) reused.push(record.durationMs);
    else {
      made.push(record.durationMs);
      setupMs.push(record.setup.durationMs);
    }
  }
  return {
    wallMs: Math.round(wallMs),
    trialsPerMinute: round1((o.n / wallMs) * 60_000),
    madeTrialMs: made,
    reusedTrialMs: reused,
    setupMs,
  };
}

/** @param {number[]} values */
const dist = (values) =>
  values.length === 0
    ? null
    : { n: values.length, median: round1(median(values)), p90: round1(quantile(values, 0.9)) };

async function main() {
  const { values } = parseArgs({
    options: {
      pairs: { type: 'string', default: '3' },
      n: { type: 'string', default: '4' },
      concurrency: { type: 'string', default: '2' },
      'setup-sec': { type: 'string', default: '1' },
      out: { type: 'string' },
    },
  });
  installSignalHandlers();
  const o = { n: Number(values.n), concurrency: Number(values.concurrency) };
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-setup-bench-'));
  const removeImages = async () => {
    for (const image of images) await run('docker', ['image', 'rm', image]);
  };
  const undoDir = onCleanup(() => rm(dir, { recursive: true, force: true }));
  const undoImages = onCleanup(removeImages);
  /** @type {Record<'shared' | 'own', Awaited<ReturnType<typeof evalOnce>>[]>} */
  const sides = { shared: [], own: [] };
  try {
    await project(dir, Number(values['setup-sec']));
    // The repo image built (and its baseline remembered) before anything is timed.
    await evalOnce(dir, true, join(dir, 'warm-up'), { n: 1, concurrency: 1 });
    for (let pair = 0; pair < Number(values.pairs); pair++) {
      const order = pair % 2 === 0 ? [true, false] : [false, true];
      for (const shared of order) {
        checkInterrupted();
        const result = await evalOnce(dir, shared, join(dir, `out-${pair}-${shared}`), o);
        sides[shared ? 'shared' : 'own'].push(result);
        console.log(
          `  ${shared ? 'shared' : 'own   '}: ${o.n} trials in ${(result.wallMs / 1000).toFixed(1)} s, ${result.trialsPerMinute} trials/min`,
        );
      }
    }
  } finally {
    undoImages();
    undoDir();
    await removeImages();
    await rm(dir, { recursive: true, force: true });
  }
  const summary = (/** @type {typeof sides.shared} */ runs) => ({
    wallMs: dist(runs.map((r) => r.wallMs)),
    trialsPerMinute: dist(runs.map((r) => r.trialsPerMinute)),
    madeTrialMs: dist(runs.flatMap((r) => r.madeTrialMs)),
    reusedTrialMs: dist(runs.flatMap((r) => r.reusedTrialMs)),
    setupMs: dist(runs.flatMap((r) => r.setupMs)),
    runs,
  });
  const shared = summary(sides.shared);
  const own = summary(sides.own);
  const result = {
    date: new Date().toISOString(),
    git: (await runOk('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT })).stdout.trim(),
    settings: { ...o, pairs: Number(values.pairs), setupSec: Number(values['setup-sec']) },
    shared,
    own,
    ratios: {
      // Above 1: sharing is faster.
      trialsPerMinute:
        shared.trialsPerMinute && own.trialsPerMinute
          ? Math.round((shared.trialsPerMinute.median / own.trialsPerMinute.median) * 100) / 100
          : null,
    },
  };
  console.log(
    `shared: ${shared.trialsPerMinute?.median} trials/min, a reusing trial ${shared.reusedTrialMs?.median} ms; own: ${own.trialsPerMinute?.median} trials/min, a trial ${own.madeTrialMs?.median} ms; setup plus fork ${own.setupMs?.median} ms`,
  );
  const file = values.out ?? join(ROOT, 'bench', 'results', 'setup-latest.json');
  await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`written: ${file}`);
}

await main();
