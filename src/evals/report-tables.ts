/**
 * The eval report's content, built once and rendered twice (report.md, report.html): the
 * tables as rows of plain text cells, the notes under them, and how numbers are written.
 */
import { formatMs } from '../format.js';
import type { Interval } from './stats.js';
import type {
  CostSummary,
  EvalSummary,
  KValue,
  RateComparison,
  SummaryComparison,
  TaskSummary,
} from './summary.js';
import { PASSING_CATEGORY, TRIAL_CATEGORIES } from './types.js';

/** One task's row, the same in report.md and report.html. */
export function taskCells(t: TaskSummary): string[] {
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
    formatMs(t.durationMs.mean),
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

// ---------------------------------------------------------------------------------------
// Formatting

// Reports use the categories' own words: the same spelling as the run record and the CLI.
export const FAILURE_CATEGORIES = TRIAL_CATEGORIES.filter((c) => c !== PASSING_CATEGORY);

export function formatPercent(value: number | null, digits = 1): string {
  return value === null ? 'n/a' : `${(value * 100).toFixed(digits)}%`;
}

export function formatInterval(interval: Interval, digits = 1): string {
  return `[${(interval.low * 100).toFixed(digits)}, ${(interval.high * 100).toFixed(digits)}]%`;
}

export function formatNumber(value: number | null, digits = 1): string {
  if (value === null) return 'n/a';
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

export function formatDelta(delta: number | null): string {
  if (delta === null) return 'n/a';
  const points = (delta * 100).toFixed(1);
  return `${delta > 0 ? '+' : ''}${points} pts`;
}

export function kValues(values: KValue[]): string[] {
  return values.map((v) => formatPercent(v.value));
}

export function verdict(c: RateComparison): string {
  if (c.regression) return 'REGRESSION';
  if (c.improvement) return 'improvement';
  return '';
}

// ---------------------------------------------------------------------------------------
// Tables: built once, rendered to Markdown and to HTML

export interface Row {
  cells: string[];
  /** The row that sums up the others (rendered bold / with its own class). */
  total?: boolean;
  className?: 'regression' | 'improvement';
}

export interface Table {
  header: string[];
  rows: Row[];
}

export const rowsOf = (rows: string[][]): Row[] => rows.map((cells) => ({ cells }));

/**
 * A section a task source adds to the report (`sources/`): a heading, a table and its
 * sub-tables, and a note (above the table in report.md, below it in report.html).
 */
export interface ReportSection {
  heading: string;
  note?: string;
  table: Table;
  subsections?: Array<{ heading: string; table: Table }>;
}

/** Where a source's sections go: after the per-task pass@k tables, or last before the provenance. */
export type ReportPlace = 'after-task-tables' | 'before-provenance';

export function overallTable(summary: EvalSummary): Table {
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
        formatMs(o.durationMs.mean),
      ],
    ]),
  };
}

/** The one rule for trials the harness could not score; docs/evals.md states the same words. */
export const NOT_SCORED_RULE =
  'A trial that ends `error` (the harness or the task configuration failed, e.g. a cassette ran out), ' +
  '`infrastructure` (the engine or the model API was unavailable) or `interrupted` says nothing about the agent: ' +
  'it is counted under "not scored" with its reason and left out of the pass rate, and the eval exits non-zero.';

export const OVERALL_NOTE = `${NOT_SCORED_RULE} Overall pass@k is the mean of the per-task values.`;

export function overallKTable(summary: EvalSummary): Table {
  return {
    header: ['', ...ks(summary.n, 'k=')],
    rows: rowsOf([
      ['pass@k', ...kValues(summary.overall.passAtK)],
      ['pass^k', ...kValues(summary.overall.passHatK)],
    ]),
  };
}

export function perTaskTable(summary: EvalSummary): Table {
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

export function formatUsd(value: number | null | undefined): string {
  if (value === null || value === undefined) return '-';
  return value >= 1 ? `$${value.toFixed(2)}` : `$${value.toFixed(4)}`;
}

/** Money per task and overall; none when no trial carried a cost (records of older versions). */
export function costTable(summary: EvalSummary): Table | undefined {
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

export function costNote(summary: EvalSummary): string {
  const unpriced = summary.overall.cost?.unpriced ?? [];
  return (
    "Cost is the price table (prices/default.yaml, overridden by the catalog) times the tokens each trial used, every role included; cost per solved task is the scored trials' cost over their passes." +
    (unpriced.length > 0 ? ` No price for: ${unpriced.join(', ')} (counted as $0).` : '')
  );
}

export function taskKTable(summary: EvalSummary, symbol: 'pass@' | 'pass^'): Table {
  return {
    header: ['task', ...ks(summary.n, symbol)],
    rows: rowsOf(
      summary.tasks.map((t) => [t.taskId, ...kValues(symbol === 'pass@' ? t.passAtK : t.passHatK)]),
    ),
  };
}

export function categoriesTable(summary: EvalSummary): Table {
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
export function notScoredTable(summary: EvalSummary): Table | undefined {
  const trials = summary.tasks.flatMap((t) => t.notScoredTrials ?? []);
  if (trials.length === 0) return undefined;
  return {
    header: ['task', 'trial', 'category', 'reason'],
    rows: rowsOf(trials.map((t) => [t.taskId, String(t.trial), t.category, t.reason])),
  };
}

export function flakyLines(summary: EvalSummary): string[] {
  return summary.tasks.filter((t) => t.flaky).map((t) => `${t.taskId}: ${t.passes}/${t.scored} passed`);
}

export const NO_FLAKY = 'None: every task either always passed or always failed.';

export function provenanceTable(summary: EvalSummary): Table {
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

export function comparisonTable(c: SummaryComparison): Table {
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

export function comparisonLead(c: SummaryComparison): string {
  return (
    `Previous: ${c.previous.suiteName}, harness ${c.previous.harnessVersion}, started ${c.previous.startedAt}. ` +
    'A change is flagged only when the two 95% intervals do not overlap.'
  );
}

export const DIFFERENCES_LEAD = 'Differences between the two runs (read before trusting a delta):';

export function ks(n: number, symbol: string): string[] {
  return Array.from({ length: n }, (_, i) => `${symbol}${i + 1}`);
}

// ---------------------------------------------------------------------------------------
// Per-test results (catalog agent.testReport)

export const TESTS_HEADING = 'Per-test results';
export const TESTS_NOTE =
  'From the JUnit report of each scored trial\'s last verification. "resolved": every FAIL_TO_PASS and PASS_TO_PASS test passed (a skipped or missing one did not); the trial page has every test.';

/** One row per task whose trials had a test report; none when no trial had one. */
export function testsTable(summary: EvalSummary): Table | undefined {
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

// ---------------------------------------------------------------------------------------
// Engines (an eval over a fleet)

export const ENGINE_HEADER = [
  'engine',
  'trial runs',
  'passes',
  'infrastructure',
  'retried elsewhere',
  'mean trial time',
];

/** Rows of the engines section; none for an eval that ran on the local engine alone. */
export function engineTable(summary: EvalSummary): Table | undefined {
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
        formatMs(e.meanTrialMs),
      ]),
    ),
  };
}

export const ENGINES_NOTE =
  'A trial whose first try failed as infrastructure counts on both engines: the failed try where it ran, the retry where that ran.';
