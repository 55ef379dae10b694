/**
 * The sandboxes of one run: made from one spec, tracked until the run closes, then kept or
 * removed once by the keep policy. Failed attempts' sandboxes stay (frozen, idle) until
 * then, so a failed run keeps the evidence of every attempt, bounded by `maxAttempts`.
 */
import { errorMessage } from '../errors.js';
import type { KeepPolicy, Sandbox, SandboxBackend, SandboxSpec } from '../sandbox/types.js';
import type { ContainerRecord } from '../runs/record.js';
import type { EgressLogEntry } from '../sandbox/egress/proxy.js';
import { WarmPool } from '../sandbox/pool/warm-pool.js';
import type { BackgroundRemovals } from '../sandbox/removals.js';

interface Tracked {
  sandbox: Sandbox;
  role: string;
  /** Never kept, whatever the policy says (the baseline of an `on-failure` run). */
  throwaway: boolean;
  /**
   * Nothing has run in it yet (an attempt's sandbox before the agent's first tool call): it
   * is the image and nothing more, so `on-failure` does not keep it (no `shell` into a
   * sandbox where nothing happened, after a broken test command, Ctrl-C or a model that
   * never answered).
   */
  untouched: boolean;
  /**
   * Removed on the run's path, never in the background: its proxy's log is read once it is
   * gone (egress), or the run removes its image right after (a fork's, its own setup's).
   */
  removeNow: boolean;
}

/**
 * Starts a sandbox's command channel (a shell of the image's, started by the harness), so
 * the first call over it does not pay the start-up: without a command when the sandbox can
 * (a started channel is not started twice), else by a first call of nothing. Its outcome
 * does not matter: a channel that fails to start leaves every call to one exec each.
 * `freezeWatch: false` for a sandbox that is frozen later if at all (a verification's: its
 * step starts root's look itself when a freeze will follow the tests).
 */
export function warmChannel(sandbox: Sandbox, options: { freezeWatch?: boolean } = {}): void {
  if (sandbox.startChannel) sandbox.startChannel(options);
  else void sandbox.exec('true', { fast: true, timeoutMs: 10_000 }).catch(() => undefined);
}

export class SandboxPool {
  private readonly live: Tracked[] = [];
  /** Ids in the order they were made. */
  private readonly order: string[] = [];
  readonly records: ContainerRecord[] = [];

  constructor(
    private readonly backend: SandboxBackend,
    private readonly spec: (role: string) => SandboxSpec,
    private readonly policy: KeepPolicy,
    /** Turns a sandbox just made into the one the run uses (a fork's: `sandbox/fork/`). */
    private readonly adopt: (spec: SandboxSpec, sandbox: Sandbox) => Sandbox = (_spec, sandbox) => sandbox,
    /**
     * An eval's: a sandbox not kept is on the record as removed at once and removed on the
     * engine beside the next trial (`sandbox/removals.ts`); absent, the run waits for it.
     */
    private readonly removals?: BackgroundRemovals,
    /**
     * Whether a sandbox of `spec` is removed on the run's path: one whose image the run
     * removes right after (its own setup's, `setup.ts`).
     */
    private readonly removeBeforeImage: (spec: SandboxSpec) => boolean = () => false,
  ) {}

  /** Sandboxes being made ahead of the step that needs them, by role. */
  private readonly ahead = new Map<string, Promise<Sandbox>>();
  /** Roles whose sandbox the warm pool is making (when the backend is one). */
  private readonly warmed = new Set<string>();

  /** A sandbox for `role`: the one made ahead for it if there is one, else a new one. */
  async create(role: string, extra: Partial<SandboxSpec> = {}, throwaway = false): Promise<Sandbox> {
    this.warmed.delete(role);
    const ahead = this.ahead.get(role);
    if (ahead) {
      this.ahead.delete(role);
      return ahead;
    }
    const spec = { ...this.spec(role), ...extra };
    const made = await this.backend.create(spec);
    const sandbox = this.adopt(spec, made);
    const removeNow = spec.egress !== undefined || sandbox !== made || this.removeBeforeImage(spec);
    this.live.push({ sandbox, role, throwaway, untouched: false, removeNow });
    this.order.push(sandbox.id);
    return sandbox;
  }

  /**
   * Starts making the sandbox a later step will ask for by `role` (the verification's, while
   * the agent works), so its start-up is not on that step's path. It comes from the image
   * alone and nothing runs in it until it is asked for. A failure shows when it is asked for.
   */
  makeAhead(role: string, extra: Partial<SandboxSpec> = {}, channel: { freezeWatch?: boolean } = {}): void {
    if (this.ahead.has(role) || this.warmed.has(role)) return;
    // With a run's own warm pool, the pool makes it and proves it pristine when the step takes
    // it. An eval's shared pool only gets ahead of the next trial: a sandbox this run needs
    // next is made as without a pool (the proof costs more on a busy machine than it saves,
    // measured in docs/pool.md), taking one the pool warmed for this run if there is one.
    if (this.backend instanceof WarmPool && !this.backend.shared) {
      this.warmed.add(role);
      this.backend.warm({ ...this.spec(role), ...extra });
      return;
    }
    const making = this.create(role, extra);
    making.then(
      (sandbox) => warmChannel(sandbox, channel),
      () => undefined,
    );
    this.ahead.set(role, making);
  }

  /** Removes the sandbox made ahead for `role` if no step asked for it; never throws. */
  async dropAhead(role: string, now = false): Promise<void> {
    const made = this.ahead.get(role);
    if (!made) return;
    this.ahead.delete(role);
    const sandbox = await made.catch(() => undefined);
    if (!sandbox) return;
    const index = this.live.findIndex((t) => t.sandbox === sandbox);
    if (index < 0) return;
    const [tracked] = this.live.splice(index, 1);
    // Unused, it holds nothing worth keeping whatever the policy, and it is no evidence of
    // the run either: not recorded, so no table lists a verification that never happened.
    await this.remove(tracked!, now).catch(() => undefined);
    this.order.splice(this.order.indexOf(sandbox.id), 1);
  }

  /**
   * Marks a sandbox as holding nothing worth keeping until `touched` says something ran in
   * it (an attempt's, before the agent's first tool call). `--keep always` keeps it anyway.
   */
  untilTouched(sandbox: Sandbox): void {
    const tracked = this.live.find((t) => t.sandbox === sandbox);
    if (tracked) tracked.untouched = true;
  }

  /** Something ran in the sandbox, or was written to it: it is evidence now. */
  touched(sandbox: Sandbox): void {
    const tracked = this.live.find((t) => t.sandbox === sandbox);
    if (tracked) tracked.untouched = false;
  }

  /** Disposes one sandbox now (a baseline, a throwaway): kept only under `--keep always`. */
  async release(sandbox: Sandbox): Promise<void> {
    const index = this.live.findIndex((t) => t.sandbox === sandbox);
    if (index < 0) return;
    const [tracked] = this.live.splice(index, 1);
    await this.dispose(tracked!, this.policy === 'always');
  }

  /**
   * Removes the sandboxes whose role `matches` now, whatever the keep policy (a parallel attempt stopped
   * because another passed: no evidence of anything); recorded as not kept.
   */
  async discard(matches: (role: string) => boolean): Promise<void> {
    const gone = this.live.filter((t) => matches(t.role));
    for (const tracked of gone) this.live.splice(this.live.indexOf(tracked), 1);
    await Promise.all(gone.map((tracked) => this.dispose(tracked, false)));
  }

  /**
   * Disposes every sandbox still tracked: kept when the policy says so for this ending.
   * Failures are reported, never thrown: a run's result must not be lost to clean-up.
   */
  async closeAll(
    failed: boolean,
    onError: (role: string, message: string) => void,
    /**
     * Every sandbox removed on the run's path, none in the background: after an
     * infrastructure failure, removing is how a backend learns what failed (a lost Slurm
     * node is fenced off then), and the eval's retry of the trial comes right after.
     */
    removeNow = false,
  ): Promise<void> {
    await Promise.all([...this.ahead.keys()].map((role) => this.dropAhead(role, removeNow)));
    // What the pool made for steps that never came is removed, never kept nor recorded; an
    // eval's pool goes on for its other runs.
    if (this.backend instanceof WarmPool) {
      const runId = this.spec('attempt-1').runId; // every role's spec names the run
      await (this.backend.shared && runId ? this.backend.drainRun(runId) : this.backend.drain());
    }
    const always = this.policy === 'always';
    const onFailure = this.policy === 'on-failure' && failed;
    // All at once: each is a round trip to the engine, and none waits for another.
    await Promise.all(
      this.live.splice(0).map(async (tracked) => {
        try {
          const keep = !tracked.throwaway && (always || (onFailure && !tracked.untouched));
          await this.dispose(tracked, keep, removeNow);
        } catch (error) {
          onError(tracked.role, errorMessage(error));
        }
      }),
    );
    // Records in the order the sandboxes were made, whichever went first.
    this.records.sort((a, b) => this.order.indexOf(a.id) - this.order.indexOf(b.id));
  }

  /**
   * Removes a sandbox not kept: now, or handed to the eval's background removals (which wait
   * for room first), so the run's end does not wait for the engine.
   */
  private async remove(tracked: Tracked, now = false): Promise<void> {
    const { sandbox } = tracked;
    if (!this.removals || now || tracked.removeNow) return sandbox.dispose({ keep: false });
    await this.removals.add(`${tracked.role} (${sandbox.id.slice(0, 12)})`, () =>
      sandbox.dispose({ keep: false }),
    );
  }

  /** Egress logs of the disposed sandboxes that had egress, by sandbox id. */
  readonly egressLogs = new Map<string, EgressLogEntry[]>();

  private async dispose(tracked: Tracked, keep: boolean, now = false): Promise<void> {
    if (keep) await tracked.sandbox.dispose({ keep });
    else await this.remove(tracked, now);
    const egress = tracked.sandbox.egressLog?.();
    if (egress && egress.length > 0) this.egressLogs.set(tracked.sandbox.id, egress);
    this.records.push({
      role: tracked.role,
      id: tracked.sandbox.id,
      kept: keep,
      engine: this.backend.engine,
    });
  }
}
