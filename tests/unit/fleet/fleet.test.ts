import { describe, expect, it } from 'vitest';
import { SandboxUnavailable } from '../../../src/errors.js';
import type { EngineSpec } from '../../../src/sandbox/docker/fleet/engines-file.js';
import { connectFleet, type EngineClient } from '../../../src/fleet/fleet.js';
import type { EngineInfo } from '../../../src/sandbox/docker/engine/index.js';

/** An engine that answers (or not) as the test says, with the CPUs it says. */
class FakeEngine implements EngineClient {
  answering = true;
  /** Stopped answering without refusing: a ping only ends by its own time limit. */
  hanging = false;
  pings = 0;
  constructor(private readonly cpus: number) {}
  async ping(timeoutMs = 3000): Promise<void> {
    this.pings++;
    if (this.hanging) {
      await new Promise((resolve) => setTimeout(resolve, timeoutMs));
      throw new SandboxUnavailable('Docker engine check: cannot reach the Docker engine (ETIMEDOUT)');
    }
    if (!this.answering)
      throw new SandboxUnavailable('Docker engine check: cannot reach the Docker engine (ECONNREFUSED)');
  }
  async info(): Promise<EngineInfo> {
    return { cpus: this.cpus } as EngineInfo;
  }
}

const spec = (name: string, capacity?: number): EngineSpec => ({
  name,
  endpoint: { transport: 'unix', socketPath: `/run/${name}.sock` },
  origin: `engines.yaml (${name})`,
  ...(capacity === undefined ? {} : { capacity }),
});

async function fleetOf(fakes: Record<string, FakeEngine>, specs: EngineSpec[], concurrency?: number) {
  return connectFleet(specs, {
    trialCpus: 1,
    ...(concurrency === undefined ? {} : { concurrency }),
    connect: (s) => fakes[s.name] as FakeEngine,
  });
}

describe('a fleet of engines for one eval', () => {
  it('gives each engine its capacity from the engines file, else from its CPUs and the trial CPU limit', async () => {
    const fleet = await connectFleet([spec('big'), spec('fixed', 3)], {
      trialCpus: 2,
      connect: (s) => new FakeEngine(s.name === 'big' ? 8 : 64),
    });
    expect(fleet.engines.map((e) => [e.name, e.capacity, e.capacityFrom, e.endpoint])).toEqual([
      ['big', 4, 'cpus', 'unix:///run/big.sock'],
      ['fixed', 3, 'engines file', 'unix:///run/fixed.sock'],
    ]);
  });

  it('refuses to start when an engine does not answer, naming every such engine and where it was listed', async () => {
    const down = new FakeEngine(2);
    down.answering = false;
    const error = await fleetOf({ up: new FakeEngine(2), down }, [spec('up'), spec('down')]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect((error as Error).message).toBe(
      'an engine does not answer:\n  down (engines.yaml (down)): Docker engine check: cannot reach the Docker engine (ECONNREFUSED)',
    );
  });

  it('places trials by free capacity under the global cap and hands out the engine client with the slot', async () => {
    const fakes = { a: new FakeEngine(2), b: new FakeEngine(4) };
    const fleet = await fleetOf(fakes, [spec('a'), spec('b')], 3);
    const slots = [await fleet.acquire(), await fleet.acquire(), await fleet.acquire()];
    expect(slots.map((s) => s.engine.name)).toEqual(['b', 'b', 'a']);
    expect(slots[0]?.engine.engine).toBe(fakes.b);
    expect(fleet.loads().map((l) => l.running)).toEqual([1, 2]);
  });

  it('keeps an engine that still answers after a failure, and never places on one that stopped answering', async () => {
    const fakes = { a: new FakeEngine(4), b: new FakeEngine(1) };
    const fleet = await fleetOf(fakes, [spec('a'), spec('b')]);
    const onA = await fleet.acquire();
    expect(onA.engine.name).toBe('a');
    expect(await fleet.checkEngine('a', { delayMs: 0 })).toBe('alive');

    fakes.a.answering = false;
    const before = fakes.a.pings;
    expect(await fleet.checkEngine('a', { attempts: 3, delayMs: 0 })).toBe('lost');
    expect(fakes.a.pings - before).toBe(3);
    onA.release();
    // The retry of the lost engine's trial lands elsewhere, even though `a` has more room.
    expect((await fleet.acquire()).engine.name).toBe('b');
    // Lost stays lost, even if it answers again: its containers and images are suspect now.
    fakes.a.answering = true;
    expect(await fleet.checkEngine('a')).toBe('lost');
    expect(fleet.loads()[0]).toMatchObject({
      lost: true,
      lostReason: expect.stringMatching(/^no answer to 3 pings: /),
    });
  });
});

describe('a lost engine stops its trials at once', () => {
  it('aborts the slots on an engine found lost, with an error naming it, and tells who listens once', async () => {
    const fakes = { a: new FakeEngine(2), b: new FakeEngine(2) };
    const fleet = await fleetOf(fakes, [spec('a'), spec('b')]);
    const lost: string[] = [];
    fleet.onLost((engine, reason) => lost.push(`${engine}: ${reason}`));
    const onA = await fleet.acquire();
    const onB = await fleet.acquire();
    expect([onA.engine.name, onB.engine.name]).toEqual(['a', 'b']);
    fakes.b.answering = false;
    // Three trials failed on b at once: one check for all of them.
    const checks = await Promise.all(
      [1, 2, 3].map(() => fleet.checkEngine('b', { attempts: 2, delayMs: 0 })),
    );
    expect(checks).toEqual(['lost', 'lost', 'lost']);
    expect(fakes.b.pings).toBe(3); // 1 at connect + 2 for the shared check
    expect(onB.lost.aborted).toBe(true);
    expect(onB.lost.reason).toBeInstanceOf(SandboxUnavailable);
    expect((onB.lost.reason as Error).message).toMatch(
      /^engine b \(unix:\/\/\/run\/b\.sock\) stopped answering: no answer to 2 pings: /,
    );
    expect(onA.lost.aborted).toBe(false);
    expect(lost).toEqual([expect.stringMatching(/^b: no answer to 2 pings/)]);
    fleet.markLost('b', 'again');
    expect(lost).toHaveLength(1);
  });

  it('finds an engine that hangs while it runs trials, and leaves idle engines alone', async () => {
    const fakes = { a: new FakeEngine(2), b: new FakeEngine(2) };
    const fleet = await fleetOf(fakes, [spec('a'), spec('b')]);
    const slot = await fleet.acquire({ avoid: new Set(['a']) });
    expect(slot.engine.name).toBe('b');
    fakes.b.hanging = true;
    const pingsOfA = fakes.a.pings;
    const stop = fleet.monitor({ intervalMs: 5, timeoutMs: 10, misses: 3 });
    try {
      await new Promise<void>((resolve) => slot.lost.addEventListener('abort', () => resolve()));
    } finally {
      stop();
    }
    expect(fleet.loads().map((l) => [l.name, l.lost])).toEqual([
      ['a', false],
      ['b', true],
    ]);
    expect((slot.lost.reason as Error).message).toMatch(/no answer to 3 pings in a row: .*ETIMEDOUT/);
    // a ran no trial: the monitor did not ping it.
    expect(fakes.a.pings).toBe(pingsOfA);
  });

  it('forgets missed pings of an engine that answers again before it is lost', async () => {
    const fakes = { a: new FakeEngine(2) };
    const fleet = await fleetOf(fakes, [spec('a')]);
    await fleet.acquire();
    fakes.a.answering = false;
    const stop = fleet.monitor({ intervalMs: 5, timeoutMs: 10, misses: 3 });
    try {
      // Two misses, then it answers, then two more misses: never three in a row.
      await waitFor(() => fakes.a.pings >= 3);
      fakes.a.answering = true;
      await waitFor(() => fakes.a.pings >= 5);
      fakes.a.answering = false;
      const at = fakes.a.pings;
      await waitFor(() => fakes.a.pings >= at + 2);
      fakes.a.answering = true;
    } finally {
      stop();
    }
    expect(fleet.loads()[0]?.lost).toBe(false);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 1));
}
