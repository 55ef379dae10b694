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
