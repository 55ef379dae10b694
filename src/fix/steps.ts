/**
 * A task of several steps (catalog `agent.steps`, Harbor's `[[steps]]`) in one attempt: each
 * step's instruction goes to the agent in turn, in the SAME attempt sandbox (what earlier
 * steps left there, files, installed packages and all, is where the next one starts). After
 * each step the sandbox is frozen and its whole change so far, read against the pristine
 * image, goes through the gate and into a FRESH verification sandbox made from the pristine
 * image plus exactly that change, with the step's own verifier files and test command: never
 * the agent's sandbox, so "verified = pristine + allowed diff" holds step by step. Each
 * step's reward is recorded; the attempt's reward is formed from them as Harbor forms a
 * trial's (`agent.reward.combine`), and a step below its `minReward`, or one whose verifier
 * left no reward, stops the steps after it, as in Harbor.
 *
 * The attempt's own steps (agent, freeze, collect, gate, verify) come from `attempt.ts` as
 * hooks, so this file holds the order and the rewards, not another copy of them.
 */
import type { AgentLoopResult } from '../agent/loop.js';
import { loadTicket } from '../catalog/ticket.js';
import { verificationLayers } from '../catalog/schema.js';
import type { ChangeSet } from '../changes/change-set.js';
import type { AttemptVerdict } from '../outcomes.js';
import {
  combineStepRewards,
  minRewardShortfall,
  REWARD_TO_PASS,
  rewardRecord,
  type RewardReading,
  type StepReading,
} from '../test-results/reward.js';
import type { PlannedStep, Prepared, Run } from './types.js';
import { loadVerifierFiles } from './verifier-files.js';
import type { Verification } from './verify.js';

/** The role of the sandbox that verifies step `index` of attempt `n`. */
export function stepVerifyRole(n: number, index: number): string {
  return `verify-${n}-step-${index}`;
}

/** The step a sandbox role verifies (1-based), or undefined for any other role. */
export function stepOfRole(role: string): number | undefined {
  const match = /^verify-\d+-step-(\d+)$/.exec(role);
  return match ? Number(match[1]) : undefined;
}

/**
 * The catalog's steps with their tickets and verifier files read (relative to the catalog
 * file), before the run begins: a missing ticket or folder is a configuration error, never a
 * run that stops at its second step. Undefined without steps.
 */
export async function planSteps(prepared: Prepared): Promise<PlannedStep[] | undefined> {
  const { catalog } = prepared;
  const steps = catalog.catalog.agent.steps;
  if (!steps) return undefined;
  const timeouts = catalog.catalog.sandbox.timeouts;
  const planned: PlannedStep[] = [];
  for (const [i, step] of steps.entries()) {
    const ticket = await loadTicket(step.ticket, {
      catalogDir: catalog.dir,
      repoDir: prepared.repoDir,
      readStdin: async () => '',
      cwd: catalog.dir,
    });
    const files = step.verifierFiles
      ? await loadVerifierFiles(catalog.file, step.verifierFiles, `agent.steps[${i}].verifierFiles.from`)
      : undefined;
    planned.push({
      name: step.name,
      index: i + 1,
      ticket,
      // A step's verification is one too: the catalog's setup runs first.
      layers: verificationLayers({
        agent: { testCommand: step.testCommand },
        sandbox: catalog.catalog.sandbox,
      }),
      ...(files ? { verifierFiles: files } : {}),
      attemptSec: step.attemptSec ?? timeouts.attemptSec,
      testSec: step.testSec ?? timeouts.testSec,
      ...(step.minReward !== undefined ? { minReward: step.minReward } : {}),
    });
  }
  return planned;
}

/** How the steps end the attempt (the shape of `attempt.ts`'s endings). */
export interface StepsEnding {
  verdict: AttemptVerdict;
  changeSet?: ChangeSet;
  feedback?: string;
  line?: string;
  message?: string;
}

/** The attempt's own steps, bound to its sandbox. */
export interface StepHooks {
  agent(step: PlannedStep): Promise<AgentLoopResult>;
  /** Freeze, collect, gate: the change so far (against the pristine image), or how the attempt ends here. */
  change(step: PlannedStep, agent: AgentLoopResult): Promise<ChangeSet | StepsEnding>;
  /** The change in a fresh sandbox from the pristine image, with the step's verifier; recorded. */
  verify(step: PlannedStep, changeSet: ChangeSet): Promise<Verification>;
}

/** Runs the steps in order in one attempt; the last one that ran, or the one that ended it, decides. */
export async function runTaskSteps(
  run: Run,
  n: number,
  steps: readonly PlannedStep[],
  hooks: StepHooks,
): Promise<StepsEnding> {
  const strategy = run.catalog.catalog.agent.reward?.combine ?? 'mean';
  const readings: StepReading[] = [];
  let verified: ChangeSet | undefined;
  let ended: StepsEnding | undefined;
  try {
    for (const step of steps) {
      const started = Date.now();
      run.journal.append({
        kind: 'step_start',
        attempt: n,
        step: step.name,
        index: step.index,
        of: steps.length,
      });
      // Its verification sandbox starts while the agent works, as a single attempt's does.
      run.sandboxes.makeAhead(stepVerifyRole(n, step.index), {}, { freezeWatch: false });
      const agent = await hooks.agent(step);
      const change = await hooks.change(step, agent);
      const base = { name: step.name, index: step.index, agentStop: agent.status, turns: agent.turns };
      if (!('entries' in change)) {
        ended = change;
        run.journal.append({
          kind: 'step_end',
          attempt: n,
          step: { ...base, verdict: change.verdict, durationMs: Date.now() - started },
        });
        break;
      }
      const verification = await hooks.verify(step, change);
      verified = change;
      const reading: RewardReading = verification.reward ?? {
        ok: false,
        reason: 'the catalog reads no reward (agent.reward)',
      };
      readings.push({ name: step.name, reading });
      // Harbor stops after a step without a verifier result, and after one below its min_reward.
      const stop = !reading.ok
        ? `its verifier left no reward (${reading.reason})`
        : step.minReward !== undefined
          ? minRewardShortfall(reading, step.minReward)
          : undefined;
      run.journal.append({
        kind: 'step_end',
        attempt: n,
        step: {
          ...base,
          verdict: verification.passed ? 'passed' : 'tests-failed',
          changedCount: change.entries.length,
          reward: rewardRecord(reading),
          durationMs: Date.now() - started,
          ...(stop && step.index < steps.length ? { stoppedSteps: stop } : {}),
        },
      });
      if (stop) break;
    }
  } finally {
    await Promise.all(steps.map((s) => run.sandboxes.dropAhead(stepVerifyRole(n, s.index))));
  }
  const combined = combineStepRewards(readings, strategy);
  run.journal.append({
    kind: 'steps_reward',
    attempt: n,
    strategy,
    ran: readings.length,
    of: steps.length,
    reward: rewardRecord(combined),
  });
  if (ended) return ended;
  const scores = readings.map((r) => `${r.name} ${r.reading?.ok ? r.reading.reward.score : 'no reward'}`);
  const said = `${strategy} of ${readings.length}/${steps.length} step(s): ${scores.join(', ')}`;
  if (combined.ok && combined.reward.score >= REWARD_TO_PASS && verified)
    return {
      verdict: 'passed',
      changeSet: verified,
      line: `verified step by step in fresh sandboxes: reward ${combined.reward.score} (${said})`,
    };
  return {
    verdict: 'tests-failed',
    feedback: `Your work was checked after each step in a fresh copy of the environment by the task's verifiers, which you cannot see: ${said}; the task's reward (${strategy}) is ${combined.ok ? combined.reward.score : 'none'} (${REWARD_TO_PASS} is needed). Read the instructions again and do what they ask.`,
    line: `the steps' reward is ${combined.ok ? combined.reward.score : `none (${combined.reason})`} (${said})`,
  };
}
