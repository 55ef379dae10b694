/**
 * Step 4 of `fix`, one attempt: a fresh sandbox; the agent loop; the freeze (every process
 * of the sandbox stopped, so the change is read from one moment); the change set; the
 * gate; verification in another fresh sandbox (made while the agent works: nothing runs in
 * it until the change is written); and, when review is on, the checker. Each
 * ends the attempt with one verdict and, unless it passed, feedback for the next one.
 */
import type { EventSink } from '../agent/events.js';
import { runAgentLoop, type AgentLoopResult } from '../agent/loop.js';
import { buildFirstUserMessage } from '../agent/prompt.js';
import type { ToolRegistry } from '../agent/tools/tool-registry.js';
import type { Allowlist } from '../changes/allowlist.js';
import { gateChangeSet, type ChangeSet } from '../changes/change-set.js';
import type { PristineSource } from '../changes/pristine.js';
import type { ChangeIgnore, TestOutputs } from '../changes/ignore.js';
import { changeSetPatch } from '../changes/patch.js';
import {
  abortError,
  DiskBudgetExceeded,
  HarnessError,
  Interrupted,
  LimitExceeded,
  SandboxDead,
} from '../errors.js';
import { roundUsd } from '../llm/cost.js';
import type { Message, ModelProvider } from '../llm/types.js';
import { verdictForEmptyLoop, type AttemptVerdict, type LoopStop } from '../outcomes.js';
import type { Sandbox, WorkspaceTree } from '../sandbox/types.js';
import type { PlannedStep, Run } from './types.js';
import type { TestLayer, TestRun } from './test-layers.js';
import { warmChannel } from './sandboxes.js';
import { verifyChange, type Verification } from './verify.js';
import { formatForRecord, namedFeedback, recordResults, testFeedback } from './verification-report.js';
import { rewardFeedback, rewardRecord } from '../test-results/reward.js';
import { toolStartDetail } from './progress.js';
import { reviewChange } from './review.js';
import type { Continuation } from './continue.js';
import { shellQuote } from '../agent/tools/workspace-path.js';
import { runTaskSteps, stepVerifyRole } from './steps.js';
import { cliAgentStep } from './cli-agent-step.js';
import { attemptTools } from './mcp-step.js';
import { collectChange } from './collect-change.js';
import { inFirstRound } from './continue-fork.js';

/** What every attempt of a run shares, worked out once. */
export interface AttemptPlan {
  system: string;
  tools: ToolRegistry;
  allowlist: Allowlist;
  /** The image's pristine workspace. */
  tree: WorkspaceTree;
  pristine: PristineSource;
  /** What is not the agent's change (build and test output, git's files). */
  ignore: ChangeIgnore;
  /** What the test command wrote on the untouched repo: settles with the baseline, never rejects. */
  testOutputs?: Promise<TestOutputs>;
  layers: readonly TestLayer[];
  /** Workspace paths of held-out tests: absent from attempt sandboxes, present in verification. */
  heldOut: readonly string[];
  contextWindow?: number;
  maxAttempts: number;
  /** With review on: the checker, its rounds (shared by the run's attempts), AGENTS.md for its prompt. */
  review?: { checker: ModelProvider; maxRounds: number; used: number; agentsMd?: string };
  /** With catalog `agent.steps`: the task's steps, each attempt runs them all in its sandbox (`steps.ts`). */
  steps?: PlannedStep[];
}

export interface AttemptResult {
  verdict: AttemptVerdict;
  /** The verified change, when the verdict is `passed`. */
  changeSet?: ChangeSet;
  /** What the next attempt's model is told. */
  feedback?: string;
}

const DEFAULT_FEEDBACK_BYTES = 4096;
/** Paths listed in a record; the count says how many there were. */
const RECORDED_PATHS = 200;

/**
 * How a step ended the attempt: its verdict, what the next attempt's model is told, the
 * progress line that says how it went, and the attempt's own account for the record.
 */
interface Ending extends AttemptResult {
  line?: string;
  message?: string;
}

/** One attempt's context, shared by its steps. */
interface Attempt {
  run: Run;
  plan: AttemptPlan;
  n: number;
  box: Sandbox;
  /** The agent's own signal (the first attempt's also stops when the baseline settles). */
  signal: AbortSignal;
  /**
   * The attempt's sandbox is its verification's too (`patchIntoVerification`): the change is
   * tested where it was written, once that sandbox is proven to hold exactly the change.
   */
  verifiesInPlace?: boolean;
}

/**
 * Whether the attempt writes its change straight into its verification sandbox: only for a
 * patch the harness replays (an oracle's gold patch, a predictions file's), where no agent
 * runs and the only writes are the harness's own, file by file. Such a trial then makes one
 * sandbox instead of two. The tests still only run where the change scan, read after the
 * freeze, is exactly the gated change (else a fresh sandbox is made, as for any agent), so
 * verification stays pristine plus the diff. Never with a CLI agent, steps, review, parallel
 * lanes, or a continued run (their sandboxes hold more than a patch's writes).
 */
export function patchIntoVerification(run: Run): boolean {
  return (
    run.options.patchOnly === true &&
    !run.agent.cli &&
    !run.steps &&
    !run.checker &&
    !run.continuation &&
    !run.fork &&
    !run.laneProviders
  );
}

/** The verdict of an attempt that ended with an error, on its way up. */
function verdictOfError(error: unknown): AttemptVerdict {
  if (error instanceof Interrupted) return 'interrupted';
  if (error instanceof LimitExceeded) return error.verdict;
  if (error instanceof HarnessError && error.category === 'infrastructure') return 'infrastructure';
  return 'error';
}

/**
 * One attempt, as named steps: agent -> freeze -> collect -> gate -> verify -> review. Each
 * step either ends the attempt (a verdict, feedback) or hands the next one what it found;
 * what each found goes on the run's journal, and the attempt's end is journaled once here.
 */
export async function runAttempt(
  run: Run,
  plan: AttemptPlan,
  n: number,
  feedback: string | undefined,
  signal: AbortSignal,
  /** Settles when the agent may call the model (the first attempt waits for the baseline's verdict). */
  ready?: Promise<void>,
): Promise<AttemptResult> {
  const started = Date.now();
  const { journal } = run;
  // `of`: the last attempt this run may make (a continued run numbers its attempts on).
  const last = (run.continuation?.attemptsBefore ?? 0) + plan.maxAttempts;
  journal.append({ kind: 'attempt_start', attempt: n, of: last });
  const spentBefore = run.costs.totalUsd;
  const finish = async (ending: Ending): Promise<AttemptResult> => {
    journal.append({
      kind: 'attempt_end',
      attempt: n,
      status: ending.verdict,
      durationMs: Date.now() - started,
      message: ending.message,
      costUsd: roundUsd(run.costs.totalUsd - spentBefore),
      cost: run.costs.snapshot(),
      ...(ending.feedback ? { feedback: ending.feedback } : {}),
      summary: ending.line,
    });
    await journal.save();
    return {
      verdict: ending.verdict,
      ...(ending.changeSet ? { changeSet: ending.changeSet } : {}),
      ...(ending.feedback ? { feedback: ending.feedback } : {}),
    };
  };

  /** Set once the agent's loop is over: a sandbox that dies after it is the attempt's to answer for. */
  const loop = { ended: false };
  try {
    const verifiesInPlace = patchIntoVerification(run);
    const box = await openAttemptSandbox(run, plan, n, verifiesInPlace);
    if (ready) await untilReady(ready, signal);
    // Steps make each step's verification sandbox ahead themselves.
    if (!plan.steps && !verifiesInPlace) run.sandboxes.makeAhead(`verify-${n}`, {}, { freezeWatch: false });
    const continued = run.continuation;
    // The first round starts from the earlier change: replayed, unless the sandbox is its fork.
    if (continued && inFirstRound(run, n)) {
      run.sandboxes.touched(box);
      if (!run.fork) await replayEarlierChange(box, continued, signal);
    }
    return await finish(await attemptSteps({ run, plan, n, box, signal, verifiesInPlace }, feedback, loop));
  } catch (error) {
    const ending = await endingOfError(run, error, loop.ended);
    if (ending) return await finish(ending);
    journal.append({
      kind: 'attempt_end',
      attempt: n,
      status: verdictOfError(error),
      durationMs: Date.now() - started,
      message: error instanceof Error ? error.message : String(error),
    });
    throw error;
  } finally {
    await run.sandboxes.dropAhead(`verify-${n}`);
  }
}

/** The steps after the sandbox is ready, in order; the first that ends the attempt decides it. */
async function attemptSteps(
  attempt: Attempt,
  feedback: string | undefined,
  loop: { ended: boolean },
): Promise<Ending> {
  if (attempt.plan.steps) return taskSteps(attempt, attempt.plan.steps, feedback, loop);
  const agent = await agentStep(attempt, feedback);
  loop.ended = true;
  const frozen = await freezeStep(attempt);
  if (frozen) return frozen;
  const died = agent.status === 'sandbox-stopped';
  const notice = died ? SANDBOX_DIED_NOTICE : '';
  const changeSet = await collectStep(attempt);
  const gated = await gateStep(attempt, changeSet, { notice, died, stop: agent.status });
  if (gated) return gated;
  const verified = await verifyStep(attempt, changeSet, notice);
  if ('verdict' in verified) return verified;
  return reviewStep(attempt, changeSet, verified.tests);
}

/**
 * A multi-step task: the attempt's own steps, step after step in its one sandbox, each
 * step's change so far verified in a fresh sandbox (`steps.ts` holds the order and rewards).
 */
function taskSteps(
  attempt: Attempt,
  steps: readonly PlannedStep[],
  feedback: string | undefined,
  loop: { ended: boolean },
): Promise<Ending> {
  return runTaskSteps(attempt.run, attempt.n, steps, {
    agent: async (step) => {
      loop.ended = false;
      const agent = await agentStep(attempt, step.index === 1 ? feedback : undefined, step);
      loop.ended = true;
      return agent;
    },
    change: async (step, agent) => {
      const frozen = await freezeStep(attempt);
      if (frozen) return frozen;
      const died = agent.status === 'sandbox-stopped';
      const notice = died ? SANDBOX_DIED_NOTICE : '';
      const changeSet = await collectStep(attempt, `step-${step.index}.diff`);
      return (await gateStep(attempt, changeSet, { notice, died, stop: agent.status })) ?? changeSet;
    },
    verify: (step, changeSet) => verifyAndRecord(attempt, changeSet, step),
  });
}

const SANDBOX_DIED_NOTICE =
  'Your sandbox stopped during the attempt (every process in it died); what you had changed until then was checked. ';

/**
 * The attempt's sandbox (the agent's), on the record before anything runs in it. When the
 * attempt verifies in place, it is the verification's sandbox (from the pristine image, the
 * held-out tests in it), under that role.
 */
async function openAttemptSandbox(
  run: Run,
  plan: AttemptPlan,
  n: number,
  verifiesInPlace: boolean,
): Promise<Sandbox> {
  const role = verifiesInPlace ? `verify-${n}` : `attempt-${n}`;
  const box = verifiesInPlace
    ? await run.sandboxes.create(role)
    : await run.sandboxes.create(role, { hidden: plan.heldOut });
  // Kept after a failure only once the agent (or a continued run's change) used it.
  if (!verifiesInPlace) run.sandboxes.untilTouched(box);
  run.journal.append({
    kind: 'sandbox',
    attempt: n,
    container: {
      role,
      id: box.id,
      kept: false,
      engine: box.where ?? run.deps.backend.engine,
    },
  });
  return box;
}

/**
 * Step agent: the loop in the attempt's sandbox; its turns and tokens go on the journal. A
 * stop that is not the attempt's to judge (Ctrl-C, the disk budget) is thrown on.
 */
async function agentStep(
  attempt: Attempt,
  feedback: string | undefined,
  step?: PlannedStep,
): Promise<AgentLoopResult> {
  const { run, plan, n, box, signal } = attempt;
  if (run.agent.cli) return endOfAgent(attempt, await cliAgentStep(run, n, box, feedback, signal));
  // A step's instruction is its own ticket; its time is its own.
  const ticket = step?.ticket ?? run.ticket;
  const agent = run.catalog.catalog.agent;
  // The agent's calls go over the sandbox's command channel; starting it now, while the
  // first model call runs, takes its start-up off the first tool call.
  warmChannel(box);
  // A seeded run's first attempt goes on from the recorded conversation (see seed.ts).
  const seeded = run.continuation?.messages;
  const seed = seeded && inFirstRound(run, n) ? seeded : [];
  const messages: Message[] = [...seed];
  const entry: Run['transcript'][number] = {
    attempt: n,
    role: 'maker',
    ...(step ? { step: step.name } : {}),
    system: plan.system,
    messages,
    ...(seed.length > 0 ? { seededMessages: seed.length } : {}),
  };
  run.transcript.push(entry);
  const used = run.record.tokens.input + run.record.tokens.output;
  // What the loop spent, from its own last event: a loop that throws (a model API that failed,
  // a cassette that ran out) returns nothing, and its turns still happened.
  let spent: { turns: number; input: number; output: number } | undefined;
  const events: EventSink = {
    emit: (event) => {
      if (event.kind === 'loop_end' && event.agent === undefined)
        spent = {
          turns: event.turn ?? 0,
          input: event.tokens?.input ?? 0,
          output: event.tokens?.output ?? 0,
        };
      run.events.emit(event);
    },
  };
  const { tools, close } = await attemptTools(run, n, box, plan.tools, signal);
  const loop = await runAgentLoop({
    sandbox: box,
    provider: run.provider,
    tools,
    system: plan.system,
    firstUserMessage: buildFirstUserMessage({
      ticket: { id: ticket.id, title: ticket.title, body: ticket.body },
      ...(feedback ? { feedback } : {}),
    }),
    limits: {
      maxTurns: agent.maxTurns,
      ...(agent.tokenBudget ? { tokenBudget: Math.max(0, agent.tokenBudget - used) } : {}),
      attemptDeadlineMs: (step?.attemptSec ?? run.catalog.catalog.sandbox.timeouts.attemptSec) * 1000,
      costExceeded: () => run.costs.exceeded(),
    },
    events,
    // The one step on the progress line with no event behind it: a call's start, on a live
    // terminal line only (a long command then says what it is while it runs). The call's one
    // line in a log is its end, the `tool_call` event, with its exit code and time.
    onToolStart: (call) => {
      run.sandboxes.touched(box);
      run.progress.tick?.(toolStartDetail(call));
    },
    signal,
    attempt: n,
    messages,
    ...(plan.contextWindow ? { contextWindowTokens: plan.contextWindow } : {}),
    ...(run.delegateProvider ? { subAgent: { provider: run.delegateProvider } } : {}),
  }).catch(async (error: unknown) => {
    await close();
    if (spent && spent.turns > 0)
      run.journal.append({
        kind: 'agent_error',
        attempt: n,
        turns: spent.turns,
        inputTokens: spent.input,
        outputTokens: spent.output,
      });
    throw error;
  });
  await close();
  if (loop.delegations.length > 0) entry.delegations = loop.delegations;
  return endOfAgent(attempt, loop);
}

/** The agent's turn on the journal; a stop that is not the attempt's to judge is thrown on. */
function endOfAgent({ run, n, signal }: Attempt, loop: AgentLoopResult): AgentLoopResult {
  run.journal.append({
    kind: 'agent_end',
    attempt: n,
    status: loop.status,
    turns: loop.turns,
    inputTokens: loop.usage.inputTokens,
    outputTokens: loop.usage.outputTokens,
  });
  if (loop.status === 'interrupted') throw abortError(signal);
  if (loop.sandboxError instanceof DiskBudgetExceeded) throw loop.sandboxError;
  return loop;
}

/** Step freeze: nothing the agent started may still write while its change is read. */
async function freezeStep({ run, box }: Attempt): Promise<Ending | undefined> {
  try {
    await box.freeze({ signal: run.signal });
    return undefined;
  } catch (error) {
    if (error instanceof DiskBudgetExceeded) throw error;
    if (!(error instanceof SandboxDead)) throw error;
    return {
      verdict: 'sandbox-stopped',
      feedback:
        'Your sandbox stopped: every process in it died (for example after `kill -1`, or when memory ran out) and it could not be started again. Nothing of that attempt was kept. Do not kill processes you did not start.',
    };
  }
}

/** Step collect: the change set read from the frozen sandbox, its paths on the journal, its patch saved. */
async function collectStep({ run, plan, n, box }: Attempt, patchName = 'patch.diff'): Promise<ChangeSet> {
  run.journal.append({ kind: 'collect_start', attempt: n });
  // Waits for the baseline only where what its tests wrote could change the set.
  const changeSet = await collectChange(box, plan, run.signal);
  run.journal.append({
    kind: 'change',
    attempt: n,
    changedFiles: changeSet.entries.slice(0, RECORDED_PATHS).map((e) => e.path),
    changedCount: changeSet.entries.length,
    ...(changeSet.ignored.length > 0
      ? { ignoredFiles: changeSet.ignored.slice(0, RECORDED_PATHS), ignoredCount: changeSet.ignored.length }
      : {}),
  });
  const patch = changeSet.overLimit ? '' : changeSetPatch(changeSet);
  if (patch) await run.dir.writeFile(`attempts/${n}/${patchName}`, patch);
  return changeSet;
}

/** Step gate: the whole change within the allowlist, and not empty; otherwise the attempt ends here. */
async function gateStep(
  { run, n }: Attempt,
  changeSet: ChangeSet,
  agent: { notice: string; died: boolean; stop: LoopStop },
): Promise<Ending | undefined> {
  const gate = gateChangeSet(changeSet);
  run.journal.append({
    kind: 'gate',
    attempt: n,
    gate: { ok: gate.ok, offences: gate.ok ? [] : gate.offending.slice(0, RECORDED_PATHS) },
    status: gate.ok ? 'allowed' : 'rejected',
    message: gate.ok
      ? `${changeSet.entries.length} changed file(s)` +
        (changeSet.ignored.length > 0
          ? `; ${changeSet.ignored.length} path(s) of build and test output left aside`
          : '')
      : gate.offending
          .slice(0, 20)
          .map((o) => `${o.path}: ${o.why}`)
          .join('; '),
  });
  if (!gate.ok) {
    await run.dir.writeFile(`attempts/${n}/rejection.txt`, `${gate.reason}\n`);
    return {
      verdict: 'rejected',
      feedback: agent.notice + gate.reason,
      line: `rejected: ${[...new Set(gate.offending.map((o) => o.path))].slice(0, 5).join(', ')}`,
    };
  }
  if (changeSet.entries.length > 0) return undefined;
  // Harbor's rule (catalog `agent.reward.unchanged: verify`): the verifier runs on an
  // untouched workspace too, and its reward counts.
  if (run.catalog.catalog.agent.reward?.unchanged === 'verify') return undefined;
  const { stop } = agent;
  const editable = run.catalog.catalog.agent.editableFiles.join(', ');
  return {
    verdict: agent.died ? 'sandbox-stopped' : verdictForEmptyLoop(stop),
    feedback:
      agent.notice +
      (stop === 'completed'
        ? `You made no change to the editable files (${editable}), so there was nothing to verify. The tests still fail.`
        : `You stopped (${stop}) without changing any editable file (${editable}). Work in smaller steps and edit the code sooner.`),
    line:
      changeSet.ignored.length > 0
        ? `no change to verify (${changeSet.ignored.length} path(s) of build and test output left aside)`
        : 'no change to verify',
  };
}

/**
 * Step verify: the change in a fresh sandbox from the pristine image, the tests run there.
 * Failing tests end the attempt; passing ones end it too unless review is on.
 */
async function verifyStep(
  attempt: Attempt,
  changeSet: ChangeSet,
  notice: string,
): Promise<Ending | { tests: TestRun }> {
  const { run, plan } = attempt;
  const verification = await verifyAndRecord(attempt, changeSet);
  const tests = verification.tests;
  const verified = verification.passed;
  if (verified && plan.review) return { tests };
  if (verified) {
    return {
      verdict: 'passed',
      changeSet,
      line: `verified: ${changeSet.entries.length} file(s), tests pass in a fresh sandbox`,
    };
  }
  const named = verification.results?.named;
  const reward = verification.reward;
  const bytes = run.options.feedbackBytes ?? DEFAULT_FEEDBACK_BYTES;
  return {
    verdict: 'tests-failed',
    feedback:
      notice +
      (named
        ? namedFeedback(named)
        : reward
          ? rewardFeedback(reward)
          : testFeedback(verification, plan, bytes)),
    line: named
      ? `the tests the task names did not all pass (${named.verdict}; exit code ${verification.results?.exitCode})`
      : reward
        ? `the verifier ${reward.ok ? `scored ${reward.reward.score}` : `left no score: ${reward.reason}`}`
        : `tests fail in a fresh sandbox (${tests.failingLayer?.name})`,
  };
}

/**
 * The change verified (a step's with that step's sandbox, test command and time) and put on
 * the record: the test output, the per-test results, the `verify` event with the reward.
 */
async function verifyAndRecord(
  { run, plan, n, box, verifiesInPlace }: Attempt,
  changeSet: ChangeSet,
  step?: PlannedStep,
): Promise<Verification> {
  run.journal.append({ kind: 'verify_start', attempt: n });
  const verification = await verifyChange(
    run,
    n,
    changeSet,
    plan.tree,
    step?.layers ?? plan.layers,
    plan.heldOut,
    step ? { role: stepVerifyRole(n, step.index), testSec: step.testSec } : undefined,
    verifiesInPlace ? box : undefined,
  );
  const tests = verification.tests;
  const prefix = step ? `step-${step.index}-` : '';
  await run.dir.writeFile(`attempts/${n}/${prefix}test-output.txt`, formatForRecord(verification));
  const results = verification.results ? await recordResults(run, n, verification.results) : {};
  const verified = verification.passed;
  run.journal.append({
    kind: 'verify',
    attempt: n,
    status: verified ? 'passed' : 'failed',
    durationMs: tests.durationMs,
    exitCode: tests.failingLayer?.exitCode ?? 0,
    ...(tests.failingLayer ? { message: `failing layer ${tests.failingLayer.name}` } : {}),
    ...(verification.heldOut ? { heldOut: verification.heldOut } : {}),
    ...results,
    ...(verification.reward ? { reward: rewardRecord(verification.reward) } : {}),
    ...(!verified && tests.failingLayer ? { failingLayer: tests.failingLayer.name } : {}),
  });
  return verification;
}

/** Step review: the independent checker reads the verified change; only its approval passes. */
async function reviewStep({ run, plan, n }: Attempt, changeSet: ChangeSet, tests: TestRun): Promise<Ending> {
  const review = plan.review!;
  if (review.used >= review.maxRounds) {
    const message = `verified, but no review round is left (${review.maxRounds} used)`;
    return { verdict: 'changes-requested', line: message, message };
  }
  review.used++;
  const verdict = await reviewChange(
    run,
    review.checker,
    n,
    review.used,
    changeSet,
    tests,
    review.agentsMd,
    plan.heldOut,
  );
  if (verdict.record.verdict === 'approve') {
    return {
      verdict: 'passed',
      changeSet,
      line: `verified and approved by the checker: ${changeSet.entries.length} file(s)`,
    };
  }
  return {
    verdict: 'changes-requested',
    line: `verified, but the checker requested changes: ${verdict.record.summary}`,
    ...(verdict.feedback ? { feedback: verdict.feedback } : {}),
  };
}

/**
 * An error that is the attempt's own verdict rather than the run's: the disk budget, or a
 * sandbox that stopped under the change after the agent's loop while the engine is fine.
 * Anything else goes on up (undefined).
 */
async function endingOfError(run: Run, error: unknown, loopEnded: boolean): Promise<Ending | undefined> {
  if (error instanceof DiskBudgetExceeded) {
    return {
      verdict: 'disk-budget',
      feedback: `Your attempt ended: ${error.message}. Do not write large or many files (build outputs, caches, dependency installs) in the sandbox.`,
      line: error.message,
    };
  }
  if (loopEnded && error instanceof SandboxDead && !run.signal.aborted && (await engineAnswers(run))) {
    // A sandbox of this attempt stopped while its change was collected or verified, and
    // the engine is fine: the agent's change (or what it left running) did it. Calling
    // that infrastructure would let an agent pull its own failures out of the pass rate.
    return {
      verdict: 'sandbox-stopped',
      feedback:
        'Your sandbox stopped while your change was being checked (every process in it died), so the change could not be verified. Do not kill processes you did not start, and do not leave processes running when you finish.',
      line: `a sandbox stopped while the change was checked: ${error.message}`,
      message: error.message,
    };
  }
  return undefined;
}

/** Waits for `ready`, or throws what `signal` was aborted with (a broken baseline, Ctrl-C). */
function untilReady(ready: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    void ready.then(() => {
      signal.removeEventListener('abort', onAbort);
      // The baseline may have settled by aborting this very signal.
      if (signal.aborted) reject(abortError(signal));
      else resolve();
    });
  });
}

/**
 * `--continue`: the earlier run's change, replayed onto today's repo, written into the first
 * attempt's sandbox before the agent starts (never following a link; it is gated like any change).
 */
async function replayEarlierChange(
  box: Sandbox,
  continued: Continuation,
  signal: AbortSignal,
): Promise<void> {
  if (continued.files.length > 0) await box.writeFiles(continued.files, { signal });
  if (continued.deletions.length > 0) {
    const removed = await box.exec(`rm -f -- ${continued.deletions.map(shellQuote).join(' ')}`, { signal });
    if (removed.exitCode !== 0)
      throw new HarnessError(
        'CONTINUE',
        'config',
        `the earlier run's deletions could not be replayed: ${removed.stderr.trim()}`,
      );
  }
}

/**
 * Whether the engine itself is healthy (it answers a ping): the evidence that decides who
 * failed when a sandbox stops after the agent's loop. Only an engine that does not answer
 * makes it infrastructure (retried); otherwise the attempt failed.
 */
async function engineAnswers(run: Run): Promise<boolean> {
  try {
    await run.deps.ping();
    return true;
  } catch {
    return false;
  }
}
