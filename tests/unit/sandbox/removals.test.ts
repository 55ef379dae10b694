import { describe, expect, it } from 'vitest';
import { BackgroundRemovals } from '../../../src/sandbox/removals.js';

/** A removal that ends when `finish` is called (or fails with `fail`). */
function pending(): {
  run: () => Promise<void>;
  finish: () => void;
  fail: (why: string) => void;
  started: () => boolean;
} {
  let finish = () => {};
  let fail = (_why: string) => {};
  let started = false;
  return {
    run: () => {
      started = true;
      return new Promise<void>((resolve, reject) => {
        finish = resolve;
        fail = (why) => reject(new Error(why));
      });
    },
    finish: () => finish(),
    fail: (why) => fail(why),
    started: () => started,
  };
}

describe('BackgroundRemovals', () => {
  it('takes a removal over at once and settles only once it ended', async () => {
    const removals = new BackgroundRemovals();
    const one = pending();
    await removals.add('attempt-1', one.run);
    expect(one.started()).toBe(true);
    expect(removals.size).toBe(1);
    let settled = false;
    const settling = removals.settle().then(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(settled).toBe(false);
    one.finish();
    await settling;
    expect(removals.size).toBe(0);
  });

  it('keeps a failure for settle instead of rejecting, and tells it once', async () => {
    const removals = new BackgroundRemovals();
    const one = pending();
    await removals.add('verify-1 (abc)', one.run);
    one.fail('engine gone');
    expect(await removals.settle()).toEqual([{ what: 'verify-1 (abc)', message: 'engine gone' }]);
    expect(await removals.settle()).toEqual([]);
  });

  it('waits for room past its limit, so a slow engine does not pile removals up', async () => {
    const removals = new BackgroundRemovals(2);
    const [a, b, c] = [pending(), pending(), pending()];
    await removals.add('a', a.run);
    await removals.add('b', b.run);
    let added = false;
    const third = removals.add('c', c.run).then(() => (added = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(added).toBe(false);
    expect(c.started()).toBe(false);
    a.finish();
    await third;
    expect(c.started()).toBe(true);
    b.finish();
    c.finish();
    await removals.settle();
  });

  it('settle waits also for removals added while it waits', async () => {
    const removals = new BackgroundRemovals();
    const [a, b] = [pending(), pending()];
    await removals.add('a', a.run);
    const settling = removals.settle();
    await removals.add('b', b.run);
    a.finish();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(removals.size).toBe(1);
    b.finish();
    await settling;
    expect(removals.size).toBe(0);
  });
});
