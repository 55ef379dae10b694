/**
 * Starts the longest test files first within each group of vitest.config.ts, so that with
 * several workers the last file to finish is a short one: a ten-minute file that starts
 * last keeps the run going for ten minutes on one worker while the others idle.
 *
 * A file's expected time is its duration in vitest's own cache of the last run on this
 * machine, else the committed measurement (bench/results/suite-times-latest.json, written by
 * `node bench/suite-times.mjs` after a full run), else unknown: a file never measured (a new
 * one) starts first, as vitest itself does, since it may well be long.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export const SUITE_TIMES = join('bench', 'results', 'suite-times-latest.json');

/** File (relative to the root) -> milliseconds, from the committed table; empty when absent or unreadable. */
export function committedTimes(root: string): Map<string, number> {
  const times = new Map<string, number>();
  let table: unknown;
  try {
    table = JSON.parse(readFileSync(join(root, SUITE_TIMES), 'utf8'));
  } catch {
    return times;
  }
  const files = (table as { files?: unknown }).files;
  if (!Array.isArray(files)) return times;
  for (const entry of files as { file?: unknown; wallMs?: unknown }[]) {
    if (typeof entry.file === 'string' && typeof entry.wallMs === 'number')
      times.set(entry.file, entry.wallMs);
  }
  return times;
}

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const committed = committedTimes(root);
    const expected = (spec: TestSpecification): number => {
      const file = relative(root, spec.moduleId);
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`)?.duration;
      return cached ?? committed.get(file) ?? Number.POSITIVE_INFINITY;
    };
    const order = (spec: TestSpecification) => spec.project.config.sequence.groupOrder;
    return [...files].sort((a, b) => {
      if (order(a) !== order(b)) return order(a) - order(b);
      if (a.project.name !== b.project.name) return a.project.name < b.project.name ? -1 : 1;
      const [ea, eb] = [expected(a), expected(b)];
      return ea === eb ? 0 : ea > eb ? -1 : 1;
    });
  }
}
