import { relative } from 'node:path';

/** Small text helpers for human output; sizes, durations and tables come from `src/format.ts`. */
export { alignColumns, formatBytes, formatDuration, textTable as table } from '../format.js';

/** Parses `24h`, `30m`, `7d`, `90s` into milliseconds. */
export function parseAge(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)\s*(s|m|h|d)$/.exec(text.trim());
  if (!match) return undefined;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit;
}

/** Relative when it is below the working directory, else absolute: `../../tmp/x` helps nobody. */
export function shortPath(cwd: string, path: string): string {
  const rel = relative(cwd, path);
  return rel === '' ? '.' : rel.startsWith('..') ? path : rel;
}
