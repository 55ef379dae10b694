/**
 * The results of the catalog's setup (`setup.ts`) a run or an eval holds: fork images made
 * once per key and shared by whoever asks for the same key, removed when drained.
 */
import { ConfigError, errorMessage } from '../errors.js';
import type { SandboxBackend } from '../sandbox/types.js';

/**
 * The setup command itself failed on the untouched repo: the same command on the same image
 * fails the same way, so every run asking for that setup gets this answer.
 */
export class SetupFailed extends ConfigError {}

/** One setup's result: the fork image attempt sandboxes start from. */
export interface SetupState {
  image: string;
  imageId: string;
  /** The run whose setup sandbox it was forked from. */
  madeBy: string;
  /** The setup command's time plus the fork's. */
  durationMs: number;
  /** The backend that holds the image (an eval's fleet has several). */
  backend: SandboxBackend;
}

/**
 * Setups made and not yet removed: one run's own, or an eval's shared by its trials. The
 * first run asking for a key makes it; the others wait for that one. A `SetupFailed` is
 * every waiter's answer; any other failure (the maker's run stopped by its own time limit or
 * budget, the engine's hiccup) was that run's, so the next run asking makes it anew.
 */
export class SetupStates {
  private readonly made = new Map<string, Promise<SetupState>>();
  private readonly images = new Set<string>();

  /** The state of `key`, made by `make` if no run has asked for it yet; `reused` when not made now. */
  async get(key: string, make: () => Promise<SetupState>): Promise<{ state: SetupState; reused: boolean }> {
    for (let known = this.made.get(key); known; known = this.made.get(key)) {
      try {
        return { state: await known, reused: true };
      } catch (error) {
        if (error instanceof SetupFailed) throw error;
        if (this.made.get(key) === known) this.made.delete(key);
      }
    }
    const making = make().then((state) => {
      this.images.add(state.image);
      return state;
    });
    this.made.set(key, making);
    try {
      return { state: await making, reused: false };
    } catch (error) {
      if (!(error instanceof SetupFailed) && this.made.get(key) === making) this.made.delete(key);
      throw error;
    }
  }

  /** Setups made by an eval's trials for themselves (not shared): each goes with its trial. */
  private readonly trialOwn = new Set<string>();

  /** Notes a trial's own setup image (an eval's warm pool warms nothing from it). */
  noteTrialOwn(image: string): void {
    this.trialOwn.add(image);
  }

  isTrialOwn(image: string): boolean {
    return this.trialOwn.has(image);
  }

  /** Whether `image` is a setup made here (a sandbox of it is removed before the image is). */
  holds(image: string | undefined): boolean {
    return image !== undefined && this.images.has(image);
  }

  /**
   * Removes every setup image made here; failures are returned, never thrown (one still used
   * by a kept sandbox stays until `gc`, which removes a fork once nothing uses it).
   */
  async drain(): Promise<{ image: string; message: string }[]> {
    const failures: { image: string; message: string }[] = [];
    const states = await Promise.all([...this.made.values()].map((making) => making.catch(() => undefined)));
    this.made.clear();
    for (const state of states) {
      if (!state) continue;
      try {
        await state.backend.removeForkImage?.(state.image);
      } catch (error) {
        failures.push({ image: state.image, message: errorMessage(error) });
      }
      this.images.delete(state.image);
    }
    return failures;
  }
}
