/**
 * How sizes, durations and plain-text tables are written for people, in one place: the CLI,
 * the eval report and the viewer call these, so one quantity reads the same everywhere it is
 * shown in the same medium.
 */

/** `512 B`, `9.8 KB`, `1.5 MB` (binary multiples): output and file sizes. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** `120 ms`, `12.0 s`, `2 min 05 s`; `-` for what a record does not say (pages). */
export function formatMs(ms: number | undefined): string {
  if (ms === undefined) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${String(Math.round(s - m * 60)).padStart(2, '0')} s`;
}

/** `850ms`, `12.3s`, `2m05s`: compact, for CLI lines. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.round(s - m * 60)).padStart(2, '0')}s`;
}

/** A plain-text table: a header, a rule, and columns padded to their widest cell. */
export function textTable<K extends string>(rows: Record<K, string>[], columns: K[]): string {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => r[c].length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [
    line(columns),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(columns.map((c) => r[c]))),
  ].join('\n');
}

/** `45s`, `3m05s`, `1h02m`; `--` when unknown. */
export function formatClock(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms) || ms < 0) return '--';
  const totalSec = Math.round(ms / 1000);
  if (totalSec < 60) return `${totalSec}s`;
  const totalMin = Math.floor(totalSec / 60);
  if (totalMin < 60) return `${totalMin}m${String(totalSec % 60).padStart(2, '0')}s`;
  return `${Math.floor(totalMin / 60)}h${String(totalMin % 60).padStart(2, '0')}m`;
}
