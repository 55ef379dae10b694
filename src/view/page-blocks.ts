/**
 * The small building blocks of the viewer's pages, on the shared HTML module
 * (`src/html/`): everything a page shows was read from a run record that a hostile sandbox
 * may have shaped (file names, tool inputs, command output, even the run's id), so pages are
 * `Html` values made by the `html` template, which escapes every value that is not `Html`.
 */
import { formatBytes } from '../format.js';
import { html, joinHtml, text, type Html, type HtmlValue } from '../html/html.js';
import type { TableRow } from '../html/table.js';
import type { RunBundle } from './bundle.js';

export { spell, text } from '../html/html.js';
export { table, type Column } from '../html/table.js';

/** A row of a viewer table: its cells, or its cells with attributes of its `<tr>`. */
export type Row = TableRow | readonly HtmlValue[];
export { formatBytes, formatMs } from '../format.js';

/** "-" for what a record does not say, so a missing field never reads as zero. */
export function dash(value: string | number | undefined | null): string {
  if (value === undefined || value === null || value === '') return '-';
  return typeof value === 'number' ? String(value) : value;
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
export function badge(value: string | undefined): Html {
  return html`<span class="badge tone-${toneOf(value)}">${text(dash(value))}</span>`;
}

/** Above either limit a block of output starts collapsed. */
export const COLLAPSE = { bytes: 4096, lines: 60 };

export interface BlockOptions {
  /** Extra class on the `<pre>` (e.g. `diff`). */
  kind?: string;
  /** Markup to show instead of the body's text (a highlighted diff). */
  html?: Html;
  /** Force open or closed; by default open unless large. */
  open?: boolean;
}

/**
 * A block of output in a `<details>` whose summary says what it is and how big: large
 * blocks start collapsed, so one 1 MB test log does not bury the conversation around it.
 */
export function block(label: string, body: string, options: BlockOptions = {}): Html {
  const bytes = Buffer.byteLength(body, 'utf8');
  const lines = body === '' ? 0 : body.split('\n').length;
  const large = bytes > COLLAPSE.bytes || lines > COLLAPSE.lines;
  const open = options.open ?? !large;
  const size = `${formatBytes(bytes)}, ${lines} line${lines === 1 ? '' : 's'}`;
  const kind = options.kind ? ` ${options.kind}` : '';
  return html`<details class="block${large ? ' large' : ''}"${open ? html` open` : ''}><summary>${text(label)} <span class="size">${size}</span></summary><pre class="out${kind}">${options.html ?? markCuts(body)}</pre></details>`;
}

// What the harness writes where it cut output (agent/tools/result-text.ts, the sandbox's output
// cap) and where the viewer itself left out the middle of a large file.
const CUT_MARK =
  /\[\.\.\. [^\]\n]{0,200}? cut here[^\]\n]{0,200}?\.\.\.\]|^truncated: yes[^\n]*$|^\[viewer: [^\]\n]*\]$/gm;

/** Escaped text with every truncation mark highlighted, so a reader sees where output is missing. */
export function markCuts(body: string): Html {
  const out: Html[] = [];
  let last = 0;
  for (const match of body.matchAll(CUT_MARK)) {
    out.push(text(body.slice(last, match.index)), html`<mark class="cut">${text(match[0])}</mark>`);
    last = match.index + match[0].length;
  }
  out.push(text(body.slice(last)));
  return joinHtml(out);
}

export function hasCutMark(body: string): boolean {
  CUT_MARK.lastIndex = 0;
  const found = CUT_MARK.test(body);
  CUT_MARK.lastIndex = 0;
  return found;
}

/** A unified diff with added, removed and hunk lines tinted; every line escaped. */
export function diffHtml(diff: string): Html {
  const lines = diff.split('\n').map((line) => {
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
    return kind ? html`<span class="d-${kind}">${markCuts(line)}</span>` : markCuts(line);
  });
  return joinHtml(lines, '\n');
}

/**
 * What the baseline found: a test command that did not run the tests at all is not a
 * ticket's failing tests, and says why.
 */
export function baselineVerdict(b: NonNullable<RunBundle['baseline']>): Html {
  const layer = (name: string | undefined) => (name ? html` (layer ${text(name)})` : '');
  if (b.brokenCommand)
    return html`<span class="problems">the test command did not run the tests${layer(b.brokenCommand.layer)}: ${text(dash(b.brokenCommand.reason))}</span>`;
  if (b.failing === undefined) return html`-`;
  return b.failing
    ? html`tests fail before any change${layer(b.failingLayer)}`
    : html`tests pass before any change`;
}
