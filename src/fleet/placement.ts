/**
 * Where the next trial runs: on the engine with the most free capacity, never above the
 * eval's global `--concurrency`, never on an engine that was lost. No I/O here: the caller
 * says which engines exist, how much each takes, and which one stopped answering; this
 * module only keeps the count and decides.
 *
 * For the scheduler: `acquire()` replaces the one global concurrency limit; the trial runs
 * on `lease.engine` and calls `lease.release()` when it ends (any outcome). After an
 * infrastructure failure the caller checks the engine and calls `markLost()` if it is gone;
 * the trial's retry then lands elsewhere, because a lost engine is never picked again, and
 * because a retry asks to `avoid` the engine of its first try (which it gets back only when
 * no other engine is left).
 */
import { SandboxUnavailable } from '../errors.js';

export interface PlacementEngine {
  name: string;
  /** Trials at once on this engine (at least 1). */
  capacity: number;
}

export interface EngineLoad extends PlacementEngine {
  running: number;
  lost: boolean;
  lostReason?: string;
}

/**
 * How many trials an engine takes by default: its CPUs over the CPUs one trial may use (the
 * catalog's sandbox CPU limit), at least 1. An engine that reports no CPUs gets 1.
 */
export function defaultCapacity(engineCpus: number, trialCpus: number): number {
  if (!Number.isFinite(engineCpus) || engineCpus <= 0) return 1;
  const perTrial = Number.isFinite(trialCpus) && trialCpus > 0 ? trialCpus : 1;
  // The epsilon keeps 3 / 0.1 from landing just below 30.
  return Math.max(1, Math.floor(engineCpus / perTrial + 1e-9));
}

/**
 * The engine for the next trial, or undefined when none may take one now (every live engine
 * full, the global cap reached, or every engine lost). Most free slots first; on a tie, the
 * lower share in use (a big engine half full before a small one half full), then list order.
 *
 * `avoid`: engines this trial should not run on (the one its first try failed on). They are
 * left out while any other engine is live, even a full one (the trial then waits for it);
 * when every live engine is avoided, they are used after all: a retry on the same engine
 * beats no retry.
 */
export function pickEngine(
  loads: readonly EngineLoad[],
  concurrency?: number,
  avoid: ReadonlySet<string> = new Set(),
): string | undefined {
  const running = loads.reduce((sum, e) => sum + e.running, 0);
  if (concurrency !== undefined && running >= concurrency) return undefined;
  const elsewhere = loads.some((e) => !e.lost && !avoid.has(e.name));
  let best: EngineLoad | undefined;
  for (const load of loads) {
    if (load.lost || load.running >= load.capacity) continue;
    if (elsewhere && avoid.has(load.name)) continue;
    if (!best || better(load, best)) best = load;
  }
  return best?.name;
}

function better(a: EngineLoad, b: EngineLoad): boolean {
  const freeA = a.capacity - a.running;
  const freeB = b.capacity - b.running;
  if (freeA !== freeB) return freeA > freeB;
  return a.running / a.capacity < b.running / b.capacity;
}

export interface Lease {
  readonly engine: string;
  /**
   * Frees the slot; calling it again does nothing. `handOver`: nobody waiting gets it now,
   * because the caller acquires again at once (a retry with `first`), which keeps a retry from
   * losing its turn to the trials queued behind it.
   */
  release(options?: { handOver?: boolean }): void;
}

export interface AcquireOptions {
  signal?: AbortSignal;
  /** Engines to stay off while another one is live (see `pickEngine`). */
  avoid?: ReadonlySet<string>;
  /** Served before every waiter without it (a retry should not queue behind the whole eval). */
  first?: boolean;
}

interface Waiter {
  avoid: ReadonlySet<string>;
  first: boolean;
  resolve(lease: Lease): void;
  reject(error: unknown): void;
}

export class Placement {
  private readonly engines: EngineLoad[];
  private readonly waiters: Waiter[] = [];
  /**
   * One abort listener per signal, whatever the number of waiters on it: every trial of an
   * eval waits on the eval's one signal, and a listener each (33 for 11 tasks x 3) is what
   * Node warns about as a leak (MaxListenersExceededWarning).
   */
  private readonly watched = new Map<AbortSignal, { waiters: Set<Waiter>; onAbort: () => void }>();

  /**
   * @param concurrency the global cap over all engines (`--concurrency`); absent: the sum
   *   of the capacities.
   */
  constructor(
    engines: readonly PlacementEngine[],
    private readonly concurrency?: number,
  ) {
    if (engines.length === 0) throw new RangeError('a placement needs at least one engine');
    const names = new Set<string>();
    for (const e of engines) {
      if (names.has(e.name)) throw new RangeError(`engine ${e.name} is listed twice`);
      if (!Number.isInteger(e.capacity) || e.capacity < 1) {
        throw new RangeError(`engine ${e.name}: capacity must be a positive integer, got ${e.capacity}`);
      }
      names.add(e.name);
    }
    if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1)) {
      throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
    }
    this.engines = engines.map((e) => ({ name: e.name, capacity: e.capacity, running: 0, lost: false }));
  }

  /** A slot now, or undefined when none is free. Waiting callers go first. */
  tryAcquire(): Lease | undefined {
    if (this.waiters.length > 0) return undefined;
    return this.take(new Set());
  }

  /**
   * A slot as soon as one is free, first come first served (`first`: ahead of the others).
   * A waiter that cannot use a free slot (it avoids that engine) does not hold up the
   * waiters behind it. Rejects with SandboxUnavailable once every engine is lost, and with
   * the signal's reason when it aborts. (`acquire(signal)` is `acquire({ signal })`.)
   */
  acquire(options: AcquireOptions | AbortSignal = {}): Promise<Lease> {
    const {
      signal,
      avoid = new Set<string>(),
      first = false,
    } = options instanceof AbortSignal ? { signal: options } : options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const allLost = this.allLostError();
    if (allLost) return Promise.reject(allLost);
    if (this.waiters.length === 0) {
      const lease = this.take(avoid);
      if (lease) return Promise.resolve(lease);
    }
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        avoid,
        first,
        resolve: (lease) => {
          this.unwatch(signal, waiter);
          resolve(lease);
        },
        reject: (error) => {
          this.unwatch(signal, waiter);
          reject(error);
        },
      };
      this.watch(signal, waiter);
      const behind = first ? this.waiters.findIndex((w) => !w.first) : -1;
      if (behind >= 0) this.waiters.splice(behind, 0, waiter);
      else this.waiters.push(waiter);
      // A free slot this waiter can use (the ones ahead avoid it) is handed out now.
      this.wake();
    });
  }

  /** Rejects `waiter` when `signal` aborts, through the signal's one listener. */
  private watch(signal: AbortSignal | undefined, waiter: Waiter): void {
    if (!signal) return;
    let entry = this.watched.get(signal);
    if (!entry) {
      const waiters = new Set<Waiter>();
      const onAbort = () => {
        this.watched.delete(signal);
        for (const w of waiters) {
          const index = this.waiters.indexOf(w);
          if (index >= 0) this.waiters.splice(index, 1);
          w.reject(signal.reason);
        }
      };
      entry = { waiters, onAbort };
      this.watched.set(signal, entry);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    entry.waiters.add(waiter);
  }

  private unwatch(signal: AbortSignal | undefined, waiter: Waiter): void {
    if (!signal) return;
    const entry = this.watched.get(signal);
    if (!entry) return;
    entry.waiters.delete(waiter);
    if (entry.waiters.size === 0) {
      this.watched.delete(signal);
      signal.removeEventListener('abort', entry.onAbort);
    }
  }

  /**
   * The engine stopped answering: nothing is placed on it again. Its running trials keep
   * their leases until they end (they fail as infrastructure and release them).
   */
  markLost(name: string, reason: string): void {
    const engine = this.find(name);
    if (engine.lost) return;
    engine.lost = true;
    engine.lostReason = reason;
    const allLost = this.allLostError();
    if (allLost) {
      for (const waiter of this.waiters.splice(0)) waiter.reject(allLost);
      return;
    }
    // A retry that avoided another engine may now have only the one it avoided left.
    this.wake();
  }

  isLost(name: string): boolean {
    return this.find(name).lost;
  }

  /** A copy of every engine's state, in the order given. */
  loads(): EngineLoad[] {
    return this.engines.map((e) => ({ ...e }));
  }

  private find(name: string): EngineLoad {
    const engine = this.engines.find((e) => e.name === name);
    if (!engine) throw new RangeError(`no engine named ${name} in this placement`);
    return engine;
  }

  private take(avoid: ReadonlySet<string>): Lease | undefined {
    const name = pickEngine(this.engines, this.concurrency, avoid);
    if (name === undefined) return undefined;
    const engine = this.find(name);
    engine.running++;
    let released = false;
    return {
      engine: name,
      release: (options = {}) => {
        if (released) return;
        released = true;
        engine.running--;
        if (!options.handOver) this.wake();
      },
    };
  }

  /** Hands free slots to waiters in order; one that can use none of them is skipped, not waited on. */
  private wake(): void {
    for (let i = 0; i < this.waiters.length;) {
      const waiter = this.waiters[i]!;
      const lease = this.take(waiter.avoid);
      if (!lease) {
        // Nothing free at all: nobody behind can be served either.
        if (pickEngine(this.engines, this.concurrency) === undefined) return;
        i++;
        continue;
      }
      this.waiters.splice(i, 1);
      waiter.resolve(lease);
    }
  }

  private allLostError(): SandboxUnavailable | undefined {
    if (!this.engines.every((e) => e.lost)) return undefined;
    return new SandboxUnavailable(
      `every engine of this eval is lost: ${this.engines.map((e) => `${e.name} (${e.lostReason ?? 'lost'})`).join(', ')}`,
      { hint: '`sandbox-harness doctor --engines ...` shows what is wrong with each.' },
    );
  }
}
