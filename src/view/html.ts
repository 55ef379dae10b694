/**
 * Escaping and the small building blocks of the viewer's pages. Everything a page shows was
 * read from a run record that a hostile sandbox may have shaped (file names, tool inputs,
 * command output, even the run's id), so every piece of text goes through `text()` or
 * `attr()`: the five HTML metacharacters are escaped in both contexts, and control,
 * bidirectional and invisible characters are shown as visible `\u{...}` marks instead of
 * reaching the browser, where they could reorder or hide what a reader sees.
 */
import { escapeHtml } from '../evals/report.js';

// C0 except tab and newline, DEL, C1, zero-width, bidi marks/overrides/isolates, line and
// paragraph separators, word joiners, the byte order mark. Matching them is the point.
// eslint-disable-next-line no-control-regex
const INVISIBLE = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]/g;
// Colour codes from test runners say nothing once the terminal is gone.
// eslint-disable-next-line no-control-regex
const ANSI_SGR = /\u001b\[[0-9;]*m/g;

function codePoint(char: string): string {
  return `\\u{${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}}`;
}

function normalise(value: string): string {
  return value.replace(/\r\n/g, '\n').replace(ANSI_SGR, '');
}

/** Text for an HTML text node: escaped, control characters visible and marked. */
export function text(value: string): string {
  const clean = normalise(value);
  let out = '';
  let last = 0;
  for (const match of clean.matchAll(INVISIBLE)) {
    out += escapeHtml(clean.slice(last, match.index));
    out += `<span class="ctl" title="control character">${codePoint(match[0])}</span>`;
    last = match.index + match[0].length;
  }
  return out + escapeHtml(clean.slice(last));
}

/** The text with control characters spelled out, as `attr()` shows it before escaping. */
export function spell(value: string): string {
  return normalise(value).replace(INVISIBLE, codePoint);
}

/** Text for a quoted attribute value (titles, data attributes): escaped, controls spelled out. */
export function attr(value: string): string {
  return escapeHtml(spell(value));
}

/** "-" for what a record does not say, so a missing field never reads as zero. */
export function dash(value: string | number | undefined | null): string {
  if (value === undefined || value === null || value === '') return '-';
  return typeof value === 'number' ? String(value) : value;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export function formatMs(ms: number | undefined): string {
  if (ms === undefined) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${String(Math.round(s - m * 60)).padStart(2, '0')} s`;
}

/**
 * Outcomes, categories and verdicts are opaque strings (their spelling is still changing):
 * a few known words get a colour, everything else the neutral one.
 */
const TONES: Record<string, 'good' | 'bad' | 'warn' | 'muted'> = {
  passed: 'good',
  'ready-for-review': 'good',
  'not-applied': 'warn',
  allowed: 'good',
  approved: 'good',
  'nothing-to-fix': 'muted',
  resolved: 'good',
  unresolved: 'bad',
  'no-report': 'bad',
  skipped: 'warn',
  missing: 'bad',
  failed: 'bad',
  'tests-failed': 'bad',
  rejected: 'bad',
  error: 'bad',
  'changes-requested': 'bad',
  'request-changes': 'bad',
  approve: 'good',
  'not-approved': 'bad',
  'disk-budget': 'warn',
  'sandbox-stopped': 'warn',
  'max-turns': 'warn',
  'token-budget': 'warn',
  budget: 'warn',
  timeout: 'warn',
  'no-changes': 'warn',
  infrastructure: 'muted',
  interrupted: 'muted',
  running: 'muted',
};

export function toneOf(value: string | undefined): string {
  if (value === undefined) return 'none';
  return TONES[value.toLowerCase().replace(/_/g, '-')] ?? 'none';
}

/** An outcome, category or verdict as a coloured badge. */
export function badge(value: string | undefined): string {
  return `<span class="badge tone-${toneOf(value)}">${text(dash(value))}</span>`;
}

/** Above either limit a block of output starts collapsed. */
export const COLLAPSE = { bytes: 4096, lines: 60 };

export interface BlockOptions {
  /** Extra class on the `<pre>` (e.g. `diff`). */
  kind?: string;
  /** Already-escaped HTML to show instead of `text(body)` (a highlighted diff). */
  html?: string;
  /** Force open or closed; by default open unless large. */
  open?: boolean;
}

/**
 * A block of output in a `<details>` whose summary says what it is and how big: large
 * blocks start collapsed, so one 1 MB test log does not bury the conversation around it.
 */
export function block(label: string, body: string, options: BlockOptions = {}): string {
  const bytes = Buffer.byteLength(body, 'utf8');
  const lines = body === '' ? 0 : body.split('\n').length;
  const large = bytes > COLLAPSE.bytes || lines > COLLAPSE.lines;
  const open = options.open ?? !large;
  const size = `${formatBytes(bytes)}, ${lines} line${lines === 1 ? '' : 's'}`;
  const kind = options.kind ? ` ${options.kind}` : '';
  return (
    `<details class="block${large ? ' large' : ''}"${open ? ' open' : ''}>` +
    `<summary>${text(label)} <span class="size">${size}</span></summary>` +
    `<pre class="out${kind}">${options.html ?? markCuts(body)}</pre></details>`
  );
}

// What the harness writes where it cut output (agent/tools/output.ts, the sandbox's output
// cap) and where the viewer itself left out the middle of a large file.
const CUT_MARK =
  /\[\.\.\. [^\]\n]{0,200}? cut here[^\]\n]{0,200}?\.\.\.\]|^truncated: yes[^\n]*$|^\[viewer: [^\]\n]*\]$/gm;

/** Escaped text with every truncation mark highlighted, so a reader sees where output is missing. */
export function markCuts(body: string): string {
  let out = '';
  let last = 0;
  for (const match of body.matchAll(CUT_MARK)) {
    out += text(body.slice(last, match.index));
    out += `<mark class="cut">${text(match[0])}</mark>`;
    last = match.index + match[0].length;
  }
  return out + text(body.slice(last));
}

export function hasCutMark(body: string): boolean {
  CUT_MARK.lastIndex = 0;
  const found = CUT_MARK.test(body);
  CUT_MARK.lastIndex = 0;
  return found;
}

/** A unified diff with added, removed and hunk lines tinted; every line escaped. */
export function diffHtml(diff: string): string {
  return diff
    .split('\n')
    .map((line) => {
      const kind =
        line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ')
          ? 'file'
          : line.startsWith('+')
            ? 'add'
            : line.startsWith('-')
              ? 'del'
              : line.startsWith('@@')
                ? 'hunk'
                : '';
      return kind ? `<span class="d-${kind}">${markCuts(line)}</span>` : markCuts(line);
    })
    .join('\n');
}

export interface Column {
  label: string;
  /** Right-aligned numbers. */
  numeric?: boolean;
}

/** A row's cells (already HTML) and, optionally, attributes of its `<tr>` (already escaped). */
export type Row = string[] | { cells: string[]; attrs: string };

/** A table whose cells are already HTML (built with `text()`, `badge()`, links). */
export function table(columns: Column[], rows: Row[]): string {
  const head = columns.map((c) => `<th${c.numeric ? ' class="num"' : ''}>${text(c.label)}</th>`).join('');
  const body = rows
    .map((row) => {
      const { cells, attrs } = Array.isArray(row) ? { cells: row, attrs: '' } : row;
      const tds = cells.map((cell, i) => `<td${columns[i]?.numeric ? ' class="num"' : ''}>${cell}</td>`);
      return `<tr${attrs}>${tds.join('')}</tr>`;
    })
    .join('\n');
  return `<table><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}
