/**
 * Removals nothing waits for: an eval's trial ends once its record says which sandboxes were
 * not kept, and their removal on the engine (a kill and a layer deleted, 40 ms on a quiet
 * engine and well over 100 on a busy one, per sandbox) goes on beside the next trial instead
 * of on this one's path. Whoever made the set waits for all of it before it ends (the eval,
 * before its pools drain and its engines stop), and learns which failed. A removal that
 * failed leaves a container that still carries its run's labels, so `gc` removes it.
 */
import { errorMessage } from '../errors.js';

export interface RemovalFailure {
  /** What was being removed, as the caller named it (a run's role and container id). */
  what: string;
  message: string;
}

/** In flight at once at most; a run that closes beyond it waits for room (the engine is one). */
export const MAX_PENDING_REMOVALS = 8;

export class BackgroundRemovals {
  private readonly pending = new Set<Promise<void>>();
  private readonly failures: RemovalFailure[] = [];

  constructor(private readonly limit = MAX_PENDING_REMOVALS) {}

  /** How many are still under way. */
  get size(): number {
    return this.pending.size;
  }

  /**
   * Takes `removal` over: never rejects on its behalf (a failure is kept for `settle`). Waits
   * first while `limit` removals are under way, so a slow engine does not pile them up.
   */
  async add(what: string, removal: () => Promise<void>): Promise<void> {
    while (this.pending.size >= this.limit) await Promise.race(this.pending);
    const tracked: Promise<void> = removal()
      .catch((error: unknown) => {
        this.failures.push({ what, message: errorMessage(error) });
      })
      .finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  /** Waits for every removal, also those added meanwhile; returns the failures not yet told. */
  async settle(): Promise<RemovalFailure[]> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
    return this.failures.splice(0);
  }
}
