/**
 * `eval merge <out>`: the summary, the reports, `results.jsonl` and the viewer of a sharded
 * eval, once its shards are done, made by the same code an unsharded eval ends with, from the
 * same results: so they say what an unsharded run of those trials says (times, durations and
 * run ids aside). The plan comes from the folder's lock; the suite is opened again (where the
 * lock says, or `--suite`) because its task source owns a section of the summary, and it must
 * still be the suite the lock names. A trial missing (a shard not run, crashed, or still
 * running) is named; the merge writes nothing then, unless `partial`: then the reports are
 * of the trials there are (the CLI's exit code still says trials are missing).
 */
import { join } from 'node:path';
import { ConfigError, UsageError } from '../errors.js';
import { readEvalLock, type EvalLock } from './eval-lock.js';
import { currentHolder } from './holder-lock.js';
import { jsonlStore, RESULTS_FILE, type ResultCheck } from './results-file.js';
import { loadSource, summarizeResults, writeOutputs, type SuiteDeps } from './run-suite.js';
import { SHARDS_DIR } from './runner.js';
import type { Suite } from './suite.js';
import { compareSummaries, type EvalSummary, type SummaryComparison } from './summary.js';
import { readPreviousSummary } from './summary-file.js';
import { trialFilesStore } from './trial-files.js';
import { planTrials, shardFolderName, trialKey, type TrialId } from './trial-plan.js';
import type { TrialResult } from './types.js';
import { writeFileAtomic } from '../atomic-write.js';

/** Where `merge` makes the suite again (working copies of instances, Harbor tasks), apart from every shard's. */
export const MERGE_DIR = 'merge';
/** Most missing trials a message lists one by one. */
const MISSING_LISTED = 20;

export interface MergeOptions {
  /** The eval's out folder, absolute. */
  outDir: string;
  /** The suite, when it is not where the lock says (absolute, and as messages name it). */
  suite?: { file: string; displayPath: string };
  cwd: string;
  /** Write the reports of the trials there are even with trials missing. */
  partial: boolean;
  compare?: { file: string; displayPath: string };
}

export interface MergeResult {
  lock: EvalLock;
  suite: Suite;
  /** Every result found, in suite task order then trial order. */
  results: TrialResult[];
  /** Trials of the plan with no result. */
  missing: TrialId[];
  /** Shards a live process still holds ("shard 2/4: pid 9 on node3 (...)"). */
  running: string[];
  /** Trials the plan has. */
  total: number;
  /** Absent when trials are missing and `partial` was not given: nothing was written. */
  written?: {
    summary: EvalSummary;
    comparison: SummaryComparison | undefined;
    files: Awaited<ReturnType<typeof writeOutputs>>['files'];
    view: { index: string } | undefined;
    resultsFile: string;
  };
}

export async function mergeEval(
  options: MergeOptions,
  deps: Pick<SuiteDeps, 'viewer' | 'warn' | 'say'> = {},
): Promise<MergeResult> {
  const lock = await lockOf(options.outDir);
  const suite = await reopenSuite(options, lock, deps.say ?? (() => undefined));
  const { results, running } = await readEveryShard(options.outDir, lock, suite.suite);
  const plan = planTrials(suite.suite, lock.n);
  const found = new Set(results.map(trialKey));
  const missing = plan.all
    .filter((s) => !found.has(trialKey(s)))
    .map(({ taskId, trial }) => ({ taskId, trial }));
  const base = { lock, suite: suite.suite, results, missing, running, total: plan.all.length };
  if (missing.length > 0 && !options.partial) return base;

  const previous = options.compare
    ? await readPreviousSummary(options.compare.file, options.compare.displayPath)
    : undefined;
  const summary = await summarizeResults(
    results,
    {
      suite: suite.suite,
      n: lock.n,
      // The eval ran from its first trial's start to its last one's end, whichever shard ran them.
      startedAt: results.map((r) => r.startedAt).sort()[0] ?? lock.createdAt,
      finishedAt:
        results
          .map((r) => r.finishedAt)
          .sort()
          .at(-1) ?? lock.createdAt,
      costLimitUsd: lock.settings.costLimitUsd,
      harnessVersion: lock.harnessVersion,
    },
    suite.made,
  );
  const comparison = previous ? compareSummaries(summary, previous) : undefined;
  const resultsFile = join(options.outDir, RESULTS_FILE);
  // An unsharded eval's results.jsonl is its store, already what it should be.
  if (lock.shards > 1)
    await writeFileAtomic(resultsFile, results.map((r) => `${JSON.stringify(r)}\n`).join(''));
  const { files, view } = await writeOutputs(options.outDir, results, summary, comparison, deps);
  return { ...base, written: { summary, comparison, files, view, resultsFile } };
}

async function lockOf(outDir: string): Promise<EvalLock> {
  const lock = await readEvalLock(outDir);
  if (!lock)
    throw new UsageError(`${outDir} has no suite.lock.json: it is not the out folder of an eval`, {
      hint: 'give the --out folder the shards ran with',
    });
  if (lock.version !== 2)
    throw new UsageError(
      `${outDir} was written by an older sandbox-harness, whose lock does not record the eval's settings`,
      {
        hint: 'its summary.json and reports are the ones that eval wrote',
      },
    );
  return lock;
}

/** The suite again, with the lock's settings, made apart from the shards' folders; it must be the one the lock names. */
async function reopenSuite(options: MergeOptions, lock: EvalLock, say: (line: string) => void) {
  const file = options.suite?.file ?? lock.suiteFile;
  const displayPath = options.suite?.displayPath ?? lock.suiteFile;
  const { made } = await loadSource(
    { suiteFile: file, displayPath, cwd: options.cwd, outDir: options.outDir },
    lock.settings.source,
    () => options.outDir,
    say,
    undefined,
    join(options.outDir, MERGE_DIR),
  );
  const ids = made.suite.tasks.map((t) => t.id);
  if (made.suite.sha256 !== lock.suiteSha256 || ids.join('\n') !== lock.tasks.join('\n'))
    throw new UsageError(
      `${displayPath} is not the suite the eval in ${options.outDir} ran (the lock's suite hash ${lock.suiteSha256.slice(0, 12)}, this one's ${made.suite.sha256.slice(0, 12)})`,
      { hint: 'give the suite file the eval ran with: eval merge <out> --suite <file>' },
    );
  return { suite: made.suite, made };
}

/** Every shard's results (or the unsharded store's), each checked against its share of the plan; shards still held. */
async function readEveryShard(
  outDir: string,
  lock: EvalLock,
  suite: Suite,
): Promise<{ results: TrialResult[]; running: string[] }> {
  const taskIds = new Set(suite.tasks.map((t) => t.id));
  const order = new Map(suite.tasks.map((t, i) => [t.id, i]));
  const sorted = (list: TrialResult[]) =>
    list.sort((a, b) => (order.get(a.taskId) ?? 0) - (order.get(b.taskId) ?? 0) || a.trial - b.trial);
  if (lock.shards === 1) {
    const holder = await currentHolder(outDir);
    if (holder)
      throw new UsageError(`the eval in ${outDir} is still running (${holder})`, {
        hint: 'merge once it is done; an unsharded eval writes its own reports when it ends',
      });
    const check: ResultCheck = { taskIds, n: lock.n, what: `this suite with n=${lock.n}` };
    return { results: sorted(await jsonlStore(outDir).read(check, false)), running: [] };
  }
  const results: TrialResult[] = [];
  const running: string[] = [];
  const problems: string[] = [];
  for (let index = 1; index <= lock.shards; index++) {
    const shard = { index, count: lock.shards };
    const plan = planTrials(suite, lock.n, shard);
    const dir = join(outDir, SHARDS_DIR, shardFolderName(shard));
    const holder = await currentHolder(dir);
    if (holder) running.push(`shard ${index}/${lock.shards}: ${holder}`);
    const check: ResultCheck = {
      taskIds,
      n: lock.n,
      what: `shard ${index}/${lock.shards}`,
      belongs: (id) => plan.shardOf?.get(trialKey(id)) === index,
    };
    try {
      results.push(...(await trialFilesStore(dir, plan.mine.length).read(check, false)));
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(error.message, ...error.problems.map((p) => `  ${p}`));
    }
  }
  if (problems.length > 0)
    throw new ConfigError(`the shards' results in ${outDir} are damaged`, problems, {
      hint: 'remove the bad files and run their shards again with --resume',
    });
  return { results: sorted(results), running };
}

/** `fixes-threshold#0, gives-up#1, ... and 12 more`. */
export function listMissing(missing: readonly TrialId[]): string {
  const shown = missing.slice(0, MISSING_LISTED).map((m) => `${m.taskId}#${m.trial}`);
  return `${shown.join(', ')}${missing.length > MISSING_LISTED ? ` and ${missing.length - MISSING_LISTED} more` : ''}`;
}
