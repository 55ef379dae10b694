/**
 * Where an eval's trials run: a slot on an engine, handed out by a placement (the local
 * engine's slots here; a fleet's in `./engines.ts`), the engine's loss a signal of the slot.
 */
import { Placement, type EngineLoad } from '../fleet/placement.js';

/** The engine name of an eval without a fleet. */
export const LOCAL_ENGINE = 'local';

/** A place for one trial on one engine. */
export interface TrialSlot {
  readonly engine: string;
  /** Aborts (its reason says why) once the engine is found lost. */
  readonly lost: AbortSignal;
  /** `handOver`: see `Lease.release` in src/fleet/placement.ts. */
  release(options?: { handOver?: boolean }): void;
}

/**
 * Where trials run. Without one, `runEval` uses the local engine with `concurrency` slots; an
 * eval over a fleet passes the fleet's (`fleetPlacement` in ./engines.ts).
 */
export interface TrialPlacement {
  /**
   * A slot as soon as one is free. `avoid`: engines to stay off while another one is live;
   * `first`: ahead of the trials still waiting; `replacing`: a slot this trial gives up for
   * the new one (released first, and not to the trials waiting). Rejects with
   * `SandboxUnavailable` once every engine is lost, and with the signal's reason when it aborts.
   */
  acquire(options: {
    signal: AbortSignal;
    avoid: ReadonlySet<string>;
    first: boolean;
    replacing?: TrialSlot;
  }): Promise<TrialSlot>;
  /** After an infrastructure failure on `engine`: does it still answer? (`lost` is final.) */
  checkEngine(engine: string): Promise<'alive' | 'lost'>;
  /** Every engine with its capacity, running trials and whether it is lost. */
  loads(): EngineLoad[];
  /** Called once for each engine found lost. */
  onLost?(listener: (engine: string, reason: string) => void): void;
}

/** One engine, `concurrency` trials at once, never lost: the eval of a single machine. */
export function localPlacement(concurrency: number, name: string = LOCAL_ENGINE): TrialPlacement {
  const placement = new Placement([{ name, capacity: concurrency }]);
  const never = new AbortController().signal;
  return {
    async acquire({ replacing, ...options }) {
      replacing?.release({ handOver: true });
      const lease = await placement.acquire(options);
      return { engine: lease.engine, lost: never, release: (o) => lease.release(o) };
    },
    checkEngine: async () => 'alive',
    loads: () => placement.loads(),
  };
}
