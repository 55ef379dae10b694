/**
 * What `view` was pointed at, and the lists it shows: a repo (its `.sandbox-harness/runs/`),
 * a folder of runs, one run folder, or an eval's output folder (`results.jsonl`,
 * `summary.json`, `runs/<run-id>/`). The folder the user names is the boundary: everything
 * below it is read through `safe-fs.ts`, and ids found in records are only ever compared
 * with folder names, never joined into paths.
 */
import { createHash } from 'node:crypto';
import { realpath, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { UsageError } from '../errors.js';
import { HARNESS_DIR } from '../runs/record.js';
import { asNumber, asObject, asString, parseJson, type JsonObject } from './json.js';
import { entryKind, listFolders, readConfined } from './safe-fs.js';

export const LIMITS = {
  runJson: 1024 * 1024,
  transcript: 32 * 1024 * 1024,
  events: 8 * 1024 * 1024,
  text: 1024 * 1024,
  results: 16 * 1024 * 1024,
  summary: 8 * 1024 * 1024,
  /** Run folders listed or exported; more is not a run history but an attack on the viewer. */
  runs: 5000,
};

export interface ViewSource {
  kind: 'runs' | 'run' | 'eval';
  /** The folder the user named, resolved: nothing outside it is read. */
  root: string;
  /** From `root` to the folder that holds run folders; `null` when `root` is one run. */
  runsPath: string[] | null;
}

const RUNS_HINT =
  'Give a repo (with .sandbox-harness/runs/), a folder of runs, one run folder (it has run.json) or an ' +
  "eval's output folder (it has results.jsonl).";

export async function openViewSource(path: string): Promise<ViewSource> {
  const root = await realpath(path).catch(() => undefined);
  if (root === undefined) throw new UsageError(`view: ${path} does not exist`, { hint: RUNS_HINT });
  if (!(await stat(root)).isDirectory()) {
    throw new UsageError(`view: ${path} is not a folder`, { hint: RUNS_HINT });
  }
  const has = async (...parts: string[]) => (await entryKind(root, parts)) !== 'missing';
  if ((await has('results.jsonl')) || (await has('summary.json'))) {
    return { kind: 'eval', root, runsPath: ['runs'] };
  }
  if (await has('run.json')) return { kind: 'run', root, runsPath: null };
  if ((await entryKind(root, [HARNESS_DIR, 'runs'])) === 'folder') {
    return { kind: 'runs', root, runsPath: [HARNESS_DIR, 'runs'] };
  }
  for (const folder of await listFolders(root, [])) {
    if ((await entryKind(root, [folder, 'run.json'])) !== 'missing')
      return { kind: 'runs', root, runsPath: [] };
  }
  throw new UsageError(`view: no run records in ${path}`, { hint: RUNS_HINT });
}

/** Absolute folder holding the run folders (what `--runs-dir` wants). */
export function runsDirOf(source: ViewSource): string {
  return source.runsPath === null ? dirname(source.root) : join(source.root, ...source.runsPath);
}

/** Path components of a run folder below `source.root`. */
export function runParts(source: ViewSource, folder: string): string[] {
  return source.runsPath === null ? [] : [...source.runsPath, folder];
}

const SAFE_SLUG = /^[A-Za-z0-9][A-Za-z0-9._-]{0,150}$/;
const HASHED_SLUG = /^run-[0-9a-f]{16}$/;

/**
 * A run's page name: its folder name when that is plain, else a hash of it, so a folder
 * called `javascript:alert(1)` or `../x` never becomes part of a link or a file name.
 */
export function slugOf(folder: string): string {
  // A plain name that looks like a hashed one is hashed too: otherwise a folder named after
  // another folder's hash would get the same page (and `view --export` would fail whole).
  return SAFE_SLUG.test(folder) && !HASHED_SLUG.test(folder)
    ? folder
    : `run-${createHash('sha256').update(folder).digest('hex').slice(0, 16)}`;
}

/** Where a run's page is, relative to the index page. */
export function runHref(folder: string): string {
  return `runs/${encodeURIComponent(slugOf(folder))}.html`;
}

export interface RunSummary {
  /** The run folder's name on disk. */
  folder: string;
  slug: string;
  /** What run.json calls the run (may differ from the folder name: it is data). */
  id?: string | undefined;
  task?: string | undefined;
  title?: string | undefined;
  outcome?: string | undefined;
  attempts?: number | undefined;
  turns?: number | undefined;
  tokens?: number | undefined;
  durationMs?: number | undefined;
  startedAt?: string | undefined;
  /** Why run.json could not be read, when it could not. */
  problem?: string | undefined;
}

export function summariseRecord(folder: string, record: JsonObject): RunSummary {
  const ticket = asObject(record.ticket);
  const tokens = asObject(record.tokens);
  const input = asNumber(tokens?.input);
  const output = asNumber(tokens?.output);
  const attempts = record.attempts;
  return {
    folder,
    slug: slugOf(folder),
    id: asString(record.id),
    task: asString(ticket?.id),
    title: asString(ticket?.title),
    outcome: asString(record.outcome),
    attempts: Array.isArray(attempts) ? attempts.length : undefined,
    turns: asNumber(record.turns),
    tokens: input === undefined && output === undefined ? undefined : (input ?? 0) + (output ?? 0),
    durationMs: asNumber(record.durationMs),
    startedAt: asString(record.startedAt),
  };
}

/** run.json of one run folder, parsed, or why not. */
export async function readRunRecord(
  source: ViewSource,
  folder: string,
): Promise<{ record: JsonObject } | { problem: string }> {
  const read = await readConfined(source.root, [...runParts(source, folder), 'run.json'], LIMITS.runJson);
  if (read.status === 'missing') return { problem: 'run.json is missing' };
  if (read.status === 'refused') return { problem: `run.json not read: ${read.reason}` };
  if (read.omitted > 0) return { problem: `run.json is over ${LIMITS.runJson} bytes` };
  const parsed = parseJson(read.text);
  if (!parsed.ok) return { problem: `run.json is not valid JSON: ${parsed.error}` };
  const record = asObject(parsed.value);
  return record ? { record } : { problem: 'run.json is not a JSON object' };
}

/** The run folders: those with a run.json entry (readable or not, so tampering shows). */
export async function runFolders(source: ViewSource): Promise<string[]> {
  if (source.runsPath === null) return [basename(source.root)];
  const folders: string[] = [];
  for (const folder of await listFolders(source.root, source.runsPath)) {
    if ((await entryKind(source.root, [...source.runsPath, folder, 'run.json'])) !== 'missing') {
      folders.push(folder);
      if (folders.length >= LIMITS.runs) break;
    }
  }
  return folders;
}

export async function listRunSummaries(source: ViewSource): Promise<RunSummary[]> {
  const summaries: RunSummary[] = [];
  for (const folder of await runFolders(source)) {
    const read = await readRunRecord(source, folder);
    summaries.push(
      'record' in read
        ? summariseRecord(folder, read.record)
        : { folder, slug: slugOf(folder), problem: read.problem },
    );
  }
  return summaries;
}

export async function findRunFolder(source: ViewSource, slug: string): Promise<string | undefined> {
  return (await runFolders(source)).find((folder) => slugOf(folder) === slug);
}

// ---------------------------------------------------------------------------------------
// Evals

export interface TrialRow {
  /** 1-based line of results.jsonl. */
  line: number;
  taskId?: string | undefined;
  trial?: number | undefined;
  outcome?: string | undefined;
  category?: string | undefined;
  attempts?: number | undefined;
  turns?: number | undefined;
  tokens?: number | undefined;
  durationMs?: number | undefined;
  runId?: string | undefined;
  error?: string | undefined;
  /** The verifier's score (Harbor tasks), and why none could be read. */
  score?: number | undefined;
  rewardRefused?: string | undefined;
}

export interface EvalData {
  trials: TrialRow[];
  /** summary.json as parsed (rendered by the eval report's own code, which escapes it). */
  summary?: unknown;
  comparison?: unknown;
  problems: string[];
}

async function readJsonFile(source: ViewSource, name: string, problems: string[]): Promise<unknown> {
  const read = await readConfined(source.root, [name], LIMITS.summary);
  if (read.status === 'missing') return undefined;
  if (read.status === 'refused') {
    problems.push(`${name} not read: ${read.reason}`);
    return undefined;
  }
  const parsed = read.omitted > 0 ? { ok: false as const, error: 'too large' } : parseJson(read.text);
  if (!parsed.ok) {
    problems.push(`${name} could not be read: ${parsed.error}`);
    return undefined;
  }
  return parsed.value;
}

export async function loadEvalData(source: ViewSource): Promise<EvalData> {
  const problems: string[] = [];
  const trials: TrialRow[] = [];
  const read = await readConfined(source.root, ['results.jsonl'], LIMITS.results);
  if (read.status === 'refused') problems.push(`results.jsonl not read: ${read.reason}`);
  if (read.status === 'ok') {
    if (read.omitted > 0)
      problems.push(`results.jsonl is over ${LIMITS.results} bytes: only its head and tail are shown`);
    let line = 0;
    for (const raw of read.text.split('\n')) {
      line++;
      if (raw.trim() === '') continue;
      const parsed = parseJson(raw);
      const r = parsed.ok ? asObject(parsed.value) : undefined;
      if (!r) {
        problems.push(`results.jsonl line ${line} is not a JSON object`);
        continue;
      }
      const input = asNumber(r.inputTokens);
      const output = asNumber(r.outputTokens);
      trials.push({
        line,
        taskId: asString(r.taskId),
        trial: asNumber(r.trial),
        outcome: asString(r.outcome),
        category: asString(r.category),
        attempts: asNumber(r.attemptsUsed),
        turns: asNumber(r.turns),
        tokens: input === undefined && output === undefined ? undefined : (input ?? 0) + (output ?? 0),
        durationMs: asNumber(r.durationMs),
        runId: asString(r.runId),
        error: asString(r.error),
        score: asNumber(r.score),
        rewardRefused: asString(asObject(r.reward)?.refused),
      });
    }
  }
  const summary = await readJsonFile(source, 'summary.json', problems);
  const comparison = await readJsonFile(source, 'comparison.json', problems);
  return { trials, summary, comparison, problems };
}
