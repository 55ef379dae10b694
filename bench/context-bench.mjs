/**
 * Build-context benchmark: `scanBuildContext` (git listing, walk, hash, secret scan) of a
 * dependency-heavy repo, this checkout with its `node_modules` (read only), three ways,
 * interleaved repetition by repetition so drift on a shared machine hits all alike:
 *
 * - `off`: no secret scan: walk and hash only, what the context cost before the scan existed.
 * - `cached`: the scan with its clean-digest cache warm, as for a repo that did not change
 *   since the last run: every file is hashed, none is scanned.
 * - `uncached`: the scan with no cache, as for a repo seen for the first time: every byte is
 *   searched for keys and tokens (large files are read a second time for it).
 *
 * The goal: `cached` costs about what `off` costs (an unchanged repo is not made slower).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { checkInterrupted, onCleanup } from './process.mjs';
import { ratio, summarize } from './stats.mjs';

/**
 * @param {{ scanBuildContext: (options: object) => Promise<{ snapshot: Map<string, { size: number }> }>, folder: string, dockerfile: string, reps: number, warmup: number, log: (line: string) => void }} options
 */
export async function benchContext(options) {
  const cacheDir = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-context-'));
  const removeCache = () => rm(cacheDir, { recursive: true, force: true });
  onCleanup(removeCache);
  const cacheFile = join(cacheDir, 'clean.txt');
  const modes = {
    off: { secretScan: false },
    cached: { secretScanCache: cacheFile },
    uncached: { secretScanCache: false },
  };
  /** @type {Record<string, number[]>} */
  const samples = { off: [], cached: [], uncached: [] };
  let files = 0;
  let bytes = 0;
  const order = Object.keys(modes);
  try {
    for (let i = 0; i < options.warmup + options.reps; i++) {
      // A B C, C B A, ...: no mode always runs right after another.
      for (const mode of i % 2 === 0 ? order : [...order].reverse()) {
        checkInterrupted();
        const started = performance.now();
        const context = await options.scanBuildContext({
          contextDir: options.folder,
          dockerfile: options.dockerfile,
          ...modes[/** @type {keyof typeof modes} */ (mode)],
        });
        const elapsed = performance.now() - started;
        if (i >= options.warmup) samples[mode]?.push(elapsed);
        files = context.snapshot.size;
        bytes = [...context.snapshot.values()].reduce((sum, e) => sum + e.size, 0);
      }
      if (i === 0)
        options.log(`  build context of ${options.folder}: ${files} files, ${(bytes / 1e6).toFixed(0)} MB`);
    }
  } finally {
    await removeCache();
  }
  const off = summarize(samples.off ?? []);
  const cached = summarize(samples.cached ?? []);
  const uncached = summarize(samples.uncached ?? []);
  return {
    folder: options.folder,
    files,
    bytes,
    off,
    cached,
    uncached,
    ratio: { cached: ratio(cached, off), uncached: ratio(uncached, off) },
  };
}
