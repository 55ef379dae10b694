/**
 * Harbor task folders as a task source: `eval <task folder>`, `eval <folder of task folders>`,
 * or a Harbor suite (YAML with `harbor:` naming one of those, plus a folder of cassettes and
 * the eval's defaults). Each task is mapped into the suite's shape by `harbor-materialize.ts`.
 * Its section of the summary holds the rewards the verifiers wrote (the mean per task and
 * every trial's score) and what the mapping marked.
 */
import { lstat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { problemsError, validateYaml } from '../../yaml-validate.js';
import { ConfigError } from '../../errors.js';
import { formatNumber, rowsOf, type ReportSection, type Table } from '../report-tables.js';
import { suiteDefaults, suiteDefaultsSchema } from '../suite.js';
import type { EvalSummary } from '../summary.js';
import { UNSCORED_CATEGORIES, type TrialCategory, type TrialResult } from '../types.js';
import { harborTaskDirs, loadHarborTasks } from './harbor.js';
import { materializeHarbor, type HarborSource, type HarborSummary } from './harbor-materialize.js';
import type { SourceInput, TaskSource } from './task-source.js';

declare module '../summary.js' {
  interface SourceSections {
    /** An eval of Harbor task folders: the mean reward per task, and what the mapping marked. */
    harbor?: HarborEvalSummary;
  }
}

export const harborSource: TaskSource = {
  name: 'harbor',
  title: 'Harbor task folders',
  flags: ['oracle'],
  recognises: isHarbor,
  async open(input, flags) {
    const source = await loadHarborSource(input.file, input.displayPath, input.cwd);
    return {
      name: source.name,
      async make({ outDir, say }) {
        const made = await materializeHarbor(source, { outDir, oracle: flags.oracle === true, onLine: say });
        return {
          suite: made.suite,
          summarize: async (results) => ({ harbor: harborEvalSummary(made.summary, results) }),
        };
      },
    };
  },
  section: {
    place: 'after-task-tables',
    report: (summary) => (summary.harbor ? [rewardsSection(summary, summary.harbor)] : []),
    lines: (summary) => (summary.harbor ? harborLines(summary.harbor) : []),
  },
};

/**
 * A folder (a task folder or a folder of them: which, and whether it is either, is for
 * loading to say), or a YAML file with `harbor:`.
 */
async function isHarbor(input: SourceInput): Promise<boolean> {
  const st = await lstat(input.file).catch(() => undefined);
  if (st?.isDirectory()) return true;
  if (!st?.isFile() || !/\.ya?ml$/i.test(input.file)) return false;
  const text = await input.text();
  return text !== undefined && looksLikeHarborSuite(text);
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const harborSuiteSchema = z.strictObject({
  name: z.string().regex(NAME, 'expected a name of letters, digits, ".", "_" or "-"'),
  harbor: z.string().min(1, 'expected a Harbor task folder, or a folder of them'),
  /** A folder with `<task id>.json` cassettes (a recorded model per task). */
  cassettes: z.string().min(1).optional(),
  defaults: suiteDefaultsSchema,
});

/** Whether a YAML suite file is a Harbor suite (has `harbor:`), without validating it. */
export function looksLikeHarborSuite(text: string): boolean {
  return /^harbor\s*:/m.test(text);
}

function slug(dir: string): string {
  return (
    path
      .basename(dir)
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .replace(/^[^A-Za-z0-9]+/, '') || 'harbor'
  );
}

/** The Harbor tasks `file` names: a folder (of task folders), or a Harbor suite. */
export async function loadHarborSource(
  file: string,
  displayPath: string,
  cwd: string,
): Promise<HarborSource> {
  const st = await lstat(file).catch(() => undefined);
  if (st?.isDirectory()) {
    const dirs = await harborTaskDirs(file);
    if (!dirs)
      throw new ConfigError(
        `${displayPath} is a folder, but neither a Harbor task folder nor a folder of them`,
        [],
        {
          hint: 'a Harbor task folder holds task.toml, instruction.md, environment/Dockerfile and tests/test.sh',
        },
      );
    return { file, name: slug(file), tasks: await loadHarborTasks(dirs, cwd), defaults: suiteDefaults() };
  }
  const text = await readFile(file, 'utf8');
  const result = validateYaml(file, text, harborSuiteSchema, { displayPath });
  if (!result.ok) throw problemsError(result.parsed.file, result.problems);
  const raw = result.value;
  const base = path.dirname(file);
  const tasksDir = path.resolve(base, raw.harbor);
  const dirs = await harborTaskDirs(tasksDir);
  if (!dirs)
    throw new ConfigError(
      `${displayPath}: harbor: ${raw.harbor} is neither a Harbor task folder nor a folder of them (resolved to ${tasksDir})`,
    );
  return {
    file,
    name: raw.name,
    tasks: await loadHarborTasks(dirs, cwd),
    ...(raw.cassettes !== undefined ? { cassettes: path.resolve(base, raw.cassettes) } : {}),
    defaults: suiteDefaults(raw.defaults),
  };
}

/** What the summary says of a Harbor eval: the marks, the mean score per task, and every trial's score. */
export interface HarborEvalSummary extends HarborSummary {
  /** Per task: the mean score over its scored trials (a trial whose change never reached the verifier scores 0). */
  meanScore: Record<string, number>;
  /** Every trial with a result, in task and trial order (absent in summaries written before it was added). */
  trials?: HarborTrialScore[];
}

/** One trial's reward as the reports show it. */
export interface HarborTrialScore {
  taskId: string;
  trial: number;
  category: TrialCategory;
  /** Left out of the mean: the trial was not scored (`error`, `infrastructure`, `interrupted`). */
  unscored?: boolean;
  /** What the verifier scored (0 when refused); absent when the change never reached the verifier. */
  score?: number | undefined;
  /** reward.json's named values (reward.txt gives `{reward: score}`). */
  values?: Record<string, number>;
  /** Why no score could be read (then the trial scores 0). */
  refused?: string;
}

export function harborEvalSummary(
  summary: HarborSummary,
  results: ReadonlyArray<Pick<TrialResult, 'taskId' | 'trial' | 'category' | 'score' | 'reward'>>,
): HarborEvalSummary {
  const scores = new Map<string, number[]>();
  for (const r of results) {
    if (UNSCORED_CATEGORIES.has(r.category)) continue;
    const list = scores.get(r.taskId) ?? [];
    list.push(r.score ?? 0);
    scores.set(r.taskId, list);
  }
  const meanScore: Record<string, number> = {};
  for (const [id, list] of scores) meanScore[id] = list.reduce((a, b) => a + b, 0) / list.length;
  const order = [...new Set(results.map((r) => r.taskId))];
  const trials = [...results]
    .sort((a, b) => order.indexOf(a.taskId) - order.indexOf(b.taskId) || a.trial - b.trial)
    .map((r): HarborTrialScore => ({
      taskId: r.taskId,
      trial: r.trial,
      category: r.category,
      ...(UNSCORED_CATEGORIES.has(r.category) ? { unscored: true } : {}),
      score: r.score,
      ...(r.reward?.values ? { values: { ...r.reward.values } } : {}),
      ...(r.reward?.refused !== undefined ? { refused: r.reward.refused } : {}),
    }));
  return { ...summary, meanScore, trials };
}

/** The lines `eval` prints for it (the terminal printer spells out control characters). */
export function harborLines(summary: HarborEvalSummary): string[] {
  const lines = Object.entries(summary.meanScore).map(
    ([id, score]) => `  ${id.padEnd(24)} mean reward ${score.toFixed(2)}`,
  );
  const refused = (summary.trials ?? []).flatMap((t) =>
    t.refused !== undefined ? [`  ${t.taskId}#${t.trial}: no score (${t.refused})`] : [],
  );
  const marked = Object.entries(summary.marks).flatMap(([id, marks]) => marks.map((m) => `  ${id}: ${m}`));
  return [
    ...(lines.length > 0
      ? [`Harbor rewards${summary.oracle ? ' (oracle: solution/solve.sh)' : ''}:`, ...lines, ...refused]
      : []),
    ...(marked.length > 0 ? ['marked (run, but not as Harbor would):', ...marked] : []),
  ];
}

// ---------------------------------------------------------------------------------------
// The rewards in the report (the verifier's reward.txt / reward.json)

const REWARDS_NOTE =
  "The score each trial's verifier wrote (tests/test.sh: reward.txt, or reward.json's \"reward\" among its named values), read back as hostile data; a trial passes with full marks (1). Harbor's rule: the verifier runs on every trial's workspace, changed or not, so an untouched environment scores what its tests give. A multi-step task scores its steps' mean (or its last step's, multi_step_reward_strategy). The mean is over scored trials: a change that never reached the verifier (the gate refused it, the sandbox broke), or a reward that was refused, scores 0.";

function rewardsSection(summary: EvalSummary, harbor: HarborEvalSummary): ReportSection {
  const trials = rewardTrialsTable(harbor);
  return {
    heading: 'Rewards',
    note: REWARDS_NOTE,
    table: rewardsTable(summary, harbor),
    ...(trials ? { subsections: [{ heading: 'Reward per trial', table: trials }] } : {}),
  };
}

function rewardNumber(value: unknown): string {
  return typeof value === 'number' ? formatNumber(value, 2) : '-';
}

/** One row per task of a Harbor eval: its mean reward and how its trials scored. */
function rewardsTable(summary: EvalSummary, harbor: HarborEvalSummary): Table {
  const trials = harbor.trials;
  const ids = [...new Set([...summary.tasks.map((t) => t.taskId), ...Object.keys(harbor.meanScore)])];
  return {
    header: ['task', 'mean reward', 'scored trials', 'full marks', 'reward refused'],
    rows: rowsOf(
      ids.map((id) => {
        const mine = trials?.filter((t) => t.taskId === id && !t.unscored);
        const count = (keep: (t: NonNullable<typeof mine>[number]) => boolean): string =>
          mine ? String(mine.filter(keep).length) : '-';
        return [
          id,
          id in harbor.meanScore ? rewardNumber(harbor.meanScore[id]) : 'n/a',
          count(() => true),
          count((t) => typeof t.score === 'number' && t.score >= 1),
          count((t) => t.refused !== undefined),
        ];
      }),
    ),
  };
}

/** Every trial's score, its named values, or why it has none; none for a summary written before trials were kept. */
function rewardTrialsTable(harbor: HarborEvalSummary): Table | undefined {
  const trials = harbor.trials;
  if (!trials || trials.length === 0) return undefined;
  return {
    header: ['task', 'trial', 'category', 'score', 'named values', 'no score because'],
    rows: rowsOf(
      trials.map((t) => [
        t.taskId,
        String(t.trial),
        t.category,
        rewardNumber(t.score),
        t.values
          ? Object.entries(t.values)
              .map(([name, value]) => `${name}=${rewardNumber(value)}`)
              .join(', ')
          : '-',
        t.refused !== undefined
          ? `refused: ${t.refused}`
          : t.unscored
            ? `not scored (${t.category})`
            : t.score === undefined
              ? 'the change never reached the verifier (counts 0)'
              : '',
      ]),
    ),
  };
}
