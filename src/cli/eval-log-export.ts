/**
 * An eval's output folder as one Inspect log (`export <folder> --format inspect`). The files
 * read are data: results and summaries are read confined to the folder named (no links,
 * size caps) and parsed against a schema, run ids are only compared with folder names, and
 * a file that is missing, linked or torn is named rather than half-exported.
 */
import { stat } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { trialResultSchema, type TrialResult } from '../evals/types.js';
import { evalToInspect, type TrialRun } from '../runs/inspect.js';
import { listRunsWithProblems } from '../runs/record.js';
import { readEvents, readTranscript } from '../runs/trajectory.js';
import { readConfined } from '../view/safe-fs.js';

const MAX_RESULTS_BYTES = 16 * 1024 * 1024;
const MAX_SUMMARY_BYTES = 8 * 1024 * 1024;
/** More trials than this is not an eval to fold into one file in memory. */
const MAX_TRIALS = 5000;

/** What the export needs of summary.json (the rest is the eval report's). */
const summarySchema = z
  .object({
    harnessVersion: z.string().max(200).optional(),
    suite: z.object({ name: z.string().max(500), file: z.string().max(4096).optional() }).loose(),
    n: z.number().int().positive().optional(),
    startedAt: z.string().max(64).optional(),
    finishedAt: z.string().max(64).optional(),
  })
  .loose();

/** A folder with a results.jsonl: an eval's output folder. */
export async function isEvalFolder(path: string): Promise<boolean> {
  const folder = await stat(path).catch(() => undefined);
  if (!folder?.isDirectory()) return false;
  return (await readConfined(path, ['results.jsonl'], 1)).status !== 'missing';
}

async function readEvalFile(root: string, name: string, maxBytes: number): Promise<string | undefined> {
  const read = await readConfined(root, [name], maxBytes);
  if (read.status === 'missing') return undefined;
  if (read.status === 'refused') throw new ConfigError(`${name} of ${root} was not read: ${read.reason}`);
  if (read.omitted > 0)
    throw new ConfigError(`${name} of ${root} is over ${maxBytes} bytes; it was not read`);
  return read.text;
}

/** An eval's output folder as one Inspect log. */
export async function exportEval(root: string): Promise<unknown> {
  const trials: TrialResult[] = [];
  let line = 0;
  for (const raw of ((await readEvalFile(root, 'results.jsonl', MAX_RESULTS_BYTES)) ?? '').split('\n')) {
    line++;
    if (!raw.trim()) continue;
    let parsed;
    try {
      parsed = trialResultSchema.safeParse(JSON.parse(raw));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success)
      throw new ConfigError(
        `results.jsonl line ${line} of ${root} is not a trial result sandbox-harness wrote`,
      );
    trials.push(parsed.data);
    if (trials.length > MAX_TRIALS) throw new ConfigError(`${root} has more than ${MAX_TRIALS} trials`);
  }
  // A resumed eval may have appended a trial twice (retried after an interruption): the last wins.
  const latest = new Map<string, TrialResult>();
  for (const trial of trials) latest.set(`${trial.taskId}\0${trial.trial}`, trial);
  const summaryText = await readEvalFile(root, 'summary.json', MAX_SUMMARY_BYTES);
  let summary: z.infer<typeof summarySchema> | undefined;
  if (summaryText !== undefined) {
    try {
      summary = summarySchema.parse(JSON.parse(summaryText));
    } catch (error) {
      throw new ConfigError(
        `summary.json of ${root} is not an eval summary (${(error as Error).message.split('\n')[0]})`,
      );
    }
  }
  // Run ids in results.jsonl are data: only compared with the ids of validated run folders.
  const { runs } = await listRunsWithProblems(resolve(root, 'runs'));
  const byId = new Map(runs.filter((r) => basename(r.dir) === r.record.id).map((r) => [r.record.id, r]));
  const loaded = new Map<string, TrialRun>();
  for (const trial of latest.values()) {
    const run = trial.runId ? byId.get(trial.runId) : undefined;
    if (!run) continue;
    const transcript = await readTranscript(run).catch(() => []);
    loaded.set(trial.runId!, { record: run.record, transcript, events: await readEvents(run) });
  }
  const n = summary?.n ?? Math.max(1, ...[...latest.values()].map((t) => t.trial + 1));
  return evalToInspect(
    {
      folder: basename(root),
      suite: summary?.suite ?? { name: basename(root) },
      n,
      ...(summary?.startedAt ? { startedAt: summary.startedAt } : {}),
      ...(summary?.finishedAt ? { finishedAt: summary.finishedAt } : {}),
      ...(summary?.harnessVersion ? { harnessVersion: summary.harnessVersion } : {}),
      finished: summary !== undefined,
    },
    [...latest.values()],
    (trial) => (trial.runId ? loaded.get(trial.runId) : undefined),
  );
}
