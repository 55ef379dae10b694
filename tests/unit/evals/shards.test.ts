import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/errors.js';
import { chooseShard, parseShard, SHARD_COUNT_ENV } from '../../../src/evals/shards.js';

describe('--shard K/N', () => {
  it('parses K/N counted from 1', () => {
    expect(parseShard('--shard', '2/4')).toEqual({ index: 2, count: 4 });
    expect(parseShard('--shard', ' 1 / 1 ')).toEqual({ index: 1, count: 1 });
  });

  it.each(['0/4', '5/4', '2', '2/0', 'a/b', '-1/2', '1/100000', '1.5/2', ''])(
    'refuses %j, naming the flag and the text',
    (text) => {
      expect(() => parseShard('--shard', text)).toThrow(UsageError);
      expect(() => parseShard('--shard', text)).toThrow(`--shard: expected K/N`);
    },
  );
});

describe('the shard from the environment', () => {
  it('takes the flag over the environment, and 1/1 as not sharded', () => {
    const env = { SLURM_ARRAY_TASK_ID: '3', SLURM_ARRAY_TASK_MIN: '0', SLURM_ARRAY_TASK_COUNT: '4' };
    expect(chooseShard({ index: 2, count: 3 }, env)).toEqual({
      shard: { index: 2, count: 3 },
      from: '--shard',
    });
    expect(chooseShard({ index: 1, count: 1 }, env)).toBeUndefined();
  });

  it('reads a Slurm array task: K is the id counted from the array minimum, N the count', () => {
    expect(
      chooseShard(undefined, {
        SLURM_ARRAY_TASK_ID: '0',
        SLURM_ARRAY_TASK_MIN: '0',
        SLURM_ARRAY_TASK_COUNT: '4',
      })?.shard,
    ).toEqual({ index: 1, count: 4 });
    expect(
      chooseShard(undefined, {
        SLURM_ARRAY_TASK_ID: '4',
        SLURM_ARRAY_TASK_MIN: '1',
        SLURM_ARRAY_TASK_MAX: '4',
        SLURM_ARRAY_TASK_COUNT: '4',
      })?.shard,
    ).toEqual({ index: 4, count: 4 });
  });

  it('refuses a Slurm array with gaps or a step, and a task id outside its array', () => {
    expect(() =>
      chooseShard(undefined, {
        SLURM_ARRAY_TASK_ID: '2',
        SLURM_ARRAY_TASK_MIN: '0',
        SLURM_ARRAY_TASK_MAX: '10',
        SLURM_ARRAY_TASK_COUNT: '6',
      }),
    ).toThrow(/gaps or a step/);
    expect(() =>
      chooseShard(undefined, {
        SLURM_ARRAY_TASK_ID: '9',
        SLURM_ARRAY_TASK_MIN: '0',
        SLURM_ARRAY_TASK_COUNT: '4',
      }),
    ).toThrow(/not a shard/);
    expect(() => chooseShard(undefined, { SLURM_ARRAY_TASK_ID: '1' })).toThrow(/cannot tell which shard/);
    expect(() =>
      chooseShard(undefined, {
        SLURM_ARRAY_TASK_ID: 'x',
        SLURM_ARRAY_TASK_MIN: '0',
        SLURM_ARRAY_TASK_COUNT: '2',
      }),
    ).toThrow(/SLURM_ARRAY_TASK_ID: expected a whole number/);
  });

  it('reads a Kubernetes Indexed Job: the 0-based completion index, the count from --shard-count or the environment', () => {
    expect(chooseShard(undefined, { JOB_COMPLETION_INDEX: '0' }, 3)?.shard).toEqual({ index: 1, count: 3 });
    expect(chooseShard(undefined, { JOB_COMPLETION_INDEX: '2', [SHARD_COUNT_ENV]: '3' })?.shard).toEqual({
      index: 3,
      count: 3,
    });
    expect(() => chooseShard(undefined, { JOB_COMPLETION_INDEX: '2' })).toThrow(/--shard-count N/);
    expect(() => chooseShard(undefined, { JOB_COMPLETION_INDEX: '3' }, 3)).toThrow(/not a shard/);
  });

  it('is unsharded with nothing set, or an array of one; --shard-count alone or beside --shard is refused', () => {
    expect(chooseShard(undefined, {})).toBeUndefined();
    expect(
      chooseShard(undefined, {
        SLURM_ARRAY_TASK_ID: '5',
        SLURM_ARRAY_TASK_MIN: '5',
        SLURM_ARRAY_TASK_COUNT: '1',
      }),
    ).toBeUndefined();
    expect(() => chooseShard(undefined, {}, 3)).toThrow(/--shard-count needs JOB_COMPLETION_INDEX/);
    expect(() => chooseShard({ index: 1, count: 2 }, {}, 2)).toThrow(
      /--shard-count goes with JOB_COMPLETION_INDEX/,
    );
  });
});
