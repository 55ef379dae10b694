/**
 * Which shard of a sharded eval this process runs: `--shard K/N` (1-based, as people count),
 * else what the cluster says in the environment: a Slurm array job's task id (its array may
 * start anywhere, `--array=0-3` or `--array=1-4`: K is the id's place in the array), or a
 * Kubernetes Indexed Job's completion index (0-based) with the shard count given separately
 * (Kubernetes does not put the completions count in the environment).
 */
import { UsageError } from '../errors.js';
import type { Shard } from './trial-plan.js';

/** More shards than this is a typo, not a cluster. */
export const MAX_SHARDS = 10_000;

/** Where the count of an Indexed Job's shards may come from besides `--shard-count`. */
export const SHARD_COUNT_ENV = 'SANDBOX_HARNESS_SHARD_COUNT';

export interface ChosenShard {
  shard: Shard;
  /** Where it came from, for the progress line (`--shard`, `SLURM_ARRAY_TASK_ID=5 of 4 from 4`). */
  from: string;
}

/** `K/N` with 1 <= K <= N <= MAX_SHARDS, or a usage error naming `flag` and the text. */
export function parseShard(flag: string, text: string): Shard {
  const match = /^\s*(\d{1,6})\s*\/\s*(\d{1,6})\s*$/.exec(text);
  const index = Number(match?.[1]);
  const count = Number(match?.[2]);
  if (!match || count < 1 || count > MAX_SHARDS || index < 1 || index > count)
    throw new UsageError(
      `${flag}: expected K/N, shard K (counted from 1) of N shards, 1 <= K <= N <= ${MAX_SHARDS}, got "${text}"`,
    );
  return { index, count };
}

/** A whole number from the environment, or a usage error naming the variable. */
function envInteger(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const text = env[name];
  if (text === undefined || text === '') return undefined;
  const value = /^\d{1,9}$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min)
    throw new UsageError(`${name}: expected a whole number of at least ${min}, got "${text}"`);
  return value;
}

function checked(index: number, count: number, what: string): Shard {
  if (count < 1 || count > MAX_SHARDS || index < 1 || index > count)
    throw new UsageError(
      `${what} makes shard ${index} of ${count}, which is not a shard (1 <= K <= N <= ${MAX_SHARDS})`,
      { hint: 'give --shard K/N to choose the shard yourself (--shard 1/1: not sharded)' },
    );
  return { index, count };
}

/**
 * A Slurm array task: K = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1, N =
 * SLURM_ARRAY_TASK_COUNT. An array with gaps or a step (`--array=0-10:2`, `1,5,9`) numbers its
 * tasks unlike shards; that is refused rather than guessed (MAX - MIN + 1 must be COUNT).
 */
function fromSlurm(env: NodeJS.ProcessEnv): ChosenShard | undefined {
  const id = envInteger(env, 'SLURM_ARRAY_TASK_ID', 0);
  if (id === undefined) return undefined;
  const min = envInteger(env, 'SLURM_ARRAY_TASK_MIN', 0);
  const max = envInteger(env, 'SLURM_ARRAY_TASK_MAX', 0);
  const count =
    envInteger(env, 'SLURM_ARRAY_TASK_COUNT', 1) ??
    (min !== undefined && max !== undefined ? max - min + 1 : undefined);
  if (min === undefined || count === undefined)
    throw new UsageError(
      'SLURM_ARRAY_TASK_ID is set without SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT: cannot tell which shard this is',
      { hint: 'give --shard K/N' },
    );
  if (max !== undefined && max - min + 1 !== count)
    throw new UsageError(
      `the Slurm array has gaps or a step (SLURM_ARRAY_TASK_MIN=${min}, SLURM_ARRAY_TASK_MAX=${max}, SLURM_ARRAY_TASK_COUNT=${count}): its task ids are not shard numbers`,
      { hint: 'submit a contiguous array (sbatch --array=1-N), or give --shard K/N' },
    );
  return {
    shard: checked(
      id - min + 1,
      count,
      `SLURM_ARRAY_TASK_ID=${id} (SLURM_ARRAY_TASK_MIN=${min}, SLURM_ARRAY_TASK_COUNT=${count})`,
    ),
    from: `SLURM_ARRAY_TASK_ID=${id}, SLURM_ARRAY_TASK_MIN=${min}, SLURM_ARRAY_TASK_COUNT=${count}`,
  };
}

/** A Kubernetes Indexed Job: K = JOB_COMPLETION_INDEX + 1, N from `--shard-count` or SHARD_COUNT_ENV. */
function fromIndexedJob(env: NodeJS.ProcessEnv, countFlag: number | undefined): ChosenShard | undefined {
  const index = envInteger(env, 'JOB_COMPLETION_INDEX', 0);
  if (index === undefined) return undefined;
  const count = countFlag ?? envInteger(env, SHARD_COUNT_ENV, 1);
  if (count === undefined)
    throw new UsageError(
      `JOB_COMPLETION_INDEX=${index} is set but not the number of shards: give --shard-count N or ${SHARD_COUNT_ENV}=N (the Job's completions)`,
    );
  const countFrom = countFlag !== undefined ? `--shard-count ${count}` : `${SHARD_COUNT_ENV}=${count}`;
  return {
    shard: checked(index + 1, count, `JOB_COMPLETION_INDEX=${index} with ${countFrom}`),
    from: `JOB_COMPLETION_INDEX=${index}, ${countFrom}`,
  };
}

/**
 * The shard to run: `--shard` when given (`1/1` runs unsharded, whatever the environment
 * says), else a Slurm array task, else an Indexed Job; undefined: not sharded.
 */
export function chooseShard(
  flag: Shard | undefined,
  env: NodeJS.ProcessEnv,
  countFlag?: number,
): ChosenShard | undefined {
  if (flag) {
    if (countFlag !== undefined)
      throw new UsageError(
        '--shard-count goes with JOB_COMPLETION_INDEX, not with --shard K/N (N is the count)',
      );
    return flag.count === 1 ? undefined : { shard: flag, from: '--shard' };
  }
  const chosen = fromSlurm(env) ?? fromIndexedJob(env, countFlag);
  if (!chosen && countFlag !== undefined)
    throw new UsageError(
      '--shard-count needs JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); elsewhere give --shard K/N',
    );
  return chosen && chosen.shard.count > 1 ? chosen : undefined;
}
