/**
 * Eval reports: `summary.json` for machines (and for a later `--compare`), `report.md` for
 * pull requests, `report.html` for people. The HTML is self-contained (inline CSS and SVG,
 * no scripts, nothing fetched) so it can be attached to a CI run or opened offline, and every
 * piece of text in it is escaped: task ids, model names and errors are data, not markup.
 */
import { writeFileAtomic } from '../atomic-write.js';
import path from 'node:path';
import { formatDuration } from './progress.js';
import type { Interval } from './stats.js';
import type {
  CostSummary,
  EvalSummary,
  KValue,
  RateComparison,
  RateSummary,
  SummaryComparison,
  TaskSummary,
} from './summary.js';
import { PASSING_CATEGORY, TRIAL_CATEGORIES } from './types.js';

export interface ReportFiles {
  summaryJson: string;
  markdown: string;
  html: string;
  /** Written only when a comparison is given. */
  comparisonJson?: string;
}

/** One task's row, the same in report.md and report.html. */
function taskCells(t: TaskSummary): string[] {
  return [
    t.taskId,
    `${t.scored}/${t.planned}`,
    String(t.passes),
    formatPercent(t.passRate),
    formatInterval(t.interval),
    notScoredCell(t),
    formatNumber(t.turns.mean),
    formatNumber(t.turns.median),
    String(t.inputTokens.total),
    String(t.outputTokens.total),
    formatDuration(t.durationMs.mean),
    t.flaky ? 'yes' : '',
  ];
}

/**
 * `0`, or `2 (1 error, 1 infrastructure)`: every trial left out of a pass rate is counted
 * where the rate is read, whatever the reason.
 */
export function notScoredCell(
  t: Pick<TaskSummary, 'notScored' | 'errors' | 'infrastructure' | 'interrupted' | 'infraRetried'>,
): string {
  // Summaries written before `notScored` existed count what they can.
  const total = t.notScored ?? t.errors + t.infrastructure + t.interrupted;
  const parts = [
    t.errors ? `${t.errors} error` : '',
    t.infrastructure ? `${t.infrastructure} infrastructure` : '',
    t.interrupted ? `${t.interrupted} interrupted` : '',
    t.infraRetried ? `${t.infraRetried} retried` : '',
  ].filter(Boolean);
  return parts.length > 0 ? `${total} (${parts.join(', ')})` : String(total);
}

/** A trial in report.html, linked to its page in the exported viewer when it has one. */
export interface TrialLink {
  taskId: string;
  trial: number;
  category: string;
  /** Relative to report.html. */
  href?: string;
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
// Shared formatting

// Reports use the categories' own words: the same spelling as the run record and the CLI.
const FAILURE_CATEGORIES = TRIAL_CATEGORIES.filter((c) => c !== PASSING_CATEGORY);

export function formatPercent(value: number | null, digits = 1): string {
  return value === null ? 'n/a' : `${(value * 100).toFixed(digits)}%`;
}

export function formatInterval(interval: Interval, digits = 1): string {
  return `[${(interval.low * 100).toFixed(digits)}, ${(interval.high * 100).toFixed(digits)}]%`;
}

function formatNumber(value: number | null, digits = 1): string {
  if (value === null) return 'n/a';
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

function formatDelta(delta: number | null): string {
  if (delta === null) return 'n/a';
  const points = (delta * 100).toFixed(1);
  return `${delta > 0 ? '+' : ''}${points} pts`;
}

function kValues(values: KValue[]): string[] {
  return values.map((v) => formatPercent(v.value));
}

function verdict(c: RateComparison): string {
  if (c.regression) return 'REGRESSION';
  if (c.improvement) return 'improvement';
  return '';
}

// ---------------------------------------------------------------------------------------
// Tables: built once, rendered to Markdown and to HTML

interface Row {
  cells: string[];
  /** The row that sums up the others (rendered bold / with its own class). */
  total?: boolean;
  className?: 'regression' | 'improvement';
}

interface Table {
  header: string[];
  rows: Row[];
}

const rowsOf = (rows: string[][]): Row[] => rows.map((cells) => ({ cells }));

function overallTable(summary: EvalSummary): Table {
  const o = summary.overall;
  return {
    header: [
      'scored',
      'passes',
      'pass rate',
      '95% CI',
      'not scored',
      'mean turns',
      'median turns',
      'tokens in',
      'tokens out',
      'mean trial time',
    ],
    rows: rowsOf([
      [
        `${o.scored}/${o.planned}`,
        String(o.passes),
        formatPercent(o.passRate),
        formatInterval(o.interval),
        notScoredCell(o),
        formatNumber(o.turns.mean),
        formatNumber(o.turns.median),
        String(o.inputTokens.total),
        String(o.outputTokens.total),
        formatDuration(o.durationMs.mean),
      ],
    ]),
  };
}

/** The one rule for trials the harness could not score; the README states the same words. */
export const NOT_SCORED_RULE =
  'A trial that ends `error` (the harness or the task configuration failed, e.g. a cassette ran out), ' +
  '`infrastructure` (the engine or the model API was unavailable) or `interrupted` says nothing about the agent: ' +
  'it is counted under "not scored" with its reason and left out of the pass rate, and the eval exits non-zero.';

const OVERALL_NOTE = `${NOT_SCORED_RULE} Overall pass@k is the mean of the per-task values.`;

function overallKTable(summary: EvalSummary): Table {
  return {
    header: ['', ...ks(summary.n, 'k=')],
    rows: rowsOf([
      ['pass@k', ...kValues(summary.overall.passAtK)],
      ['pass^k', ...kValues(summary.overall.passHatK)],
    ]),
  };
}

function perTaskTable(summary: EvalSummary): Table {
  return {
    header: [
      'task',
      'scored',
      'passes',
      'pass rate',
      '95% CI',
      'not scored',
      'mean turns',
      'median turns',
      'tokens in',
      'tokens out',
      'mean time',
      'flaky',
    ],
    rows: rowsOf(summary.tasks.map(taskCells)),
  };
}

function formatUsd(value: number | null | undefined): string {
  if (value === null || value === undefined) return '-';
  return value >= 1 ? `$${value.toFixed(2)}` : `$${value.toFixed(4)}`;
}

/** Money per task and overall; none when no trial carried a cost (records of older versions). */
function costTable(summary: EvalSummary): Table | undefined {
  const overall = summary.overall.cost;
  if (!overall) return undefined;
  const budget = overall.atBudget;
  const cells = (id: string, c: CostSummary | undefined): string[] => [
    id,
    formatUsd(c?.totalUsd),
    formatUsd(c?.perTrial.mean),
    formatUsd(c?.perSolvedUsd),
    ...(budget ? [formatPercent(c?.atBudget?.passRate ?? null)] : []),
  ];
  return {
    header: [
      'task',
      'total cost',
      'mean cost per trial',
      'cost per solved task',
      ...(budget ? [`pass@1 within ${formatUsd(budget.budgetUsd)}`] : []),
    ],
    rows: [
      ...rowsOf(summary.tasks.map((t) => cells(t.taskId, t.cost))),
      { cells: cells('all', overall), total: true },
    ],
  };
}

function costNote(summary: EvalSummary): string {
  const unpriced = summary.overall.cost?.unpriced ?? [];
  return (
    "Cost is the price table (prices/default.yaml, overridden by the catalog) times the tokens each trial used, every role included; cost per solved task is the scored trials' cost over their passes." +
    (unpriced.length > 0 ? ` No price for: ${unpriced.join(', ')} (counted as $0).` : '')
  );
}

function taskKTable(summary: EvalSummary, symbol: 'pass@' | 'pass^'): Table {
  return {
    header: ['task', ...ks(summary.n, symbol)],
    rows: rowsOf(
      summary.tasks.map((t) => [t.taskId, ...kValues(symbol === 'pass@' ? t.passAtK : t.passHatK)]),
    ),
  };
}

function categoriesTable(summary: EvalSummary): Table {
  return {
    header: ['task', ...FAILURE_CATEGORIES],
    rows: [
      ...rowsOf(
        summary.tasks.map((t) => [t.taskId, ...FAILURE_CATEGORIES.map((c) => String(t.categories[c]))]),
      ),
      {
        cells: ['all', ...FAILURE_CATEGORIES.map((c) => String(summary.overall.categories[c]))],
        total: true,
      },
    ],
  };
}

/** Every trial left out of a pass rate, with its reason; none when all were scored. */
function notScoredTable(summary: EvalSummary): Table | undefined {
  const trials = summary.tasks.flatMap((t) => t.notScoredTrials ?? []);
  if (trials.length === 0) return undefined;
  return {
    header: ['task', 'trial', 'category', 'reason'],
    rows: rowsOf(trials.map((t) => [t.taskId, String(t.trial), t.category, t.reason])),
  };
}

function flakyLines(summary: EvalSummary): string[] {
  return summary.tasks.filter((t) => t.flaky).map((t) => `${t.taskId}: ${t.passes}/${t.scored} passed`);
}

const NO_FLAKY = 'None: every task either always passed or always failed.';

function provenanceTable(summary: EvalSummary): Table {
  return {
    header: ['', ''],
    rows: rowsOf([
      ['harness version', summary.harnessVersion],
      ['suite', `${summary.suite.name} (${summary.suite.file})`],
      ['suite sha256', summary.suite.sha256],
      ['providers', summary.providers.join(', ') || 'n/a'],
      ['models', summary.models.join(', ') || 'n/a'],
      ['runtimes', summary.runtimes?.join(', ') || 'n/a'],
      ['image ids', summary.imageIds.join(', ') || 'n/a'],
      ...summary.tasks.map((t) => [`catalog hash: ${t.taskId}`, t.catalogHashes.join(', ') || 'n/a']),
    ]),
  };
}

function comparisonTable(c: SummaryComparison): Table {
  const row = (name: string, r: RateComparison, status: string, total = false): Row => ({
    cells: [
      name,
      r.previous ? `${formatPercent(r.previous.passRate)} ${formatInterval(r.previous.interval)}` : 'absent',
      r.current ? `${formatPercent(r.current.passRate)} ${formatInterval(r.current.interval)}` : 'absent',
      formatDelta(r.delta),
      [verdict(r), status].filter(Boolean).join(' '),
    ],
    ...(total ? { total } : {}),
    ...(r.regression
      ? { className: 'regression' as const }
      : r.improvement
        ? { className: 'improvement' as const }
        : {}),
  });
  return {
    header: ['task', 'previous', 'current', 'delta', 'flag'],
    rows: [
      ...c.tasks.map((t) => row(t.taskId, t, t.status === 'both' ? '' : t.status)),
      row('overall', c.overall, '', true),
    ],
  };
}

function comparisonLead(c: SummaryComparison): string {
  return (
    `Previous: ${c.previous.suiteName}, harness ${c.previous.harnessVersion}, started ${c.previous.startedAt}. ` +
    'A change is flagged only when the two 95% intervals do not overlap.'
  );
}

const DIFFERENCES_LEAD = 'Differences between the two runs (read before trusting a delta):';

// ---------------------------------------------------------------------------------------
// Markdown

function mdCell(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

function mdTable(table: Table): string {
  const line = (cells: string[]): string => `| ${cells.map(mdCell).join(' | ')} |`;
  const row = (r: Row): string => line(r.total ? r.cells.map((c, i) => (i === 0 ? `**${c}**` : c)) : r.cells);
  return [line(table.header), `|${table.header.map(() => ' --- ').join('|')}|`, ...table.rows.map(row)].join(
    '\n',
  );
}

function ks(n: number, symbol: string): string[] {
  return Array.from({ length: n }, (_, i) => `${symbol}${i + 1}`);
}

export function renderMarkdown(summary: EvalSummary, comparison?: SummaryComparison): string {
  const o = summary.overall;
  const out: string[] = [];
  out.push(`# Eval report: ${mdCell(summary.suite.name)}`, '');
  out.push(
    `${summary.n} trial(s) per task, ${o.tasks} task(s). Started ${summary.startedAt}, finished ${summary.finishedAt} ` +
      `(${formatDuration(summary.wallTimeMs)}).`,
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
  const costs = costTable(summary);
  if (costs) out.push('## Cost', '', mdTable(costs), '', mdCell(costNote(summary)), '');
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
  const instances = instancesTable(summary);
  if (instances) out.push(`## ${INSTANCES_HEADING}`, '', mdTable(instances), '');
  out.push('## Provenance', '', mdTable(provenanceTable(summary)), '');
  return `${out.join('\n')}`;
}

// ---------------------------------------------------------------------------------------
// Per-test results (catalog agent.testReport; SWE-bench instances)

const TESTS_HEADING = 'Per-test results';
const TESTS_NOTE =
  'From the JUnit report of each scored trial\'s last verification. "resolved": every FAIL_TO_PASS and PASS_TO_PASS test passed (a skipped or missing one did not); the trial page has every test.';

/** One row per task whose trials had a test report; none when no trial had one. */
function testsTable(summary: EvalSummary): Table | undefined {
  const tasks = summary.tasks.filter((t) => t.tests);
  if (tasks.length === 0) return undefined;
  return {
    header: ['task', 'trials with a report', 'report refused', 'resolved', 'failing most often'],
    rows: rowsOf(
      tasks.map((t) => {
        const s = t.tests!;
        return [
          t.taskId,
          String(s.trials),
          String(s.refused),
          s.named > 0 ? `${s.resolved}/${s.named}` : '-',
          s.failing.map((f) => `${f.id} (${f.trials})`).join('; ') || '-',
        ];
      }),
    ),
  };
}

const INSTANCES_HEADING = 'Gold patches and quarantined tests';

/**
 * An instance eval's flags: instances whose gold patch fails (left out of scoring, never a
 * model's failure), and tests left out as flaky. None for a task suite, or when nothing is flagged.
 */
function instancesTable(summary: EvalSummary): Table | undefined {
  const info = summary.instances;
  if (!info) return undefined;
  const rows: string[][] = [];
  for (const id of info.goldFails)
    rows.push([
      id,
      info.oracle
        ? 'the gold patch does not resolve it'
        : 'gold patch fails (quarantine file): not run, not scored',
      '-',
    ]);
  for (const [id, list] of Object.entries(info.flakyTests ?? {}))
    rows.push([id, 'tests flake under the gold patch', list.join('; ')]);
  if (!info.oracle)
    for (const [id, list] of Object.entries(info.quarantined))
      if (list.length > 0)
        rows.push([id, 'quarantined tests left out of FAIL_TO_PASS/PASS_TO_PASS', list.join('; ')]);
  if (rows.length === 0)
    rows.push([
      'all',
      info.oracle ? 'every gold patch resolved its instance; no test flaked' : 'nothing quarantined',
      '-',
    ]);
  return { header: ['instance', 'flag', 'tests'], rows: rowsOf(rows) };
}

// ---------------------------------------------------------------------------------------
// Engines (an eval over a fleet)

const ENGINE_HEADER = [
  'engine',
  'trial runs',
  'passes',
  'infrastructure',
  'retried elsewhere',
  'mean trial time',
];

/** Rows of the engines section; none for an eval that ran on the local engine alone. */
function engineTable(summary: EvalSummary): Table | undefined {
  const engines = summary.engines ?? [];
  if (engines.length === 0 || (engines.length === 1 && engines[0]?.engine === 'local')) return undefined;
  return {
    header: ENGINE_HEADER,
    rows: rowsOf(
      engines.map((e) => [
        e.engine,
        String(e.trials),
        String(e.passes),
        String(e.infrastructure),
        String(e.retriedElsewhere),
        formatDuration(e.meanTrialMs),
      ]),
    ),
  };
}

const ENGINES_NOTE =
  'A trial whose first try failed as infrastructure counts on both engines: the failed try where it ran, the retry where that ran.';

function markdownEngines(summary: EvalSummary): string[] {
  const table = engineTable(summary);
  return table ? ['## Engines', '', ENGINES_NOTE, '', mdTable(table), ''] : [];
}

function htmlEngines(summary: EvalSummary): string[] {
  const table = engineTable(summary);
  return table ? ['<h2>Engines</h2>', `<p>${escapeHtml(ENGINES_NOTE)}</p>`, htmlTable(table)] : [];
}

function markdownComparison(c: SummaryComparison): string[] {
  const out: string[] = ['## Comparison with the previous summary', ''];
  out.push(mdCell(comparisonLead(c)), '');
  if (c.regressions.length > 0) out.push(`**Regressions:** ${c.regressions.map(mdCell).join(', ')}`, '');
  if (c.improvements.length > 0) out.push(`**Improvements:** ${c.improvements.map(mdCell).join(', ')}`, '');
  out.push(mdTable(comparisonTable(c)), '');
  if (c.differences.length > 0) {
    out.push(DIFFERENCES_LEAD, '');
    out.push(...c.differences.map((d) => `- ${mdCell(d)}`), '');
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// HTML

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#1b1f24;background:#fff}
h1{font-size:1.5rem;margin-bottom:.25rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.25rem}
.meta{color:#57606a}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}
thead th{background:#f6f8fa}
tr.regression td{background:#ffebe9}tr.improvement td{background:#dafbe1}tr.total td{font-weight:600}
.flag-regression{color:#cf222e;font-weight:600}.flag-improvement{color:#1a7f37;font-weight:600}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .75rem;border-radius:4px}
svg{max-width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#1b1f24}
svg .axis{stroke:#8c959f;stroke-width:1}svg .grid{stroke:#eaeef2;stroke-width:1}
svg .bar{fill:#54aeff}svg .bar-previous{fill:#afb8c1}svg .bar-regression{fill:#ff8182}svg .bar-improvement{fill:#4ac26b}
svg .err{stroke:#1b1f24;stroke-width:1.5}
svg .row-regression{fill:#ffebe9}svg .row-improvement{fill:#dafbe1}
`;

/** The report's stylesheet, for pages that show its charts and tables (the viewer). */
export const REPORT_CSS = CSS;

function th(cells: string[]): string {
  return `<thead><tr>${cells.map((c) => `<th>${escapeHtml(c)}</th>`).join('')}</tr></thead>`;
}

function td(cells: string[]): string {
  return cells.map((c) => `<td>${escapeHtml(c)}</td>`).join('');
}

function htmlTable(table: Table): string {
  const body = table.rows
    .map((r) => {
      const classes = [r.className, r.total ? 'total' : undefined].filter(Boolean).join(' ');
      return `<tr${classes ? ` class="${classes}"` : ''}>${td(r.cells)}</tr>`;
    })
    .join('');
  return `<table>${th(table.header)}<tbody>${body}</tbody></table>`;
}

const CHART = { label: 200, plot: 480, value: 170, row: 26, top: 10, axis: 26 };

function x(value: number): number {
  return CHART.label + value * CHART.plot;
}

function num(value: number): string {
  return value.toFixed(1);
}

/** A bar for the rate plus a Wilson error bar with end caps, centred on `y`. */
function barWithInterval(y: number, height: number, r: RateSummary | null, barClass: string): string {
  if (!r || r.passRate === null) {
    return `<text x="${x(0) + 4}" y="${num(y + 4)}">no scored trials</text>`;
  }
  const top = y - height / 2;
  const low = x(r.interval.low);
  const high = x(r.interval.high);
  const cap = Math.min(5, height / 2);
  return [
    `<rect class="${barClass}" x="${x(0)}" y="${num(top)}" width="${num(r.passRate * CHART.plot)}" height="${num(height)}"><title>${escapeHtml(
      `${formatPercent(r.passRate)} (${r.passes}/${r.scored}), 95% CI ${formatInterval(r.interval)}`,
    )}</title></rect>`,
    `<line class="err" x1="${num(low)}" y1="${num(y)}" x2="${num(high)}" y2="${num(y)}"/>`,
    `<line class="err" x1="${num(low)}" y1="${num(y - cap)}" x2="${num(low)}" y2="${num(y + cap)}"/>`,
    `<line class="err" x1="${num(high)}" y1="${num(y - cap)}" x2="${num(high)}" y2="${num(y + cap)}"/>`,
  ].join('');
}

function axis(height: number): string {
  const parts: string[] = [];
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    const tx = num(x(tick));
    parts.push(`<line class="grid" x1="${tx}" y1="${CHART.top}" x2="${tx}" y2="${height - CHART.axis}"/>`);
    parts.push(`<text x="${tx}" y="${height - 8}" text-anchor="middle">${tick * 100}%</text>`);
  }
  parts.push(
    `<line class="axis" x1="${x(0)}" y1="${height - CHART.axis}" x2="${x(1)}" y2="${height - CHART.axis}"/>`,
  );
  return parts.join('');
}

function truncateLabel(text: string, max = 28): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function svg(width: number, height: number, label: string, body: string): string {
  return `<svg role="img" aria-label="${escapeHtml(label)}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">${body}</svg>`;
}

/** Horizontal bars: pass rate per task, with the Wilson 95% interval as an error bar. */
export function renderPassRateChart(summary: EvalSummary): string {
  const rows = summary.tasks;
  const height = CHART.top + rows.length * CHART.row + CHART.axis + 4;
  const width = CHART.label + CHART.plot + CHART.value;
  const body = rows.map((t, i) => {
    const y = CHART.top + i * CHART.row + CHART.row / 2;
    const rate =
      t.passRate === null ? '' : `${formatPercent(t.passRate, 0)} ${formatInterval(t.interval, 0)}`;
    const value = t.notScored ? `${rate}${rate ? ', ' : ''}${t.notScored} not scored` : rate;
    return [
      `<text x="${CHART.label - 8}" y="${num(y + 4)}" text-anchor="end">${escapeHtml(truncateLabel(t.taskId))}<title>${escapeHtml(t.taskId)}</title></text>`,
      barWithInterval(y, CHART.row - 10, t, 'bar'),
      `<text x="${x(1) + 8}" y="${num(y + 4)}">${escapeHtml(value)}</text>`,
    ].join('');
  });
  return svg(width, height, 'Pass rate per task with 95% Wilson intervals', axis(height) + body.join(''));
}

/** Previous and current bar per task, side by side in one row; regressions and improvements tinted. */
export function renderComparisonChart(comparison: SummaryComparison): string {
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
      ? `<rect class="row-${flag}" x="0" y="${rowTop}" width="${width}" height="${rowHeight}"/>`
      : '';
    const currentClass = flag ? `bar-${flag}` : 'bar';
    const label =
      flag === 'regression' ? 'REGRESSION' : flag === 'improvement' ? 'improvement' : formatDelta(t.delta);
    return [
      background,
      `<text x="${CHART.label - 8}" y="${num(yPrev + 4)}" text-anchor="end">${escapeHtml(truncateLabel(t.taskId))}<title>${escapeHtml(t.taskId)}</title></text>`,
      `<text x="${CHART.label - 8}" y="${num(yCur + 4)}" text-anchor="end">${escapeHtml(t.status === 'both' ? '' : t.status)}</text>`,
      barWithInterval(yPrev, CHART.row - 12, t.previous, 'bar-previous'),
      barWithInterval(yCur, CHART.row - 12, t.current, currentClass),
      `<text x="${x(1) + 8}" y="${num(yPrev + 4)}">previous</text>`,
      `<text x="${x(1) + 8}" y="${num(yCur + 4)}"${flag ? ` class="flag-${flag}"` : ''}>${escapeHtml(label)}</text>`,
    ].join('');
  });
  return svg(
    width,
    height,
    'Pass rate per task, previous (grey) and current, with 95% Wilson intervals',
    axis(height) + body.join(''),
  );
}

export function renderHtml(
  summary: EvalSummary,
  comparison?: SummaryComparison,
  trials?: readonly TrialLink[],
): string {
  const e = escapeHtml;
  const sections = renderReportSections(summary, comparison);
  if (trials && trials.length > 0) sections.push(...htmlTrials(trials));
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${e(`Eval report: ${summary.suite.name}`)}</title>`,
    `<style>${CSS}</style>`,
    '</head>',
    '<body>',
    ...sections,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

function htmlTrials(trials: readonly TrialLink[]): string[] {
  const rows = trials.map((t) => {
    const link = t.href ? `<a href="${escapeHtml(t.href)}">conversation, diff, test output</a>` : '';
    return `<tr><td>${escapeHtml(t.taskId)}</td><td>${t.trial}</td><td>${escapeHtml(t.category)}</td><td>${link}</td></tr>`;
  });
  return [
    '<h2>Trials</h2>',
    `<table>${th(['task', 'trial', 'category', 'run'])}<tbody>${rows.join('')}</tbody></table>`,
  ];
}

/** The report's headings, charts and tables, without the page around them (the viewer reuses them). */
export function renderReportSections(summary: EvalSummary, comparison?: SummaryComparison): string[] {
  const o = summary.overall;
  const e = escapeHtml;
  const sections: string[] = [];

  sections.push(
    `<h1>Eval report: ${e(summary.suite.name)}</h1>`,
    `<p class="meta">${e(
      `${summary.n} trial(s) per task, ${o.tasks} task(s). Started ${summary.startedAt}, finished ${summary.finishedAt} (${formatDuration(summary.wallTimeMs)}). Harness ${summary.harnessVersion}.`,
    )}</p>`,
  );
  if (o.recorded < o.planned) {
    sections.push(
      `<p class="warn">${e(`Incomplete: ${o.recorded} of ${o.planned} trials have a result.`)}</p>`,
    );
  }

  sections.push('<h2>Pass rate per task</h2>', renderPassRateChart(summary));
  sections.push(
    '<h2>Overall</h2>',
    htmlTable(overallTable(summary)),
    `<p class="meta">${e(OVERALL_NOTE)}</p>`,
    htmlTable(overallKTable(summary)),
  );
  sections.push('<h2>Per task</h2>', htmlTable(perTaskTable(summary)));
  sections.push(
    '<h3>pass@k per task</h3>',
    htmlTable(taskKTable(summary, 'pass@')),
    '<h3>pass^k per task</h3>',
    htmlTable(taskKTable(summary, 'pass^')),
  );
  const costs = costTable(summary);
  if (costs) sections.push('<h2>Cost</h2>', htmlTable(costs), `<p class="meta">${e(costNote(summary))}</p>`);
  const notScored = notScoredTable(summary);
  if (notScored)
    sections.push('<h2>Not scored</h2>', `<p class="meta">${e(NOT_SCORED_RULE)}</p>`, htmlTable(notScored));
  sections.push('<h2>Failure categories</h2>', htmlTable(categoriesTable(summary)));
  const flaky = flakyLines(summary);
  sections.push(
    '<h2>Flaky tasks</h2>',
    flaky.length === 0
      ? `<p>${e(NO_FLAKY)}</p>`
      : `<ul>${flaky.map((line) => `<li>${e(line)}</li>`).join('')}</ul>`,
  );
  if (comparison) sections.push(...htmlComparison(comparison));
  sections.push(...htmlEngines(summary));
  const tests = testsTable(summary);
  if (tests)
    sections.push(`<h2>${e(TESTS_HEADING)}</h2>`, htmlTable(tests), `<p class="meta">${e(TESTS_NOTE)}</p>`);
  const instances = instancesTable(summary);
  if (instances) sections.push(`<h2>${e(INSTANCES_HEADING)}</h2>`, htmlTable(instances));
  sections.push('<h2>Provenance</h2>', htmlTable(provenanceTable(summary)));
  return sections;
}

function htmlComparison(c: SummaryComparison): string[] {
  const e = escapeHtml;
  const out: string[] = ['<h2>Comparison with the previous summary</h2>'];
  out.push(`<p class="meta">${e(comparisonLead(c))}</p>`);
  if (c.regressions.length > 0) {
    out.push(`<p class="flag-regression">${e(`Regressions: ${c.regressions.join(', ')}`)}</p>`);
  }
  if (c.improvements.length > 0) {
    out.push(`<p class="flag-improvement">${e(`Improvements: ${c.improvements.join(', ')}`)}</p>`);
  }
  if (c.differences.length > 0) {
    out.push(
      `<div class="warn"><p>${e(DIFFERENCES_LEAD)}</p><ul>${c.differences.map((d) => `<li>${e(d)}</li>`).join('')}</ul></div>`,
    );
  }
  out.push(renderComparisonChart(c), htmlTable(comparisonTable(c)));
  return out;
}
