/**
 * Turns trial results into the numbers people compare: pass rates with their uncertainty,
 * pass@k / pass^k, cost, failure causes, and enough provenance (harness version, images,
 * models, catalog hashes) to tell whether two summaries are comparable at all.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  intervalsOverlap,
  mean,
  median,
  passAtK as passAtKOf,
  passHatK as passHatKOf,
  wilsonInterval,
  type Interval,
} from './stats.js';
import type { PreviousSummary } from './summary-file.js';
import {
  PASSING_CATEGORY,
  TRIAL_CATEGORIES,
  UNSCORED_CATEGORIES,
  type TrialCategory,
  type TrialResult,
} from './types.js';

export interface Distribution {
  mean: number | null;
  median: number | null;
  total: number;
}

/** A value for one k; `null` when fewer than k scored trials exist, so it cannot be estimated. */
export interface KValue {
  k: number;
  value: number | null;
}

export type CategoryCounts = Record<TrialCategory, number>;

export interface RateSummary {
  /** Trials in the denominator: everything except infrastructure failures, errors and interruptions. */
  scored: number;
  passes: number;
  /** `null` when nothing was scored. */
  passRate: number | null;
  /** Wilson 95%; [0, 1] when nothing was scored. */
  interval: Interval;
}

/** What task and overall summaries both report. */
interface TrialCounts extends RateSummary {
  /** Trials the eval asked for (n per task). */
  planned: number;
  /** Trials with a result, scored or not. */
  recorded: number;
  failures: number;
  infrastructure: number;
  /** Trials that ended with an error of the harness or the task's configuration. */
  errors: number;
  interrupted: number;
  /** Trials whose first try hit an infrastructure failure and were run once more. */
  infraRetried: number;
  /**
   * Trials with a result that could not be scored (`error`, `infrastructure`, `interrupted`),
   * each with its reason: shown in every table, never silently missing from a pass rate.
   */
  notScored: number;
  notScoredTrials: NotScoredTrial[];
  turns: Distribution;
  inputTokens: Distribution;
  outputTokens: Distribution;
  durationMs: Distribution;
  categories: CategoryCounts;
  /** With review on: how often the checker approved, next to the tests' verdict. */
  review?: ReviewSummary;
  /** Money, when the trials' records carry a cost (every trial, scored or not, cost it). */
  cost?: CostSummary;
}

export interface CostSummary {
  /** US dollars, over every recorded trial (unscored ones spent money too). */
  totalUsd: number;
  perTrial: Distribution;
  /** Total cost over the scored trials divided by their passes; `null` with no pass. */
  perSolvedUsd: number | null;
  /**
   * pass@1 when a trial counts only if it passed within `budgetUsd` (the eval's
   * `--cost-limit`): comparable across agents that spend differently.
   */
  atBudget?: { budgetUsd: number; passRate: number | null };
  /** Models that had no price: their calls were counted as 0. */
  unpriced?: string[];
}

function costSummary(
  all: readonly TrialResult[],
  scored: readonly TrialResult[],
  budgetUsd: number | undefined,
): { cost?: CostSummary } {
  const priced = all.filter((r) => r.costUsd !== undefined);
  if (priced.length === 0) return {};
  const costs = priced.map((r) => r.costUsd ?? 0);
  const totalUsd = costs.reduce((a, b) => a + b, 0);
  const scoredCost = scored.reduce((a, r) => a + (r.costUsd ?? 0), 0);
  const passes = scored.filter((r) => r.category === PASSING_CATEGORY).length;
  const unpriced = distinct(all.flatMap((r) => r.unpriced ?? []));
  return {
    cost: {
      totalUsd,
      perTrial: distribution(costs),
      perSolvedUsd: passes === 0 ? null : scoredCost / passes,
      ...(budgetUsd !== undefined
        ? {
            atBudget: {
              budgetUsd,
              passRate:
                scored.length === 0
                  ? null
                  : scored.filter((r) => r.category === PASSING_CATEGORY && (r.costUsd ?? 0) <= budgetUsd)
                      .length / scored.length,
            },
          }
        : {}),
      ...(unpriced.length > 0 ? { unpriced } : {}),
    },
  };
}

/** A trial left out of the pass rate, and why (the reason capped, never the whole log). */
export interface NotScoredTrial {
  taskId: string;
  trial: number;
  category: TrialCategory;
  reason: string;
}

/** Longest reason kept in a summary; the whole text stays in the trial's run record. */
export const NOT_SCORED_REASON_MAX = 300;

function notScoredOf(results: readonly TrialResult[]): {
  notScored: number;
  notScoredTrials: NotScoredTrial[];
} {
  const trials = results
    .filter((r) => UNSCORED_CATEGORIES.has(r.category))
    .map((r) => ({ taskId: r.taskId, trial: r.trial, category: r.category, reason: capReason(r.error) }));
  return { notScored: trials.length, notScoredTrials: trials };
}

function capReason(error: string | undefined): string {
  const text = (error ?? '').replace(/\s+/g, ' ').trim();
  if (text === '') return 'no reason recorded';
  return text.length > NOT_SCORED_REASON_MAX ? `${text.slice(0, NOT_SCORED_REASON_MAX - 1)}…` : text;
}

export interface ReviewSummary {
  /** Scored trials a checker reviewed. */
  reviewed: number;
  approved: number;
  /** `null` when nothing was reviewed. */
  approvalRate: number | null;
  /** Trials whose change passed the tests in verification. */
  testsPassed: number;
  /** Where the two verdicts disagree: tests passed, the checker did not approve. */
  testsPassedNotApproved: number;
}

function withReview(results: readonly TrialResult[]): { review?: ReviewSummary } {
  const review = reviewSummary(results);
  return review ? { review } : {};
}

function reviewSummary(results: readonly TrialResult[]): ReviewSummary | undefined {
  const reviewed = results.filter((r) => r.approved !== undefined);
  if (reviewed.length === 0) return undefined;
  const approved = reviewed.filter((r) => r.approved === true).length;
  return {
    reviewed: reviewed.length,
    approved,
    approvalRate: approved / reviewed.length,
    testsPassed: results.filter((r) => r.verified === true).length,
    testsPassedNotApproved: reviewed.filter((r) => r.verified === true && r.approved === false).length,
  };
}

export interface TaskSummary extends TrialCounts {
  taskId: string;
  /** k = 1..n. */
  passAtK: KValue[];
  passHatK: KValue[];
  /** Some scored trials passed and some failed. */
  flaky: boolean;
  imageIds: string[];
  catalogHashes: string[];
  /** Per-test results, when the task's trials had a test report. */
  tests?: TaskTests;
}

/** What the test reports of a task's scored trials said. */
export interface TaskTests {
  /** Scored trials whose last verification had a report (read or refused). */
  trials: number;
  refused: number;
  /** Trials judged by named tests (FAIL_TO_PASS/PASS_TO_PASS), and how many resolved. */
  named: number;
  resolved: number;
  /** The tests that failed most often (named ones that did not pass, else failed ones), most first. */
  failing: { id: string; trials: number }[];
}

export interface OverallSummary extends TrialCounts {
  tasks: number;
  /**
   * Mean over tasks of each task's pass@k (Chen et al. average per problem). Tasks with
   * nothing scored are left out; `null` when some other task has fewer than k scored trials,
   * because averaging over different task sets per k would make the curve meaningless.
   */
  passAtK: KValue[];
  passHatK: KValue[];
  flakyTasks: string[];
}

/**
 * What one engine did: trial runs there (a retried trial's failed first try counts where it
 * ran), passes, infrastructure failures and the mean time of a run there.
 */
export interface EngineSummary {
  engine: string;
  trials: number;
  passes: number;
  infrastructure: number;
  /** Trials whose first try failed there and were retried on another engine. */
  retriedElsewhere: number;
  meanTrialMs: number | null;
}

export interface EvalSummary extends SourceSections {
  schemaVersion: 1;
  harnessVersion: string;
  suite: { name: string; file: string; sha256: string };
  n: number;
  startedAt: string;
  finishedAt: string;
  wallTimeMs: number;
  providers: string[];
  models: string[];
  /** The OCI runtimes the trials ran under (absent in summaries written before runtimes were recorded). */
  runtimes?: string[];
  imageIds: string[];
  /** Per task, every catalog hash its trials ran against (more than one means it changed mid-eval). */
  catalogHashes: Record<string, string[]>;
  tasks: TaskSummary[];
  overall: OverallSummary;
  /** Per engine, in the order engines first appear in the results; results without one as `unknown`. */
  engines: EngineSummary[];
}

/**
 * What a task source adds to the summary, each under its own key (`instances`, `harbor`, ...):
 * every source declares its own (`declare module` in its file in `sources/`), so the summary
 * names none. Written last in summary.json, after what every eval has.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by the sources' declarations
export interface SourceSections {}

export interface SummaryMeta {
  suite: { name: string; file: string; sha256: string; tasks: ReadonlyArray<{ id: string }> };
  n: number;
  startedAt: string;
  finishedAt: string;
  harnessVersion: string;
  /** The eval's per-trial cost limit, for pass@1 at that budget. */
  costLimitUsd?: number | undefined;
}

function emptyCategories(): CategoryCounts {
  return Object.fromEntries(TRIAL_CATEGORIES.map((c) => [c, 0])) as CategoryCounts;
}

function distribution(values: number[]): Distribution {
  return { mean: mean(values), median: median(values), total: values.reduce((a, b) => a + b, 0) };
}

function distinct(values: Array<string | undefined>): string[] {
  return [...new Set(values.filter((v): v is string => v !== undefined && v !== ''))].sort();
}

function rate(scored: number, passes: number): RateSummary {
  return {
    scored,
    passes,
    passRate: scored === 0 ? null : passes / scored,
    interval: wilsonInterval(passes, scored),
  };
}

function curve(
  n: number,
  scored: number,
  passes: number,
  fn: (n: number, c: number, k: number) => number,
): KValue[] {
  return Array.from({ length: n }, (_, i) => {
    const k = i + 1;
    return { k, value: k <= scored ? fn(scored, passes, k) : null };
  });
}

function summarizeTask(
  taskId: string,
  n: number,
  results: TrialResult[],
  costLimitUsd?: number,
): TaskSummary {
  const scoredResults = results.filter((r) => !UNSCORED_CATEGORIES.has(r.category));
  const scored = scoredResults.length;
  const passes = scoredResults.filter((r) => r.category === PASSING_CATEGORY).length;
  const categories = emptyCategories();
  for (const r of results) categories[r.category]++;
  return {
    taskId,
    planned: n,
    recorded: results.length,
    ...rate(scored, passes),
    failures: scored - passes,
    infrastructure: categories.infrastructure,
    errors: categories.error,
    interrupted: categories.interrupted,
    infraRetried: results.filter((r) => r.infraRetried === true).length,
    ...notScoredOf(results),
    passAtK: curve(n, scored, passes, passAtKOf),
    passHatK: curve(n, scored, passes, passHatKOf),
    // Cost of unscored trials says more about the failure than about the agent; keep it out.
    turns: distribution(scoredResults.map((r) => r.turns)),
    inputTokens: distribution(scoredResults.map((r) => r.inputTokens)),
    outputTokens: distribution(scoredResults.map((r) => r.outputTokens)),
    durationMs: distribution(scoredResults.map((r) => r.durationMs)),
    categories,
    flaky: passes > 0 && passes < scored,
    ...withReview(scoredResults),
    ...costSummary(results, scoredResults, costLimitUsd),
    imageIds: distinct(results.map((r) => r.imageId)),
    catalogHashes: distinct(results.map((r) => r.catalogHash)),
    ...withTests(scoredResults),
  };
}

const FAILING_SHOWN = 10;

function withTests(results: readonly TrialResult[]): { tests?: TaskTests } {
  const reported = results.flatMap((r) => (r.tests ? [r.tests] : []));
  if (reported.length === 0) return {};
  const counts = new Map<string, number>();
  for (const t of reported) for (const id of new Set(t.failing)) counts.set(id, (counts.get(id) ?? 0) + 1);
  return {
    tests: {
      trials: reported.length,
      refused: reported.filter((t) => t.refused !== undefined).length,
      named: reported.filter((t) => t.verdict !== undefined).length,
      resolved: reported.filter((t) => t.verdict === 'resolved').length,
      failing: [...counts]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .slice(0, FAILING_SHOWN)
        .map(([id, trials]) => ({ id, trials })),
    },
  };
}

function averageCurve(tasks: TaskSummary[], n: number, pick: (t: TaskSummary) => KValue[]): KValue[] {
  const measured = tasks.filter((t) => t.scored > 0);
  return Array.from({ length: n }, (_, i) => {
    const values = measured.map((t) => pick(t)[i]?.value ?? null);
    const complete = values.length > 0 && values.every((v): v is number => v !== null);
    return { k: i + 1, value: complete ? (mean(values as number[]) as number) : null };
  });
}

export function summarize(results: readonly TrialResult[], meta: SummaryMeta): EvalSummary {
  const byTask = new Map<string, TrialResult[]>();
  for (const t of meta.suite.tasks) byTask.set(t.id, []);
  // Results for tasks the suite no longer lists are still shown rather than silently dropped.
  for (const r of results) {
    const list = byTask.get(r.taskId);
    if (list) list.push(r);
    else byTask.set(r.taskId, [r]);
  }
  const tasks = [...byTask.entries()].map(([id, list]) => summarizeTask(id, meta.n, list, meta.costLimitUsd));

  const scoredAll = results.filter((r) => !UNSCORED_CATEGORIES.has(r.category));
  const categories = emptyCategories();
  for (const r of results) categories[r.category]++;
  const scored = scoredAll.length;
  const passes = scoredAll.filter((r) => r.category === PASSING_CATEGORY).length;

  const overall: OverallSummary = {
    tasks: tasks.length,
    planned: tasks.length * meta.n,
    recorded: results.length,
    ...rate(scored, passes),
    failures: scored - passes,
    infrastructure: categories.infrastructure,
    errors: categories.error,
    interrupted: categories.interrupted,
    infraRetried: results.filter((r) => r.infraRetried === true).length,
    ...notScoredOf(results),
    passAtK: averageCurve(tasks, meta.n, (t) => t.passAtK),
    passHatK: averageCurve(tasks, meta.n, (t) => t.passHatK),
    turns: distribution(scoredAll.map((r) => r.turns)),
    inputTokens: distribution(scoredAll.map((r) => r.inputTokens)),
    outputTokens: distribution(scoredAll.map((r) => r.outputTokens)),
    durationMs: distribution(scoredAll.map((r) => r.durationMs)),
    categories,
    flakyTasks: tasks.filter((t) => t.flaky).map((t) => t.taskId),
    ...withReview(scoredAll),
    ...costSummary(results, scoredAll, meta.costLimitUsd),
  };

  return {
    schemaVersion: 1,
    harnessVersion: meta.harnessVersion,
    suite: { name: meta.suite.name, file: meta.suite.file, sha256: meta.suite.sha256 },
    n: meta.n,
    startedAt: meta.startedAt,
    finishedAt: meta.finishedAt,
    wallTimeMs: Math.max(0, Date.parse(meta.finishedAt) - Date.parse(meta.startedAt)) || 0,
    providers: distinct(results.map((r) => r.provider)),
    models: distinct(results.map((r) => r.model)),
    runtimes: distinct(results.map((r) => r.runtime)),
    imageIds: distinct(results.map((r) => r.imageId)),
    catalogHashes: Object.fromEntries(tasks.map((t) => [t.taskId, t.catalogHashes])),
    tasks,
    overall,
    engines: summarizeEngines(results),
  };
}

export function summarizeEngines(results: readonly TrialResult[]): EngineSummary[] {
  const byEngine = new Map<string, EngineSummary & { totalMs: number }>();
  const add = (engine: string | undefined, category: TrialCategory, durationMs: number, retried: boolean) => {
    const name = engine ?? 'unknown';
    let e = byEngine.get(name);
    if (!e) {
      e = {
        engine: name,
        trials: 0,
        passes: 0,
        infrastructure: 0,
        retriedElsewhere: 0,
        meanTrialMs: null,
        totalMs: 0,
      };
      byEngine.set(name, e);
    }
    e.trials++;
    e.totalMs += durationMs;
    if (category === PASSING_CATEGORY) e.passes++;
    if (category === 'infrastructure') e.infrastructure++;
    if (retried) e.retriedElsewhere++;
  };
  for (const r of results) {
    if (r.firstTry)
      add(r.firstTry.engine, r.firstTry.category, r.firstTry.durationMs, r.firstTry.engine !== r.engine);
    add(r.engine, r.category, r.durationMs, false);
  }
  return [...byEngine.values()].map(({ totalMs, ...e }) => ({
    ...e,
    meanTrialMs: e.trials > 0 ? Math.round(totalMs / e.trials) : null,
  }));
}

// ---------------------------------------------------------------------------------------

export interface RateComparison {
  /** `null` when the task is absent from that summary. */
  current: RateSummary | null;
  previous: RateSummary | null;
  /** current - previous pass rate; `null` unless both were measured. */
  delta: number | null;
  /** The rate went down and the two 95% intervals do not overlap. */
  regression: boolean;
  /** The rate went up and the two 95% intervals do not overlap. */
  improvement: boolean;
}

export interface TaskComparison extends RateComparison {
  taskId: string;
  status: 'both' | 'added' | 'removed';
}

export interface SummaryComparison {
  previous: { suiteName: string; suiteSha256: string; harnessVersion: string; startedAt: string };
  tasks: TaskComparison[];
  overall: RateComparison;
  regressions: string[];
  improvements: string[];
  /**
   * What differs between the two runs besides the agent's luck (harness version, models,
   * images, catalogs, suite); a delta means little until these are read.
   */
  differences: string[];
}

function rateOf(s: RateSummary): RateSummary {
  return { scored: s.scored, passes: s.passes, passRate: s.passRate, interval: { ...s.interval } };
}

function compareRates(current: RateSummary | null, previous: RateSummary | null): RateComparison {
  const both =
    current !== null && previous !== null && current.passRate !== null && previous.passRate !== null;
  const delta = both ? (current.passRate as number) - (previous.passRate as number) : null;
  const separated = both && !intervalsOverlap(current.interval, previous.interval);
  return {
    current: current && rateOf(current),
    previous: previous && rateOf(previous),
    delta,
    regression: separated && delta !== null && delta < 0,
    improvement: separated && delta !== null && delta > 0,
  };
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function listDifference(label: string, current: readonly string[], previous: readonly string[]): string[] {
  if (sameList([...current].sort(), [...previous].sort())) return [];
  const show = (l: readonly string[]): string => (l.length === 0 ? '(none recorded)' : l.join(', '));
  return [`${label}: ${show(previous)} -> ${show(current)}`];
}

export function compareSummaries(current: EvalSummary, previous: PreviousSummary): SummaryComparison {
  const previousTasks = new Map(previous.tasks.map((t) => [t.taskId, t]));
  const currentIds = new Set(current.tasks.map((t) => t.taskId));
  const tasks: TaskComparison[] = current.tasks.map((t) => {
    const before = previousTasks.get(t.taskId);
    return { taskId: t.taskId, status: before ? 'both' : 'added', ...compareRates(t, before ?? null) };
  });
  for (const t of previous.tasks) {
    if (!currentIds.has(t.taskId))
      tasks.push({ taskId: t.taskId, status: 'removed', ...compareRates(null, t) });
  }

  const differences: string[] = [];
  if (current.harnessVersion !== previous.harnessVersion) {
    differences.push(`harness version: ${previous.harnessVersion} -> ${current.harnessVersion}`);
  }
  if (current.suite.sha256 !== previous.suite.sha256) differences.push('suite file changed');
  if (current.n !== previous.n) differences.push(`n: ${previous.n} -> ${current.n}`);
  differences.push(...listDifference('providers', current.providers, previous.providers));
  differences.push(...listDifference('models', current.models, previous.models));
  if (current.runtimes && previous.runtimes)
    differences.push(...listDifference('runtimes', current.runtimes, previous.runtimes));
  differences.push(...listDifference('image ids', current.imageIds, previous.imageIds));
  for (const t of current.tasks) {
    const before = previous.catalogHashes[t.taskId];
    if (before) differences.push(...listDifference(`catalog of ${t.taskId}`, t.catalogHashes, before));
  }

  return {
    previous: {
      suiteName: previous.suite.name,
      suiteSha256: previous.suite.sha256,
      harnessVersion: previous.harnessVersion,
      startedAt: previous.startedAt,
    },
    tasks,
    overall: compareRates(current.overall, previous.overall),
    regressions: tasks.filter((t) => t.regression).map((t) => t.taskId),
    improvements: tasks.filter((t) => t.improvement).map((t) => t.taskId),
    differences,
  };
}

// ---------------------------------------------------------------------------------------

/**
 * The harness's own version, from its package.json. Found by walking up from this module
 * because the source tree (src/evals) and the build (dist/evals) sit at different depths.
 */
export async function readHarnessVersion(
  from: string = path.dirname(fileURLToPath(import.meta.url)),
): Promise<string> {
  let dir = from;
  for (;;) {
    try {
      const pkg = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (pkg.name === 'sandbox-harness' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // No (readable) package.json here; keep walking up.
    }
    const parent = path.dirname(dir);
    if (parent === dir) return 'unknown';
    dir = parent;
  }
}
