/**
 * The trial plan: which trials an eval has, how each is named, and which shard runs it. It is
 * a function of the suite and the settings alone (never of a folder listing, a clock or the
 * machine), so every shard of a sharded eval, on any machine, computes the same plan and the
 * same split; a Slurm placement of trials can take the same list.
 *
 * A trial is named by its `TrialId`. An eval that runs several agents will add the agent to
 * it: the key, the file name of a trial's result and the plan's order are all built from
 * `TRIAL_ID_FIELDS`, so a field added there (and to `TrialId`) joins all three.
 */
import { sha256 } from '../changes/hash.js';
import { trialSpecs, type Suite } from './suite.js';
import type { TrialSpec } from './types.js';

/** What names one trial of a plan. */
export interface TrialId {
  taskId: string;
  /** 0-based index of the trial within its task. */
  trial: number;
}

/** The fields of a `TrialId`, in the order the plan sorts by (the trial number first: see `planOrder`). */
const TRIAL_ID_FIELDS = ['trial', 'taskId'] as const satisfies ReadonlyArray<keyof TrialId>;

/** A trial's key in maps and sets of trials: every field of its id, unambiguously. */
export function trialKey(id: TrialId): string {
  return JSON.stringify(TRIAL_ID_FIELDS.map((field) => id[field]));
}

/** How messages name a trial (`fixes-threshold#2`). */
export function trialLabel(id: TrialId): string {
  return `${id.taskId}#${id.trial}`;
}

/**
 * The trial's result file name: readable (the task id with anything unusual replaced, the
 * trial number) and unique (a hash of the key), so two task ids that read alike never share
 * a file. Only `[A-Za-z0-9._-]`: safe on every file system, never hidden, never `..`.
 */
export function trialFileName(id: TrialId): string {
  const readable =
    id.taskId
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .replace(/^[._-]+/, '')
      .slice(0, 80) || 'task';
  return `${readable}.t${id.trial}.${sha256(trialKey(id)).slice(0, 12)}.json`;
}

/** Code-point order (never the locale's), field by field. */
function compareIds(a: TrialId, b: TrialId): number {
  for (const field of TRIAL_ID_FIELDS) {
    const x = a[field];
    const y = b[field];
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/**
 * Every trial in the plan's order: trial 0 of every task (by task id), then trial 1, ... The
 * order of the suite's list is left out on purpose: two sources may list the same tasks in
 * different orders (a folder read on two machines), the plan must not change with it.
 */
export function planOrder<T extends TrialId>(trials: readonly T[]): T[] {
  return [...trials].sort(compareIds);
}

/** Shard `index` (1-based) of `count`. */
export interface Shard {
  index: number;
  count: number;
}

/** How a shard is written in flags, messages and folder names (`2/4`, `2-of-4`). */
export function shardLabel(shard: Shard): string {
  return `${shard.index}/${shard.count}`;
}

export function shardFolderName(shard: Shard): string {
  return `${shard.index}-of-${shard.count}`;
}

/**
 * Which shard runs a trial: the plan's order dealt out like cards (the i-th trial to shard
 * i mod N, 1-based), so every shard gets every task's trials in turn and the shards' sizes
 * differ by at most one.
 */
export function shardAssignment(trials: readonly TrialId[], count: number): Map<string, number> {
  const shards = new Map<string, number>();
  planOrder(trials).forEach((id, i) => shards.set(trialKey(id), (i % count) + 1));
  return shards;
}

/** The trials of the eval (every one, or one shard's), as specs in the suite's order for running. */
export interface TrialPlan {
  /** Every trial of the eval, in trial-major suite order (how trials start). */
  all: TrialSpec[];
  /** The ones this run is for (a shard's, or all). */
  mine: TrialSpec[];
  /** Whose shard each trial is, by key (absent: unsharded). */
  shardOf?: Map<string, number>;
}

export function planTrials(suite: Suite, n: number, shard?: Shard): TrialPlan {
  const all = trialSpecs(suite, n);
  if (!shard || shard.count === 1) return { all, mine: all };
  const shardOf = shardAssignment(all, shard.count);
  return { all, mine: all.filter((s) => shardOf.get(trialKey(s)) === shard.index), shardOf };
}
