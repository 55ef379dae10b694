#!/usr/bin/env node
/**
 * Fork time against the size of the changed state (issue 36): a running sandbox that wrote
 * 0 B, 1 MiB or 100 MiB (random, so no layer compression hides it) is forked with the
 * backend's `forkImage` (the engine's commit, paused), and a sandbox is started from the
 * fork. Per size, median and p90 of: the fork itself, the source's change scan the fork
 * carries (`changes()`), and create-to-ready (`create` + `exec('true')`) from the fork
 * against the same from the image. Removal is not part of any time.
 *
 *   npm run build && node bench/fork-bench.mjs [--reps 5] [--warmup 1]
 *
 * Prints a table and writes bench/results/forks-latest.json; `npm run bench` runs it too.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { installSignalHandlers, onCleanup } from './process.mjs';
import { execOk, repeat } from './sandbox-helpers.mjs';
import { summarize } from './stats.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = (/** @type {string} */ p) => import(pathToFileURL(join(ROOT, 'dist', p)).href);
const MiB = 1024 * 1024;
export const FORK_SIZES = [0, MiB, 100 * MiB];

/** @param {string} name @param {number} fallback */
function flag(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/**
 * @param {{ backend: any, image: string, reps: number, warmup: number, log: (l: string) => void, sizes?: number[] }} o
 */
export async function benchForks(o) {
  const runId = `bench-fork-${process.pid}-${randomBytes(3).toString('hex')}`;
  const rows = [];
  for (const bytes of o.sizes ?? FORK_SIZES) {
    /** @type {number[]} */ const fork = [];
    /** @type {number[]} */ const scan = [];
    /** @type {number[]} */ const fromFork = [];
    /** @type {number[]} */ const fromImage = [];
    await repeat({ ...o, label: `fork of a sandbox with ${bytes} B changed` }, async (_i, keep) => {
      const source = await o.backend.create({ image: o.image, runId, role: 'bench-fork-source' });
      const undoSource = onCleanup(() => source.dispose());
      /** @type {string | undefined} */ let forked;
      const undoImage = onCleanup(async () => {
        if (forked) await o.backend.removeForkImage(forked);
      });
      try {
        // In files of 16 MiB at most: a sandbox's single file is capped (64 MiB by default).
        for (let at = 0, n = 0; at < bytes; at += 16 * MiB, n++)
          await execOk(
            source,
            `head -c ${Math.min(16 * MiB, bytes - at)} /dev/urandom > "$HOME/state-${n}.bin"`,
          );
        const t0 = performance.now();
        await source.changes({ maxEntries: 100_000 });
        const t1 = performance.now();
        const made = await o.backend.forkImage({ id: source.id, runId }, { owner: runId });
        const t2 = performance.now();
        forked = made.image;
        const child = await o.backend.create({ image: made.image, runId, role: 'bench-fork-child' });
        await execOk(child, 'true');
        const t3 = performance.now();
        const size = Number(
          (await execOk(child, 'cat "$HOME"/state-*.bin 2>/dev/null | wc -c')).stdout.trim(),
        );
        if (size !== bytes) throw new Error(`the fork holds ${size} B of state, expected ${bytes}`);
        await child.dispose();
        const t4 = performance.now();
        const plain = await o.backend.create({ image: o.image, runId, role: 'bench-fork-plain' });
        await execOk(plain, 'true');
        const t5 = performance.now();
        await plain.dispose();
        if (keep) {
          scan.push(t1 - t0);
          fork.push(t2 - t1);
          fromFork.push(t3 - t2);
          fromImage.push(t5 - t4);
        }
      } finally {
        await source.dispose();
        undoSource();
        if (forked) await o.backend.removeForkImage(forked);
        undoImage();
      }
    });
    rows.push({
      changedBytes: bytes,
      fork: summarize(fork),
      scan: summarize(scan),
      readyFromFork: summarize(fromFork),
      readyFromImage: summarize(fromImage),
    });
  }
  return { image: o.image, rows };
}

/** The table `npm run bench` and this file print. @param {{ rows: any[] }} result */
export function forkTable(result) {
  const pad = (/** @type {string} */ s, /** @type {number} */ n) => s.padStart(n);
  const cell = (/** @type {{ medianMs: number, p90Ms: number }} */ s) =>
    pad(`${s.medianMs} / ${s.p90Ms}`, 18);
  return [
    `${'fork (ms, median / p90)'.padEnd(24)} ${pad('fork', 18)} ${pad('scan', 18)} ${pad('ready from fork', 18)} ${pad('ready from image', 18)}`,
    ...result.rows.map(
      (r) =>
        `${`${r.changedBytes / MiB} MiB changed`.padEnd(24)} ${cell(r.fork)} ${cell(r.scan)} ${cell(r.readyFromFork)} ${cell(r.readyFromImage)}`,
    ),
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  installSignalHandlers();
  const log = (/** @type {string} */ l) => process.stderr.write(`${l}\n`);
  const { dockerBackend } = await dist('sandbox/docker/index.js');
  const image = (await dist('sandbox/docker/images/base-images.js')).DEFAULT_BASE_IMAGE;
  const result = await benchForks({
    backend: dockerBackend(),
    image,
    reps: flag('--reps', 5),
    warmup: flag('--warmup', 1),
    log,
  });
  console.log(forkTable(result).join('\n'));
  await mkdir(join(ROOT, 'bench', 'results'), { recursive: true });
  await writeFile(
    join(ROOT, 'bench', 'results', 'forks-latest.json'),
    `${JSON.stringify({ measuredAt: new Date().toISOString(), ...result }, null, 2)}\n`,
  );
}
