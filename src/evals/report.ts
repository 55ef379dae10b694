/**
 * Eval reports: `summary.json` for machines (and for a later `--compare`), `report.md` for
 * pull requests, `report.html` for people (`report-html.ts`: self-contained, every value
 * escaped by type). The tables both show are built once in `report-tables.ts`.
 */
import { writeFileAtomic } from '../atomic-write.js';
import { spell } from '../html/html.js';
import path from 'node:path';
import { formatMs } from '../format.js';
import { renderHtml, type TrialLink } from './report-html.js';
import {
  dropsFinding,
  comparisonLead,
  comparisonTable,
  costSection,
  categoriesTable,
  DIFFERENCES_LEAD,
  engineTable,
  ENGINES_NOTE,
  flakyLines,
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
  type ReportSection,
  type Row,
  type Table,
} from './report-tables.js';
import { sourceReportSections } from './sources/index.js';
import type { EvalSummary, SummaryComparison } from './summary.js';

export { formatInterval, formatPercent, NOT_SCORED_RULE, notScoredCell } from './report-tables.js';
export {
  renderComparisonChart,
  renderHtml,
  renderPassRateChart,
  renderReportSections,
  type TrialLink,
} from './report-html.js';
/** The plain five-character escape, under the name callers have used. */
export { escapeText as escapeHtml } from '../html/html.js';

export interface ReportFiles {
  summaryJson: string;
  markdown: string;
  html: string;
  /** Written only when a comparison is given. */
  comparisonJson?: string;
}

export async function writeReports(
  outDir: string,
  summary: EvalSummary,
  comparison?: SummaryComparison,
  trials?: readonly TrialLink[],
): Promise<ReportFiles> {
  const files: ReportFiles = {
    summaryJson: path.join(outDir, 'summary.json'),
    markdown: path.join(outDir, 'report.md'),
    html: path.join(outDir, 'report.html'),
  };
  await writeFileAtomic(files.summaryJson, `${JSON.stringify(summary, null, 2)}\n`);
  await writeFileAtomic(files.markdown, renderMarkdown(summary, comparison));
  await writeFileAtomic(files.html, renderHtml(summary, comparison, trials));
  if (comparison) {
    files.comparisonJson = path.join(outDir, 'comparison.json');
    await writeFileAtomic(files.comparisonJson, `${JSON.stringify(comparison, null, 2)}\n`);
  }
  return files;
}

// ---------------------------------------------------------------------------------------
// Markdown

/**
 * Text as Markdown shows it, never as markup: a pipe cannot end a cell, a line break cannot
 * end a row, a tag or a link stays text (GitHub renders inline HTML), and control, bidirectional and
 * invisible characters are spelled out as in report.html. Names and reasons in a report come
 * from task files, sandboxes and records: data.
 */
function mdCell(text: string): string {
  return (
    spell(text)
      .replace(/\\/g, '\\\\')
      .replace(/\|/g, '\\|')
      // `<` is what opens a tag (or an autolink); `](` what opens a link's address.
      .replace(/</g, '&lt;')
      .replace(/\]\(/g, ']\\(')
      .replace(/\r?\n/g, ' ')
  );
}

function mdTable(table: Table): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  const row = (r: Row): string => {
    const cells = r.cells.map(mdCell);
    return line(r.total ? cells.map((c, i) => (i === 0 ? `**${c}**` : c)) : cells);
  };
  return [
    line(table.header.map(mdCell)),
    `|${table.header.map(() => ' --- ').join('|')}|`,
    ...table.rows.map(row),
  ].join('\n');
}

export function renderMarkdown(summary: EvalSummary, comparison?: SummaryComparison): string {
  const o = summary.overall;
  const out: string[] = [];
  out.push(`# Eval report: ${mdCell(summary.suite.name)}`, '');
  out.push(
    `${summary.n} trial(s) per task, ${o.tasks} task(s). Started ${summary.startedAt}, finished ${summary.finishedAt} ` +
      `(${formatMs(summary.wallTimeMs)}).`,
    '',
  );
  if (o.recorded < o.planned) {
    out.push(`**Incomplete:** ${o.recorded} of ${o.planned} trials have a result.`, '');
  }
  out.push('## Overall', '', mdTable(overallTable(summary)), '', OVERALL_NOTE, '');
  out.push(mdTable(overallKTable(summary)), '');
  out.push('## Per task', '', mdTable(perTaskTable(summary)), '');
  out.push('### pass@k per task', '', mdTable(taskKTable(summary, 'pass@')), '');
  out.push('### pass^k per task', '', mdTable(taskKTable(summary, 'pass^')), '');
  out.push(...markdownSourceSections(summary, 'after-task-tables'));
  const costs = costSection(summary);
  if (costs)
    out.push('## Cost', '', ...(costs.table ? [mdTable(costs.table), ''] : []), mdCell(costs.note), '');
  const notScored = notScoredTable(summary);
  if (notScored) out.push('## Not scored', '', NOT_SCORED_RULE, '', mdTable(notScored), '');
  out.push('## Failure categories', '', mdTable(categoriesTable(summary)), '');
  out.push('## Flaky tasks', '');
  const flaky = flakyLines(summary);
  if (flaky.length === 0) out.push(NO_FLAKY, '');
  else out.push(...flaky.map((line) => `- ${mdCell(line)}`), '');
  if (comparison) out.push(...markdownComparison(comparison));
  out.push(...markdownEngines(summary));
  const tests = testsTable(summary);
  if (tests) out.push(`## ${TESTS_HEADING}`, '', mdTable(tests), '', TESTS_NOTE, '');
  out.push(...markdownSourceSections(summary, 'before-provenance'));
  out.push('## Provenance', '', mdTable(provenanceTable(summary)), '');
  return `${out.join('\n')}`;
}

/** The sections task sources add at `place` (their notes above their tables). */
function markdownSourceSections(summary: EvalSummary, place: ReportPlace): string[] {
  return sourceReportSections(summary, place).flatMap((section: ReportSection) => [
    `## ${section.heading}`,
    '',
    ...(section.note ? [section.note, ''] : []),
    mdTable(section.table),
    '',
    ...(section.subsections ?? []).flatMap((sub) => [`### ${sub.heading}`, '', mdTable(sub.table), '']),
  ]);
}

function markdownEngines(summary: EvalSummary): string[] {
  const table = engineTable(summary);
  return table ? ['## Engines', '', ENGINES_NOTE, '', mdTable(table), ''] : [];
}

function markdownComparison(c: SummaryComparison): string[] {
  const out: string[] = ['## Comparison with the previous summary', ''];
  out.push(mdCell(comparisonLead(c)), '');
  if (c.regressions.length > 0) out.push(`**Regressions:** ${c.regressions.map(mdCell).join(', ')}`, '');
  const drops = dropsFinding(c);
  if (drops) out.push(mdCell(drops), '');
  if (c.improvements.length > 0) out.push(`**Improvements:** ${c.improvements.map(mdCell).join(', ')}`, '');
  out.push(mdTable(comparisonTable(c)), '');
  if (c.differences.length > 0) {
    out.push(DIFFERENCES_LEAD, '');
    out.push(...c.differences.map((d) => `- ${mdCell(d)}`), '');
  }
  return out;
}
