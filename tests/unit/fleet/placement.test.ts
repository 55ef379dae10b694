import { describe, expect, it } from 'vitest';
import { SandboxUnavailable } from '../../../src/errors.js';
import { defaultCapacity, pickEngine, Placement, type EngineLoad } from '../../../src/fleet/placement.js';

const load = (name: string, capacity: number, running = 0, lost = false): EngineLoad => ({
  name,
  capacity,
  running,
  lost,
});

describe('default capacity comes from the engine CPUs and the trial CPU limit', () => {
  it('gives an engine as many trials as its CPUs hold whole trials', () => {
    expect(defaultCapacity(8, 1)).toBe(8);
    expect(defaultCapacity(8, 2)).toBe(4);
    expect(defaultCapacity(8, 3)).toBe(2);
    expect(defaultCapacity(2, 0.5)).toBe(4);
    expect(defaultCapacity(3, 0.1)).toBe(30);
  });

  it('gives at least one trial, also to an engine smaller than one trial or one that reports no CPUs', () => {
    expect(defaultCapacity(1, 2)).toBe(1);
    expect(defaultCapacity(0, 1)).toBe(1);
    expect(defaultCapacity(Number.NaN, 1)).toBe(1);
  });

  it('takes a missing or nonsensical trial limit as one CPU', () => {
    expect(defaultCapacity(4, 0)).toBe(4);
    expect(defaultCapacity(4, Number.NaN)).toBe(4);
  });
});

describe('pickEngine places the next trial on the engine with the most free capacity', () => {
  it('picks the engine with the most free slots', () => {
    expect(pickEngine([load('a', 4, 3), load('b', 2, 0), load('c', 8, 7)])).toBe('b');
    expect(pickEngine([load('a', 4, 0), load('b', 8, 2)])).toBe('b');
  });

  it('breaks a tie in free slots by the lower share in use, then by list order', () => {
    expect(pickEngine([load('small', 2, 0), load('big', 4, 2)])).toBe('small');
    expect(pickEngine([load('big', 4, 2), load('small', 2, 0)])).toBe('small');
    expect(pickEngine([load('x', 2, 1), load('y', 2, 1)])).toBe('x');
  });

  it('never picks a full engine or a lost one', () => {
    expect(pickEngine([load('full', 2, 2), load('lost', 8, 0, true), load('ok', 1, 0)])).toBe('ok');
    expect(pickEngine([load('full', 2, 2), load('lost', 8, 0, true)])).toBeUndefined();
  });

  it('honours the global concurrency cap over all engines', () => {
    expect(pickEngine([load('a', 4, 1), load('b', 4, 1)], 2)).toBeUndefined();
    expect(pickEngine([load('a', 4, 1), load('b', 4, 1)], 3)).toBe('a');
  });
});

describe('Placement keeps the count of running trials per engine', () => {
  it('spreads trials over engines by free capacity and frees a slot on release', () => {
    const placement = new Placement([
      { name: 'local', capacity: 2 },
      { name: 'remote', capacity: 4 },
    ]);
    const engines = Array.from({ length: 6 }, () => placement.tryAcquire()?.engine);
    expect(engines).toEqual(['remote', 'remote', 'local', 'remote', 'local', 'remote']);
    expect(placement.tryAcquire()).toBeUndefined();
    expect(placement.loads().map((e) => e.running)).toEqual([2, 4]);
  });

  it('counts a lease once however often it is released', () => {
    const placement = new Placement([{ name: 'a', capacity: 2 }]);
    const first = placement.tryAcquire();
    placement.tryAcquire();
    first?.release();
    first?.release();
    expect(placement.loads()[0]?.running).toBe(1);
  });

  it('never runs more trials at once than --concurrency, whatever the capacities', () => {
    const placement = new Placement(
      [
        { name: 'a', capacity: 4 },
        { name: 'b', capacity: 4 },
      ],
      3,
    );
    const leases = [placement.tryAcquire(), placement.tryAcquire(), placement.tryAcquire()];
    expect(leases.every((l) => l !== undefined)).toBe(true);
    expect(placement.tryAcquire()).toBeUndefined();
    leases[0]?.release();
    expect(placement.tryAcquire()).toBeDefined();
  });

  it('makes acquire() wait for a free slot and serves waiters first come, first served', async () => {
    const placement = new Placement([{ name: 'only', capacity: 1 }]);
    const first = await placement.acquire();
    const order: string[] = [];
    const second = placement.acquire().then((l) => (order.push('second'), l));
    const third = placement.acquire().then((l) => (order.push('third'), l));
    // A waiter is ahead: tryAcquire must not jump the queue even when a slot frees.
    first.release();
    expect(placement.tryAcquire()).toBeUndefined();
    (await second).release();
    (await third).release();
    expect(order).toEqual(['second', 'third']);
  });

  it('never places on an engine after it was marked lost, and the next trial goes elsewhere', () => {
    const placement = new Placement([
      { name: 'a', capacity: 4 },
      { name: 'b', capacity: 1 },
    ]);
    const onA = placement.tryAcquire();
    expect(onA?.engine).toBe('a');
    placement.markLost('a', 'no answer to _ping for 10 s');
    expect(placement.isLost('a')).toBe(true);
    expect(placement.tryAcquire()?.engine).toBe('b');
    onA?.release();
    expect(placement.tryAcquire()).toBeUndefined();
    expect(placement.loads()[0]).toMatchObject({
      name: 'a',
      lost: true,
      lostReason: 'no answer to _ping for 10 s',
    });
  });

  it('fails waiting and later acquires as infrastructure once every engine is lost', async () => {
    const placement = new Placement([
      { name: 'a', capacity: 1 },
      { name: 'b', capacity: 1 },
    ]);
    await placement.acquire();
    await placement.acquire();
    const waiting = placement.acquire();
    placement.markLost('a', 'gone');
    placement.markLost('b', 'gone too');
    await expect(waiting).rejects.toBeInstanceOf(SandboxUnavailable);
    await expect(placement.acquire()).rejects.toThrow(
      /every engine of this eval is lost: a \(gone\), b \(gone too\)/,
    );
  });

  it('gives up waiting when the signal aborts, and the slot then goes to the next waiter', async () => {
    const placement = new Placement([{ name: 'only', capacity: 1 }]);
    const held = await placement.acquire();
    const controller = new AbortController();
    const aborted = placement.acquire(controller.signal);
    const next = placement.acquire();
    controller.abort(new Error('Ctrl-C'));
    await expect(aborted).rejects.toThrow('Ctrl-C');
    held.release();
    expect((await next).engine).toBe('only');
  });

  it('refuses a placement without engines, with a duplicate, or with a capacity below 1', () => {
    expect(() => new Placement([])).toThrow(/at least one engine/);
    expect(
      () =>
        new Placement([
          { name: 'a', capacity: 1 },
          { name: 'a', capacity: 2 },
        ]),
    ).toThrow(/listed twice/);
    expect(() => new Placement([{ name: 'a', capacity: 0 }])).toThrow(/positive integer/);
    expect(() => new Placement([{ name: 'a', capacity: 1 }], 0)).toThrow(/concurrency/);
  });
});

describe('a retry avoids the engine of its first try', () => {
  it('picks another engine even when the avoided one has more room', () => {
    const loads = [load('a', 8, 0), load('b', 2, 1)];
    expect(pickEngine(loads, undefined, new Set(['a']))).toBe('b');
  });

  it('waits for another live engine that is full rather than going back', () => {
    expect(pickEngine([load('a', 8, 0), load('b', 1, 1)], undefined, new Set(['a']))).toBeUndefined();
  });

  it('goes back to the avoided engine when it is the only live one, and never to a lost one', () => {
    expect(pickEngine([load('a', 2, 0), load('b', 2, 0, true)], undefined, new Set(['a']))).toBe('a');
    expect(pickEngine([load('a', 2, 0, true), load('b', 2, 0)], undefined, new Set(['a']))).toBe('b');
  });

  it('does not let a waiting retry hold up the trials behind it', async () => {
    const placement = new Placement([
      { name: 'a', capacity: 1 },
      { name: 'b', capacity: 1 },
    ]);
    const onA = await placement.acquire();
    const onB = await placement.acquire();
    expect([onA.engine, onB.engine]).toEqual(['a', 'b']);
    const retry = placement.acquire({ avoid: new Set(['a']), first: true });
    const next = placement.acquire();
    onA.release();
    // `a` is free but the retry avoids it: the next trial takes it, the retry waits for `b`.
    expect((await next).engine).toBe('a');
    onB.release();
    expect((await retry).engine).toBe('b');
  });

  it('serves a retry before trials that were already waiting', async () => {
    const placement = new Placement([{ name: 'only', capacity: 1 }]);
    const held = await placement.acquire();
    const order: string[] = [];
    const waiting = placement.acquire().then((l) => (order.push('waiting'), l));
    // The trial that held the slot failed as infrastructure and hands it over to its retry.
    held.release({ handOver: true });
    const retry = placement.acquire({ avoid: new Set(['only']), first: true }).then((l) => {
      order.push('retry');
      return l;
    });
    (await retry).release();
    (await waiting).release();
    expect(order).toEqual(['retry', 'waiting']);
  });

  it('gives a waiting retry the engine it avoided as soon as every other engine is lost', async () => {
    const placement = new Placement([
      { name: 'a', capacity: 2 },
      { name: 'b', capacity: 1 },
    ]);
    await placement.acquire({ avoid: new Set(['a']) }); // b, busy
    let placed: string | undefined;
    const retry = placement.acquire({ avoid: new Set(['a']), first: true }).then((l) => (placed = l.engine));
    await Promise.resolve();
    // `a` has room, but `b` still lives: the retry waits for `b`.
    expect(placed).toBeUndefined();
    placement.markLost('b', 'gone');
    await retry;
    expect(placed).toBe('a');
  });
});
