/** The one HTML table of the report and the viewer: headers and cells escaped unless `Html`. */
import { html, type Html, type HtmlValue } from './html.js';

export interface Column {
  label: string;
  /** Right-aligned numbers. */
  numeric?: boolean;
}

export interface TableRow {
  cells: readonly HtmlValue[];
  /** Classes of the `<tr>` (`total`, `regression`). */
  classes?: readonly string[];
  /** More attributes of the `<tr>`, each with its leading space (`html\` data-x="${v}"\``). */
  attrs?: Html;
}

export function table(
  columns: ReadonlyArray<Column | string>,
  rows: ReadonlyArray<TableRow | readonly HtmlValue[]>,
): Html {
  const cols = columns.map((c) => (typeof c === 'string' ? { label: c } : c));
  const num = (i: number) => (cols[i]?.numeric ? html` class="num"` : '');
  const head = cols.map((c, i) => html`<th${num(i)}>${c.label}</th>`);
  const body = rows.map((row) => {
    const r: TableRow = isRow(row) ? row : { cells: row };
    const classes = (r.classes ?? []).filter(Boolean).join(' ');
    const cells = r.cells.map((cell, i) => html`<td${num(i)}>${cell}</td>`);
    return html`<tr${classes ? html` class="${classes}"` : ''}${r.attrs}>${cells}</tr>\n`;
  });
  // In a box of its own that scrolls sideways: a table wider than the page (many columns, a
  // long unbroken cell) scrolls by itself instead of pushing the whole page past the window.
  return html`<div class="table-wrap"><table><thead><tr>${head}</tr></thead><tbody>\n${body}</tbody></table></div>`;
}

function isRow(row: TableRow | readonly HtmlValue[]): row is TableRow {
  return !Array.isArray(row);
}
