#!/usr/bin/env node
/**
 * Create-to-ready three ways, side by side in one process, alternating repetition by
 * repetition: from the warm pool (`WarmPool.create` of a spec warmed ahead, its pristine
 * proof included, then `exec('true')`), cold (`DockerBackend.create` + `exec('true')`), and
 * `docker run --rm <image> true` through the CLI. Goal of issue 36: <= 50 ms median from the pool.
 *
 *   npm run build && node bench/pool-bench.mjs [--reps 15] [--warmup 2]
 *
 * Prints a table and writes bench/results/pool-latest.json. Removal is not part of any time.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { installSignalHandlers, onCleanup, run } from './process.mjs';
import { execOk, repeat, rotate } from './sandbox-helpers.mjs';
import { ratio, summarize } from './stats.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = (/** @type {string} */ p) => import(pathToFileURL(join(ROOT, 'dist', p)).href);
const LABEL = `sandbox-harness.bench=${process.pid}-${randomBytes(3).toString('hex')}`;

/** @param {string} name @param {number} fallback */
function flag(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/**
 * @param {{ backend: any, WarmPool: any, image: string, reps: number, warmup: number, log: (l: string) => void }} o
 */
export async function benchPool(o) {
  /** @type {number[]} */ const pooled = [];
  /** @type {number[]} */ const cold = [];
  /** @type {number[]} */ const dockerRun = [];
  const spec = { image: o.image, role: 'bench-pool' };
  const viaPool = async (/** @type {boolean} */ keep) => {
    const pool = new o.WarmPool(o.backend, { capacity: 1 });
    const undo = onCleanup(() => pool.drain());
    pool.warm(spec);
    // Ready means started and its channel warm: what a run's pool holds while earlier steps work.
    while (pool.stats().ready < 1) await new Promise((r) => setTimeout(r, 5));
    const t0 = performance.now();
    const box = await pool.create(spec);
    await execOk(box, 'true', { fast: true });
    if (keep) pooled.push(performance.now() - t0);
    if (pool.stats().handedOut !== 1) throw new Error('the pool made the sandbox cold');
    await box.dispose();
    await pool.drain();
    undo();
  };
  const viaCold = async (/** @type {boolean} */ keep) => {
    const t0 = performance.now();
    const box = await o.backend.create(spec);
    const undo = onCleanup(() => box.dispose());
    await execOk(box, 'true');
    if (keep) cold.push(performance.now() - t0);
    await box.dispose();
    undo();
  };
  const viaCli = async (/** @type {boolean} */ keep) => {
    const r = await run('docker', ['run', '--rm', '--label', LABEL, o.image, 'true']);
    if (r.code !== 0) throw new Error(`docker run exited ${r.code}: ${r.stderr.slice(-300)}`);
    if (keep) dockerRun.push(r.ms);
  };
  await repeat({ ...o, label: 'create-to-ready: pool vs cold vs docker run' }, (i, keep) =>
    rotate(i, [() => viaPool(keep), () => viaCold(keep), () => viaCli(keep)]),
  );
  const p = summarize(pooled);
  const c = summarize(cold);
  const d = summarize(dockerRun);
  return {
    pool: p,
    cold: c,
    dockerRun: d,
    poolVsCold: ratio(p, c),
    poolVsDockerRun: ratio(p, d),
    goalMet: p.medianMs <= 50,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  installSignalHandlers();
  const log = (/** @type {string} */ l) => process.stderr.write(`${l}\n`);
  const docker = await dist('sandbox/docker/index.js');
  const { WarmPool } = await dist('sandbox/pool/warm-pool.js');
  const { dockerBackend } = docker;
  const image = (await dist('sandbox/docker/images/base-images.js')).DEFAULT_BASE_IMAGE;
  const result = await benchPool({
    backend: dockerBackend(),
    WarmPool,
    image,
    reps: flag('--reps', 15),
    warmup: flag('--warmup', 2),
    log,
  });
  const row = (/** @type {string} */ name, /** @type {{ medianMs: number, p90Ms: number }} */ s) =>
    `${name.padEnd(22)} ${String(s.medianMs).padStart(8)} ms ${String(s.p90Ms).padStart(8)} ms`;
  console.log(`${'create-to-ready'.padEnd(22)} ${'median'.padStart(11)} ${'p90'.padStart(11)}`);
  console.log(row('from the warm pool', result.pool));
  console.log(row('cold (create + exec)', result.cold));
  console.log(row('docker run --rm true', result.dockerRun));
  console.log(
    `pool/cold ${JSON.stringify(result.poolVsCold)}, pool/docker run ${JSON.stringify(result.poolVsDockerRun)}, goal <= 50 ms: ${result.goalMet ? 'met' : 'not met'}`,
  );
  await mkdir(join(ROOT, 'bench', 'results'), { recursive: true });
  await writeFile(
    join(ROOT, 'bench', 'results', 'pool-latest.json'),
    `${JSON.stringify({ image, ...result }, null, 2)}\n`,
  );
}
