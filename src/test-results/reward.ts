/**
 * A reward as Harbor's verifiers leave it: `reward.txt` holding one number, or `reward.json`
 * holding named numbers (the score under `reward`). Read back from the verification sandbox
 * as hostile data: one bounded read of a regular file (no link followed), a strict parse,
 * every number checked against the shared caps (`numbers.ts`), caps on names and count.
 * Whatever is wrong is a reason on record, never a pass.
 *
 * Harbor's rules, followed here: reward.json is read before reward.txt (harbor-framework/harbor
 * `src/harbor/verifier/verifier.py`, since #1620); a verifier that leaves neither, or one that
 * cannot be read, gives the trial no reward, which Harbor's mean counts as 0; a multi-step
 * task's reward is the per-name mean over the steps whose verifier left one, or the last
 * step's (`multi_step_reward_strategy`), and a step below its `min_reward` stops the steps
 * after it (`src/harbor/trial/multi_step.py`).
 */
import { SandboxFileError } from '../errors.js';
import type { Sandbox } from '../sandbox/types.js';
import { shellQuote } from '../sandbox/shell.js';
import { metricSchema, NUMBER_CAPS, scoreSchema } from '../numbers.js';

export const REWARD_LIMITS = {
  /** A reward file is a number or a small object; anything bigger is not one. */
  maxBytes: 64 * 1024,
  maxNames: 100,
  maxNameLength: 64,
  /** Scores beyond this are not a reward any verifier means. */
  maxMagnitude: NUMBER_CAPS.score,
} as const;

export interface Reward {
  /** The trial's score: reward.txt's number, or reward.json's `reward` (or its only value). */
  score: number;
  /** Every named value (reward.txt gives `{reward: score}`). */
  values: Record<string, number>;
  /** Where it came from: a verifier's file, or the steps of a multi-step task combined. */
  file: 'reward.txt' | 'reward.json' | 'steps';
}

export type RewardReading = { ok: true; reward: Reward } | { ok: false; reason: string };

/** Verified means full marks: Harbor's binary tasks write 1 for a pass and 0 for a fail. */
export const REWARD_TO_PASS = 1;

const NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
// Names that mean something to a JavaScript object are never taken as data.
const RESERVED = new Set(['__proto__', 'constructor', 'prototype']);

/** Why `value` is not a named value a verifier could mean (finite, within the shared cap). */
function finite(value: number, what: string): string | undefined {
  if (!Number.isFinite(value)) return `${what} is not a finite number`;
  if (!metricSchema.safeParse(value).success) return `${what} is beyond ±${REWARD_LIMITS.maxMagnitude}`;
  return undefined;
}

/**
 * The score is compared with the pass mark and averaged over trials, so it is never negative
 * (one -1e9 would sink a task's mean); other named values are only shown, and may be.
 */
function scoreProblem(score: number, what: string): string | undefined {
  if (score < 0) return `${what} is negative (${score}); a score is 0 or more`;
  return scoreSchema.safeParse(score).success ? undefined : `${what} is not a score (${score})`;
}

/** reward.txt: one decimal number, optional surrounding white space, nothing else. */
export function parseRewardText(text: string): RewardReading {
  const trimmed = text.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(trimmed))
    return {
      ok: false,
      reason: `reward.txt refused: expected one number such as 1 or 0.5, got ${JSON.stringify(trimmed.slice(0, 40))}${trimmed.length > 40 ? '…' : ''}`,
    };
  const score = Number(trimmed);
  const problem = finite(score, 'the reward') ?? scoreProblem(score, 'the reward');
  if (problem) return { ok: false, reason: `reward.txt refused: ${problem}` };
  return { ok: true, reward: { score, values: { reward: score }, file: 'reward.txt' } };
}

/** reward.json: a flat object of names to numbers (true/false count as 1/0, as Python's bool is an int). */
export function parseRewardJson(text: string): RewardReading {
  const refuse = (why: string): RewardReading => ({ ok: false, reason: `reward.json refused: ${why}` });
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    return refuse(`not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    return refuse('expected an object of named numbers such as {"reward": 1}');
  const entries = Object.entries(data as Record<string, unknown>);
  if (entries.length === 0) return refuse('the object is empty');
  if (entries.length > REWARD_LIMITS.maxNames) return refuse(`more than ${REWARD_LIMITS.maxNames} names`);
  const values: Record<string, number> = Object.create(null) as Record<string, number>;
  for (const [name, raw] of entries) {
    if (name.length > REWARD_LIMITS.maxNameLength || !NAME.test(name) || RESERVED.has(name))
      return refuse(
        `${JSON.stringify(name.slice(0, 80))}: expected a name of letters, digits, "_", "." or "-"`,
      );
    const value = typeof raw === 'boolean' ? (raw ? 1 : 0) : raw;
    if (typeof value !== 'number') return refuse(`${name}: expected a number, got ${kind(raw)}`);
    const problem = finite(value, name);
    if (problem) return refuse(problem);
    values[name] = value;
  }
  const names = Object.keys(values);
  const score = values.reward ?? (names.length === 1 ? values[names[0]!] : undefined);
  if (score === undefined)
    return refuse(
      `no "reward" among ${names.length} names (${names.slice(0, 5).join(', ')}): which one is the score?`,
    );
  const negative = scoreProblem(score, values.reward === undefined ? names[0]! : 'reward');
  if (negative) return refuse(negative);
  return { ok: true, reward: { score, values: { ...values }, file: 'reward.json' } };
}

/** How a multi-step task's reward is formed from its steps' (Harbor's `multi_step_reward_strategy`). */
export const REWARD_STRATEGIES = ['mean', 'final'] as const;
export type RewardStrategy = (typeof REWARD_STRATEGIES)[number];

/** A step as the combination sees it: its reading, absent when its verifier never ran. */
export interface StepReading {
  name: string;
  reading?: RewardReading;
}

/**
 * A multi-step task's reward, as Harbor forms it: `final` is the last step's (the last that
 * ran: a step below its min_reward stops the rest) as it is; `mean` is, name by name, the
 * mean over the steps whose verifier left a reward, a name a step lacks counting 0 there. A
 * step without one (its verifier never ran, or its file was refused) is left out of the mean,
 * as Harbor leaves out a step without a verifier result; none at all is no reward.
 */
export function combineStepRewards(steps: readonly StepReading[], strategy: RewardStrategy): RewardReading {
  if (strategy === 'final') {
    const last = steps[steps.length - 1];
    if (!last) return { ok: false, reason: 'no step ran' };
    if (!last.reading) return { ok: false, reason: `the last step run (${last.name}) was not verified` };
    if (!last.reading.ok) return { ok: false, reason: `step ${last.name}: ${last.reading.reason}` };
    return { ok: true, reward: { ...last.reading.reward, values: { ...last.reading.reward.values } } };
  }
  const read = steps.flatMap((s) => (s.reading?.ok ? [s.reading.reward.values] : []));
  if (read.length === 0) {
    const why = steps.map(
      (s) => `${s.name}: ${s.reading ? (s.reading.ok ? 'read' : s.reading.reason) : 'not verified'}`,
    );
    return { ok: false, reason: `no step's verifier left a reward (${why.join('; ') || 'no step ran'})` };
  }
  const names = [...new Set(read.flatMap((values) => Object.keys(values)))];
  const values: Record<string, number> = Object.create(null) as Record<string, number>;
  for (const name of names) values[name] = read.reduce((sum, v) => sum + (v[name] ?? 0), 0) / read.length;
  const score = values.reward ?? (names.length === 1 ? values[names[0]!] : undefined);
  if (score === undefined)
    return {
      ok: false,
      reason: `the steps' mean has no "reward" among ${names.length} names (${names.slice(0, 5).join(', ')}): which one is the score?`,
    };
  return { ok: true, reward: { score, values: { ...values }, file: 'steps' } };
}

/**
 * Why a step's reward stops the steps after it (Harbor's `min_reward`: a number gates the
 * score's name `reward`, a table each name it lists; a name the reward lacks, or no reward,
 * is below any threshold), or undefined when it does not.
 */
export function minRewardShortfall(
  reading: RewardReading | undefined,
  min: number | Readonly<Record<string, number>>,
): string | undefined {
  const thresholds = typeof min === 'number' ? { reward: min } : min;
  for (const [name, threshold] of Object.entries(thresholds)) {
    const actual = reading?.ok ? reading.reward.values[name] : undefined;
    if (actual === undefined)
      return `${name} below min_reward ${threshold} (${reading?.ok ? `no ${name} in the reward` : 'no reward'})`;
    if (actual < threshold) return `${name}=${actual} below min_reward ${threshold}`;
  }
  return undefined;
}

function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : typeof value;
}

/** A reward an earlier command (or the agent's change) left behind must never pass for this run's. */
export async function clearReward(box: Sandbox, dir: string, signal?: AbortSignal): Promise<void> {
  await box.exec(`rm -rf -- ${shellQuote(dir)}`, { timeoutMs: 30_000, ...(signal ? { signal } : {}) });
}

/**
 * reward.json first (Harbor reads it first: its named values are the richer answer), else
 * reward.txt; neither is a reason. A reward.json that is there but refused is the answer: a
 * reward.txt beside it never stands in for it.
 */
export async function readReward(box: Sandbox, dir: string, signal?: AbortSignal): Promise<RewardReading> {
  const json = await readBounded(box, `${dir}/reward.json`, signal);
  if (json.state === 'read') return parseRewardJson(json.bytes.toString('utf8'));
  if (json.state === 'refused') return { ok: false, reason: json.reason };
  const txt = await readBounded(box, `${dir}/reward.txt`, signal);
  if (txt.state === 'read') return parseRewardText(txt.bytes.toString('utf8'));
  if (txt.state === 'refused') return { ok: false, reason: txt.reason };
  return {
    ok: false,
    reason: 'the verifier wrote no reward (neither reward.json nor reward.txt in /logs/verifier)',
  };
}

type Read = { state: 'read'; bytes: Buffer } | { state: 'missing' } | { state: 'refused'; reason: string };

async function readBounded(box: Sandbox, path: string, signal?: AbortSignal): Promise<Read> {
  const name = path.split('/').pop()!;
  try {
    const bytes = await box.readFile(path, {
      maxBytes: REWARD_LIMITS.maxBytes,
      ...(signal ? { signal } : {}),
    });
    return { state: 'read', bytes };
  } catch (error) {
    if (!(error instanceof SandboxFileError)) throw error;
    switch (error.problem) {
      case 'missing':
        return { state: 'missing' };
      case 'too-large':
        return { state: 'refused', reason: `${name} refused: larger than ${REWARD_LIMITS.maxBytes} bytes` };
      case 'through-link':
        return { state: 'refused', reason: `${name} refused: it is a symlink, or a folder on the way is` };
      case 'not-a-file':
      case 'is-a-directory':
        return { state: 'refused', reason: `${name} refused: not a regular file` };
      default:
        return { state: 'refused', reason: `${name} could not be read (${error.message})` };
    }
  }
}

/** What the maker is told: the score, never the verifier's output (its tests are hidden from it). */
export function rewardFeedback(reading: RewardReading): string {
  return reading.ok
    ? `Your change was applied to a fresh copy of the environment and the task's verifier, which you cannot see, scored it ${reading.reward.score} (${REWARD_TO_PASS} is needed). Read the instruction again and do what it asks.`
    : `Your change was applied to a fresh copy of the environment, but the task's verifier left no score that could be read (${reading.reason}), so it does not count as done.`;
}

/** A reading as run.json keeps it. */
export interface RewardRecord {
  status: 'read' | 'refused';
  score?: number;
  values?: Record<string, number>;
  file?: string;
  reason?: string;
}

/** The attempt record's view of a reading (run.json). */
export function rewardRecord(reading: RewardReading): RewardRecord {
  return reading.ok
    ? {
        status: 'read',
        score: reading.reward.score,
        values: reading.reward.values,
        file: reading.reward.file,
      }
    : { status: 'refused', reason: reading.reason };
}
