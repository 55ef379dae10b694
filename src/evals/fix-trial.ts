/**
 * The production trial runner: one trial is one `fix --no-apply` run in fresh containers,
 * its record kept under the eval's out folder, never touching the task's host repo.
 */
import { dirname, join } from 'node:path';
import picomatch from 'picomatch';
import { HarnessError, NodeFailure } from '../errors.js';
import { runFix, type FixDeps, type FixResult, type KeepPolicy } from '../fix/run-fix.js';
import { categoryOf, PASSING_CATEGORY } from '../outcomes.js';
import type { EventSink } from '../agent/events.js';
import type { RunRecord } from '../runs/record.js';
import type { TrialPools } from './trial-pools.js';
import type { BackgroundRemovals } from '../sandbox/removals.js';
import type { SetupStates } from '../fix/setup-states.js';
import { readFile } from 'node:fs/promises';
import { parseStoredResults } from '../test-results/stored.js';
import {
  MAX_FAILING_RECORDED,
  type TrialCategory,
  type TrialResult,
  type TrialRunner,
  type TrialSpec,
  type TrialTests,
} from './types.js';

export interface FixTrialOptions {
  outDir: string;
  keep: KeepPolicy;
  /**
   * The dependencies of a trial on `engine` (the one the scheduler placed it on): one set for
   * an eval on the local engine, one per engine of a fleet, made ready there (images) before
   * its first trial. An engine that cannot be made ready fails the trial as infrastructure.
   */
  deps: FixDeps | ((engine: string, signal: AbortSignal) => Promise<FixDeps>);
  env: NodeJS.ProcessEnv;
  /** The OCI runtime of every trial (`--runtime`); default each catalog's `sandbox.runtime`. */
  runtime?: string;
  /** The agent kind of every trial (`eval --agent`); default each catalog's `agent.kind`. */
  agent?: string;
  /** Every event of every trial, tagged with its task and trial (for timing and overlap checks). */
  events?: ((spec: TrialSpec) => EventSink | undefined) | undefined;
  /** Each trial stops once its model calls cost this many US dollars (`eval --cost-limit`). */
  costLimitUsd?: number | undefined;
  /**
   * Trials take their sandboxes from the eval's warm pool, which warms each trial's first
   * sandbox while the trial before it runs (`eval --pool`; docs/pool.md, `trial-pools.ts`).
   */
  pools?: TrialPools | undefined;
  /** Trials' sandboxes that are not kept are removed beside the next trial (`sandbox/removals.ts`). */
  removals?: BackgroundRemovals | undefined;
  /** The eval's setups: a catalog setup marked `shared` is made once per task (`fix/setup.ts`). */
  setups?: SetupStates | undefined;
}

export function fixTrialRunner(options: FixTrialOptions): TrialRunner {
  return async (spec, context) => {
    const { pools } = options;
    // With a pool, fixed by the eval's start (the next trial's sandbox is warmed under it);
    // else to the millisecond. Either way a retry never reuses its first try's run folder.
    const runId = pools
      ? pools.begin(spec.taskId, spec.trial)
      : `${spec.taskId}-t${spec.trial}-${new Date().toISOString().replace(/[-:.]/g, '').slice(0, 18)}`;
    let startedAt = new Date();
    const base = {
      taskId: spec.taskId,
      trial: spec.trial,
      startedAt: startedAt.toISOString(),
    };
    let result: FixResult;
    try {
      let deps: FixDeps;
      if (typeof options.deps === 'function') {
        deps = await options.deps(context.engine, context.signal);
        // Making a fresh engine ready (images) serves every trial there; it is not this trial's time.
        startedAt = new Date();
        base.startedAt = startedAt.toISOString();
      } else deps = options.deps;
      const events = options.events?.(spec);
      result = await runFix(
        {
          ticket: spec.ticket,
          catalogFile: spec.catalog,
          ...(spec.repo ? { repoDir: spec.repo } : {}),
          ...(spec.cassette ? { cassette: spec.cassette } : {}),
          ...(spec.provider ? { provider: spec.provider } : {}),
          ...(spec.model ? { model: spec.model } : {}),
          ...(options.runtime ? { runtime: options.runtime } : {}),
          ...((options.agent ?? spec.agent) ? { agent: options.agent ?? spec.agent } : {}),
          keep: options.keep,
          apply: false,
          force: false,
          rebuild: false,
          runsDir: join(options.outDir, 'runs'),
          runId,
          cwd: dirname(spec.catalog),
          env: options.env,
          signal: context.signal,
          readStdin: async () => '',
          ...(events ? { events } : {}),
          costLimitUsd: options.costLimitUsd,
          ...(spec.seedRun ? { seedRun: spec.seedRun } : {}),
          ...(spec.patchOnly ? { patchOnly: true } : {}),
          ...(pools ? { sharedPool: pools.poolFor(context.engine, deps.backend) } : {}),
          ...(options.removals ? { removals: options.removals } : {}),
          ...(options.setups ? { sharedSetups: options.setups } : {}),
        },
        deps,
      );
    } catch (error) {
      // Failures before the run starts: an unreachable engine is infrastructure; a bad
      // catalog or ticket is an error of the task's configuration, never a scored failure.
      const finishedAt = new Date();
      const category: TrialCategory =
        error instanceof HarnessError && error.category === 'infrastructure'
          ? 'infrastructure'
          : error instanceof HarnessError && error.category === 'interrupted'
            ? 'interrupted'
            : 'error';
      return {
        ...base,
        engine: (error instanceof NodeFailure ? error.node : undefined) ?? context.engine,
        outcome: 'failed',
        category,
        turns: 0,
        inputTokens: 0,
        outputTokens: 0,
        durationMs: finishedAt.getTime() - startedAt.getTime(),
        finishedAt: finishedAt.toISOString(),
        error: error instanceof Error ? error.message : String(error),
      } satisfies TrialResult;
    }
    const record = result.record;
    let category: TrialCategory = categoryOf(
      result.outcome,
      record.attempts[record.attempts.length - 1]?.verdict,
    );
    let error = result.error?.message;
    if (category === PASSING_CATEGORY && spec.mustNotTouch && spec.mustNotTouch.length > 0) {
      const touched = record.attempts[record.attempts.length - 1]?.changedFiles ?? [];
      const forbidden = picomatch(spec.mustNotTouch, { dot: true });
      const bad = touched.filter((p) => forbidden(p));
      if (bad.length > 0) {
        category = 'rejected';
        error = `touched files the task must not touch: ${bad.join(', ')}`;
      }
    }
    const finishedAt = new Date();
    const where = placedOn(record, result.error);
    return {
      ...base,
      outcome: category === PASSING_CATEGORY ? 'passed' : 'failed',
      category,
      turns: record.turns,
      inputTokens: record.tokens.input,
      outputTokens: record.tokens.output,
      durationMs: finishedAt.getTime() - startedAt.getTime(),
      finishedAt: finishedAt.toISOString(),
      runId: result.runId,
      ...(record.cost ? { costUsd: record.cost.usd } : {}),
      ...(record.cost?.unpriced ? { unpriced: record.cost.unpriced } : {}),
      ...(spec.seedRun && record.continuedFrom
        ? { seededFrom: { runId: record.continuedFrom.runId, attempts: record.continuedFrom.attempts } }
        : {}),
      ...(record.image ? { imageId: record.image.id } : {}),
      catalogHash: record.catalog.hash,
      provider: record.provider.name,
      model: record.provider.model,
      containerIds: record.containers.map((c) => c.id),
      ...(where ? { engine: where } : {}),
      ...(record.runtime ? { runtime: record.runtime } : {}),
      ...(record.agent ? { agent: record.agent } : {}),
      ...reviewFacts(record),
      ...(await testFacts(result)),
      ...rewardFacts(record),
      attemptsUsed: record.attempts.length,
      ...(error ? { error } : {}),
    } satisfies TrialResult;
  };
}

/**
 * The per-test results of the trial's last verification with a report: counts from the
 * record, the failing tests from the run folder (written by this harness, moments ago).
 */
async function testFacts(result: FixResult): Promise<{ tests?: TrialTests }> {
  const attempt = [...result.record.attempts].reverse().find((a) => a.testReport);
  const report = attempt?.testReport;
  if (!attempt || !report) return {};
  const stored = report.file
    ? parseStoredResults(await readFile(join(result.runDir, report.file), 'utf8').catch(() => undefined))
    : undefined;
  const named = stored?.named;
  const failing = named
    ? [...named.failToPass, ...named.passToPass].filter((t) => t.status !== 'passed').map((t) => t.id)
    : (stored?.tests ?? []).filter((t) => t.status === 'failed').map((t) => t.id);
  return {
    tests: {
      ...(report.counts ?? { passed: 0, failed: 0, skipped: 0 }),
      ...(report.reason ? { refused: report.reason } : {}),
      ...(attempt.namedTests ? { verdict: attempt.namedTests.verdict } : {}),
      exitCode: attempt.namedTests?.exitCode ?? stored?.exitCode ?? 0,
      failing: failing.slice(0, MAX_FAILING_RECORDED),
      ...(attempt.namedTests?.quarantined.length ? { quarantined: attempt.namedTests.quarantined } : {}),
    },
  };
}

/** The score of the trial's last verification that read (or refused) a reward. */
function rewardFacts(record: FixResult['record']): Pick<TrialResult, 'score' | 'reward'> {
  const attempt = [...record.attempts].reverse().find((a) => a.reward);
  const reward = attempt?.reward;
  if (!reward) return {};
  // A multi-step task's steps, each with its own score, beside the combined one.
  const steps = attempt.steps?.map((s) => ({
    name: s.name,
    ...(s.reward?.score !== undefined ? { score: s.reward.score } : {}),
  }));
  const stepsFact = steps ? { steps } : {};
  if (reward.status === 'refused')
    return { score: 0, reward: { refused: reward.reason ?? 'refused', ...stepsFact } };
  return {
    score: reward.score,
    ...(reward.values || steps
      ? { reward: { ...(reward.values ? { values: reward.values } : {}), ...stepsFact } }
      : {}),
  };
}

/** What the tests and the checker said of a trial, so reports can set the two side by side. */
function reviewFacts(record: FixResult['record']): { verified: boolean; approved?: boolean } {
  const verified = record.attempts.some((a) => a.verdict === 'passed' || a.verdict === 'changes-requested');
  const reviews = record.attempts.flatMap((a) => a.reviews ?? []);
  const last = reviews[reviews.length - 1];
  return { verified, ...(last ? { approved: last.verdict === 'approve' } : {}) };
}

/**
 * Where the trial ran: the engine of its last attempt's sandbox when the backend placed that
 * sandbox itself (a Slurm node), else the run's engine. A run ended by a node's failure names
 * that node, which need not be its attempt's (the shared baseline runs in another run's job): the
 * retry and the per-engine tally blame the machine that failed.
 */
function placedOn(record: RunRecord, error: HarnessError | undefined): string | undefined {
  if (error instanceof NodeFailure && error.node) return error.node;
  const attempts = record.attempts.flatMap((a) => a.containers).filter((c) => c.role.startsWith('attempt-'));
  // A replayed patch's attempt has no sandbox of its own: its first is its verification's.
  return (attempts.at(-1) ?? record.attempts.at(-1)?.containers[0])?.engine ?? record.engine;
}
