/**
 * The viewer's pages by path, for the server and the export alike: `index.html` (runs or
 * trials), `eval.html` (an eval's report), `runs/<slug>.html` (one run). Paths are looked
 * up, never mapped onto the file system: an unknown path is simply not a page.
 */
import { html } from '../html/html.js';
import { loadRunBundle } from './bundle.js';
import { asObject, asString } from './json.js';
import { renderEvalPage, renderListPage, renderRunPage, type ListRow, type PageContext } from './pages.js';
import {
  findRunFolder,
  listRunSummaries,
  loadEvalData,
  runHref,
  type RunSummary,
  type TrialRow,
  type ViewSource,
} from './source.js';

function runRow(s: RunSummary): ListRow {
  return {
    id: s.folder,
    href: runHref(s.folder),
    task: s.task,
    result: s.outcome,
    attempts: s.attempts,
    turns: s.turns,
    tokens: s.tokens,
    durationMs: s.durationMs,
    startedAt: s.startedAt,
    note: s.problem,
  };
}

/** A Harbor trial's score for the list, or that the reward was refused; nothing for other trials. */
function rewardCell(t: TrialRow): Pick<ListRow, 'reward'> {
  if (t.rewardRefused !== undefined) return { reward: `0 (refused: ${t.rewardRefused})` };
  return t.score !== undefined ? { reward: String(t.score) } : {};
}

/** Trials in task order (as results.jsonl first names them), then trial number. */
function trialRows(trials: TrialRow[], runs: RunSummary[]): ListRow[] {
  const folders = new Map(runs.map((r) => [r.folder, r]));
  const taskOrder = new Map<string, number>();
  for (const t of trials) if (!taskOrder.has(t.taskId ?? '')) taskOrder.set(t.taskId ?? '', taskOrder.size);
  const sorted = [...trials].sort(
    (a, b) =>
      (taskOrder.get(a.taskId ?? '') ?? 0) - (taskOrder.get(b.taskId ?? '') ?? 0) ||
      (a.trial ?? 0) - (b.trial ?? 0) ||
      a.line - b.line,
  );
  const rows: ListRow[] = sorted.map((t) => {
    const run = t.runId === undefined ? undefined : folders.get(t.runId);
    return {
      id: t.runId ?? `results.jsonl line ${t.line}`,
      ...(run ? { href: runHref(run.folder) } : {}),
      task: t.taskId,
      trial: t.trial,
      result: t.category ?? t.outcome,
      attempts: t.attempts ?? run?.attempts,
      turns: t.turns,
      tokens: t.tokens,
      durationMs: t.durationMs,
      startedAt: run?.startedAt,
      note: t.error ?? (t.runId !== undefined && !run ? 'no run folder' : undefined),
      ...rewardCell(t),
    };
  });
  // Runs without a result line: an interrupted trial, or a crash before the line was written.
  const referenced = new Set(trials.map((t) => t.runId));
  for (const run of runs) {
    if (!referenced.has(run.folder))
      rows.push({ ...runRow(run), note: run.problem ?? 'no line in results.jsonl' });
  }
  return rows;
}

function suiteName(summary: unknown): string | undefined {
  return asString(asObject(asObject(summary)?.suite)?.name);
}

export interface SiteOptions {
  exported: boolean;
}

function contextOf(source: ViewSource, options: SiteOptions): PageContext {
  return { where: source.root, evalLink: source.kind === 'eval', exported: options.exported };
}

async function indexPage(source: ViewSource, query: URLSearchParams, options: SiteOptions): Promise<string> {
  const runs = await listRunSummaries(source);
  const filters = {
    ...(query.get('outcome') ? { outcome: query.get('outcome') as string } : {}),
    ...(query.get('task') ? { task: query.get('task') as string } : {}),
  };
  const ctx = contextOf(source, options);
  if (source.kind !== 'eval') {
    const rows = [...runs].reverse().map(runRow);
    const heading = source.kind === 'run' ? 'Run' : 'Runs';
    return renderListPage({ heading, rows, filters }, ctx);
  }
  const data = await loadEvalData(source);
  const name = suiteName(data.summary);
  return renderListPage(
    {
      heading: `Trials${name ? ` of ${name}` : ''}`,
      intro: html`<a href="eval.html">The eval report</a>: pass rates, intervals, pass@k, failure categories.`,
      rows: trialRows(data.trials, runs),
      filters,
    },
    ctx,
  );
}

async function evalPage(source: ViewSource, options: SiteOptions): Promise<string> {
  const data = await loadEvalData(source);
  const rows = trialRows(data.trials, await listRunSummaries(source));
  return renderEvalPage({ ...data, rows }, contextOf(source, options));
}

const RUN_PAGE = /^runs\/([^/]+)\.html$/;

/** The page at `path` (relative to the viewer's root, no leading slash), or undefined. */
export async function renderPage(
  source: ViewSource,
  path: string,
  query: URLSearchParams,
  options: SiteOptions,
): Promise<string | undefined> {
  if (path === '' || path === 'index.html') return indexPage(source, query, options);
  if (path === 'eval.html') return source.kind === 'eval' ? evalPage(source, options) : undefined;
  const match = RUN_PAGE.exec(path);
  if (!match) return undefined;
  let slug: string;
  try {
    slug = decodeURIComponent(match[1] as string);
  } catch {
    return undefined;
  }
  const folder = await findRunFolder(source, slug);
  if (folder === undefined) return undefined;
  return renderRunPage(await loadRunBundle(source, folder), contextOf(source, options));
}

/** Every page of the source, for `view --export`. */
export async function pagePaths(source: ViewSource): Promise<string[]> {
  const runs = await listRunSummaries(source);
  return [
    'index.html',
    ...(source.kind === 'eval' ? ['eval.html'] : []),
    ...runs.map((r) => decodeURIComponent(runHref(r.folder))),
  ];
}
