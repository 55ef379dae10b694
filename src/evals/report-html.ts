/**
 * report.html, and the report's sections the viewer's eval page shows: self-contained (inline
 * CSS and SVG, no scripts, nothing fetched) so it can be attached to a CI run or opened
 * offline. Task ids, model names and errors are data: every piece is an `Html` value of the
 * `html` template, which escapes every value that is not `Html`.
 */
import { BASE_CSS } from '../html/css.js';
import { documentString, html, joinHtml, trustedHtml, type Html } from '../html/html.js';
import { table } from '../html/table.js';
import { formatMs } from '../format.js';
import {
  categoriesTable,
  dropsFinding,
  comparisonLead,
  comparisonTable,
  costSection,
  DIFFERENCES_LEAD,
  engineTable,
  ENGINES_NOTE,
  flakyLines,
  formatDelta,
  formatInterval,
  formatPercent,
  NO_FLAKY,
  NOT_SCORED_RULE,
  notScoredTable,
  OVERALL_NOTE,
  overallKTable,
  overallTable,
  perTaskTable,
  provenanceTable,
  taskKTable,
  testsTable,
  TESTS_HEADING,
  TESTS_NOTE,
  type ReportPlace,
  type Table,
} from './report-tables.js';
import { sourceReportSections } from './sources/index.js';
import type { RateSummary, EvalSummary, SummaryComparison } from './summary.js';

/** A trial in report.html, linked to its page in the exported viewer when it has one. */
export interface TrialLink {
  taskId: string;
  trial: number;
  category: string;
  /** Relative to report.html. */
  href?: string;
}

function htmlTable(t: Table): Html {
  return table(
    t.header,
    t.rows.map((r) => ({
      cells: r.cells,
      classes: [r.className, r.total ? 'total' : undefined].filter((c): c is string => c !== undefined),
    })),
  );
}

/** The sections task sources add at `place` (their notes below their tables). */
function htmlSourceSections(summary: EvalSummary, place: ReportPlace): Html[] {
  return sourceReportSections(summary, place).flatMap((section) => [
    html`<h2>${section.heading}</h2>`,
    htmlTable(section.table),
    ...(section.note ? [html`<p class="meta">${section.note}</p>`] : []),
    ...(section.subsections ?? []).flatMap((sub) => [html`<h3>${sub.heading}</h3>`, htmlTable(sub.table)]),
  ]);
}

function htmlEngines(summary: EvalSummary): Html[] {
  const t = engineTable(summary);
  return t ? [html`<h2>Engines</h2>`, html`<p>${ENGINES_NOTE}</p>`, htmlTable(t)] : [];
}

const CHART = { label: 200, plot: 480, value: 170, row: 26, top: 10, axis: 26 };

function x(value: number): number {
  return CHART.label + value * CHART.plot;
}

function num(value: number): string {
  return value.toFixed(1);
}

/** A bar for the rate plus a Wilson error bar with end caps, centred on `y`. */
function barWithInterval(y: number, height: number, r: RateSummary | null, barClass: string): Html {
  if (!r || r.passRate === null) {
    return html`<text x="${x(0) + 4}" y="${num(y + 4)}">no scored trials</text>`;
  }
  const top = y - height / 2;
  const low = x(r.interval.low);
  const high = x(r.interval.high);
  const cap = Math.min(5, height / 2);
  const title = `${formatPercent(r.passRate)} (${r.passes}/${r.scored}), 95% CI ${formatInterval(r.interval)}`;
  return html`<rect class="${barClass}" x="${x(0)}" y="${num(top)}" width="${num(r.passRate * CHART.plot)}" height="${num(height)}"><title>${title}</title></rect><line class="err" x1="${num(low)}" y1="${num(y)}" x2="${num(high)}" y2="${num(y)}"/><line class="err" x1="${num(low)}" y1="${num(y - cap)}" x2="${num(low)}" y2="${num(y + cap)}"/><line class="err" x1="${num(high)}" y1="${num(y - cap)}" x2="${num(high)}" y2="${num(y + cap)}"/>`;
}

function axis(height: number): Html {
  const parts: Html[] = [];
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    const tx = num(x(tick));
    parts.push(
      html`<line class="grid" x1="${tx}" y1="${CHART.top}" x2="${tx}" y2="${height - CHART.axis}"/>`,
    );
    parts.push(html`<text x="${tx}" y="${height - 8}" text-anchor="middle">${tick * 100}%</text>`);
  }
  parts.push(
    html`<line class="axis" x1="${x(0)}" y1="${height - CHART.axis}" x2="${x(1)}" y2="${height - CHART.axis}"/>`,
  );
  return joinHtml(parts);
}

function truncateLabel(label: string, max = 28): string {
  return label.length > max ? `${label.slice(0, max - 1)}…` : label;
}

function svg(width: number, height: number, label: string, body: Html): Html {
  return html`<svg role="img" aria-label="${label}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">${body}</svg>`;
}

/** Horizontal bars: pass rate per task, with the Wilson 95% interval as an error bar. */
export function renderPassRateChart(summary: EvalSummary): Html {
  const rows = summary.tasks;
  const height = CHART.top + rows.length * CHART.row + CHART.axis + 4;
  const width = CHART.label + CHART.plot + CHART.value;
  const body = rows.map((t, i) => {
    const y = CHART.top + i * CHART.row + CHART.row / 2;
    const rate =
      t.passRate === null ? '' : `${formatPercent(t.passRate, 0)} ${formatInterval(t.interval, 0)}`;
    const value = t.notScored ? `${rate}${rate ? ', ' : ''}${t.notScored} not scored` : rate;
    return html`<text x="${CHART.label - 8}" y="${num(y + 4)}" text-anchor="end">${truncateLabel(t.taskId)}<title>${t.taskId}</title></text>${barWithInterval(y, CHART.row - 10, t, 'bar')}<text x="${x(1) + 8}" y="${num(y + 4)}">${value}</text>`;
  });
  return svg(width, height, 'Pass rate per task with 95% Wilson intervals', html`${axis(height)}${body}`);
}

/** Previous and current bar per task, side by side in one row; regressions and improvements tinted. */
export function renderComparisonChart(comparison: SummaryComparison): Html {
  const rowHeight = CHART.row * 2;
  const rows = comparison.tasks;
  const height = CHART.top + rows.length * rowHeight + CHART.axis + 4;
  const width = CHART.label + CHART.plot + CHART.value;
  const body = rows.map((t, i) => {
    const rowTop = CHART.top + i * rowHeight;
    const yPrev = rowTop + CHART.row / 2;
    const yCur = rowTop + CHART.row + CHART.row / 2;
    const flag = t.regression ? 'regression' : t.improvement ? 'improvement' : '';
    const background = flag
      ? html`<rect class="row-${flag}" x="0" y="${rowTop}" width="${width}" height="${rowHeight}"/>`
      : '';
    const currentClass = flag ? `bar-${flag}` : 'bar';
    const label =
      flag === 'regression' ? 'REGRESSION' : flag === 'improvement' ? 'improvement' : formatDelta(t.delta);
    return html`${background}<text x="${CHART.label - 8}" y="${num(yPrev + 4)}" text-anchor="end">${truncateLabel(t.taskId)}<title>${t.taskId}</title></text><text x="${CHART.label - 8}" y="${num(yCur + 4)}" text-anchor="end">${t.status === 'both' ? '' : t.status}</text>${barWithInterval(yPrev, CHART.row - 12, t.previous, 'bar-previous')}${barWithInterval(yCur, CHART.row - 12, t.current, currentClass)}<text x="${x(1) + 8}" y="${num(yPrev + 4)}">previous</text><text x="${x(1) + 8}" y="${num(yCur + 4)}"${flag ? html` class="flag-${flag}"` : ''}>${label}</text>`;
  });
  return svg(
    width,
    height,
    'Pass rate per task, previous (grey) and current, with 95% Wilson intervals',
    html`${axis(height)}${body}`,
  );
}

export function renderHtml(
  summary: EvalSummary,
  comparison?: SummaryComparison,
  trials?: readonly TrialLink[],
): string {
  const sections = renderReportSections(summary, comparison);
  if (trials && trials.length > 0) sections.push(...htmlTrials(trials));
  // The stylesheet is a constant of this code base, never data.
  return documentString(html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Eval report: ${summary.suite.name}</title>
<style>${trustedHtml(BASE_CSS)}</style>
</head>
<body>
${joinHtml(sections, '\n')}
</body>
</html>
`);
}

function htmlTrials(trials: readonly TrialLink[]): Html[] {
  const rows = trials.map((t) => [
    t.taskId,
    t.trial,
    t.category,
    t.href ? html`<a href="${t.href}">conversation, diff, test output</a>` : '',
  ]);
  return [html`<h2>Trials</h2>`, table(['task', 'trial', 'category', 'run'], rows)];
}

/** The report's headings, charts and tables, without the page around them (the viewer reuses them). */
export function renderReportSections(summary: EvalSummary, comparison?: SummaryComparison): Html[] {
  const o = summary.overall;
  const sections: Html[] = [];

  sections.push(
    html`<h1>Eval report: ${summary.suite.name}</h1>`,
    html`<p class="meta">${summary.n} trial(s) per task, ${o.tasks} task(s). Started ${summary.startedAt}, finished ${summary.finishedAt} (${formatMs(summary.wallTimeMs)}). Harness ${summary.harnessVersion}.</p>`,
  );
  if (o.recorded < o.planned) {
    sections.push(html`<p class="warn">Incomplete: ${o.recorded} of ${o.planned} trials have a result.</p>`);
  }

  sections.push(html`<h2>Pass rate per task</h2>`, renderPassRateChart(summary));
  sections.push(
    html`<h2>Overall</h2>`,
    htmlTable(overallTable(summary)),
    html`<p class="meta">${OVERALL_NOTE}</p>`,
    htmlTable(overallKTable(summary)),
  );
  sections.push(html`<h2>Per task</h2>`, htmlTable(perTaskTable(summary)));
  sections.push(
    html`<h3>pass@k per task</h3>`,
    htmlTable(taskKTable(summary, 'pass@')),
    html`<h3>pass^k per task</h3>`,
    htmlTable(taskKTable(summary, 'pass^')),
  );
  sections.push(...htmlSourceSections(summary, 'after-task-tables'));
  const costs = costSection(summary);
  if (costs)
    sections.push(
      html`<h2>Cost</h2>`,
      ...(costs.table ? [htmlTable(costs.table)] : []),
      html`<p class="meta">${costs.note}</p>`,
    );
  const notScored = notScoredTable(summary);
  if (notScored)
    sections.push(
      html`<h2>Not scored</h2>`,
      html`<p class="meta">${NOT_SCORED_RULE}</p>`,
      htmlTable(notScored),
    );
  sections.push(html`<h2>Failure categories</h2>`, htmlTable(categoriesTable(summary)));
  const flaky = flakyLines(summary);
  sections.push(
    html`<h2>Flaky tasks</h2>`,
    flaky.length === 0
      ? html`<p>${NO_FLAKY}</p>`
      : html`<ul>${flaky.map((line) => html`<li>${line}</li>`)}</ul>`,
  );
  if (comparison) sections.push(...htmlComparison(comparison));
  sections.push(...htmlEngines(summary));
  const tests = testsTable(summary);
  if (tests)
    sections.push(html`<h2>${TESTS_HEADING}</h2>`, htmlTable(tests), html`<p class="meta">${TESTS_NOTE}</p>`);
  sections.push(...htmlSourceSections(summary, 'before-provenance'));
  sections.push(html`<h2>Provenance</h2>`, htmlTable(provenanceTable(summary)));
  return sections;
}

function htmlComparison(c: SummaryComparison): Html[] {
  const out: Html[] = [html`<h2>Comparison with the previous summary</h2>`];
  out.push(html`<p class="meta">${comparisonLead(c)}</p>`);
  if (c.regressions.length > 0) {
    out.push(html`<p class="flag-regression">Regressions: ${c.regressions.join(', ')}</p>`);
  }
  const drops = dropsFinding(c);
  if (drops) out.push(html`<p class="flag-regression">${drops}</p>`);
  if (c.improvements.length > 0) {
    out.push(html`<p class="flag-improvement">Improvements: ${c.improvements.join(', ')}</p>`);
  }
  if (c.differences.length > 0) {
    out.push(
      html`<div class="warn"><p>${DIFFERENCES_LEAD}</p><ul>${c.differences.map((d) => html`<li>${d}</li>`)}</ul></div>`,
    );
  }
  out.push(renderComparisonChart(c), htmlTable(comparisonTable(c)));
  return out;
}
