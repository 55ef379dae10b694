/**
 * The sandboxes of one run: made from one spec, tracked until the run closes, then kept or
 * removed once by the keep policy. Failed attempts' sandboxes stay (frozen, idle) until
 * then, so a failed run keeps the evidence of every attempt, bounded by `maxAttempts`.
 */
import { errorMessage } from '../errors.js';
import type { KeepPolicy, Sandbox, SandboxBackend, SandboxSpec } from '../sandbox/types.js';
import type { ContainerRecord } from '../runs/record.js';

interface Tracked {
  sandbox: Sandbox;
  role: string;
  /** Never kept, whatever the policy says (the baseline of an `on-failure` run). */
  throwaway: boolean;
}

export class SandboxPool {
  private readonly live: Tracked[] = [];
  readonly records: ContainerRecord[] = [];

  constructor(
    private readonly backend: SandboxBackend,
    private readonly spec: (role: string) => SandboxSpec,
    private readonly policy: KeepPolicy,
  ) {}

  async create(role: string, extra: Partial<SandboxSpec> = {}, throwaway = false): Promise<Sandbox> {
    const sandbox = await this.backend.create({ ...this.spec(role), ...extra });
    this.live.push({ sandbox, role, throwaway });
    return sandbox;
  }

  /** Disposes one sandbox now (a baseline, a throwaway): kept only under `--keep always`. */
  async release(sandbox: Sandbox): Promise<void> {
    const index = this.live.findIndex((t) => t.sandbox === sandbox);
    if (index < 0) return;
    const [tracked] = this.live.splice(index, 1);
    await this.dispose(tracked!, this.policy === 'always');
  }

  /**
   * Disposes every sandbox still tracked: kept when the policy says so for this ending.
   * Failures are reported, never thrown: a run's result must not be lost to clean-up.
   */
  async closeAll(failed: boolean, onError: (role: string, message: string) => void): Promise<void> {
    const keep = this.policy === 'always' || (this.policy === 'on-failure' && failed);
    for (const tracked of this.live.splice(0)) {
      try {
        await this.dispose(tracked, keep && !tracked.throwaway);
      } catch (error) {
        onError(tracked.role, errorMessage(error));
      }
    }
  }

  private async dispose(tracked: Tracked, keep: boolean): Promise<void> {
    await tracked.sandbox.dispose({ keep });
    this.records.push({
      role: tracked.role,
      id: tracked.sandbox.id,
      kept: keep,
      engine: this.backend.engine,
    });
  }
}
