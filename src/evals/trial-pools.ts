/**
 * The warm pool an eval's trials share (`eval --pool`), one per engine. Each trial's run takes
 * its sandboxes from it as from a pool of its own (made ahead, proven pristine when taken,
 * never reused), and while a trial asks for its first sandbox, the pool warms the same one
 * for the next trial of the same task: that trial then starts without waiting for a sandbox.
 *
 * A sandbox carries its run's labels from the moment it is made (`gc --run`, the orphan
 * reaper, `attach` all go by them), and the pool hands a sandbox only to a spec equal in
 * everything, labels included. So the next trial's run id is fixed ahead (`runIdOf`): the
 * sandbox warmed for it carries that id, and is handed to nothing else. When the next trial
 * asks for anything else (it ran elsewhere, or its spec differs), the warmed one is never
 * used and goes when the eval drains the pool.
 */
import type { SandboxBackend, SandboxSpec } from '../sandbox/types.js';
import { WarmPool, type PoolStats, type PoolStatusSink } from '../sandbox/pool/warm-pool.js';

export interface TrialPoolsOptions {
  /** Most sandboxes waiting or starting at once, per engine. */
  capacity: number;
  /** Trials per task (`-n`): the last one has no next trial to warm for. */
  trials: number;
  /** Told every change of an engine's pool (the progress line sums them). */
  onChange?: ((engine: string, stats: PoolStats) => void) | undefined;
  /** The eval's start, as run ids spell it (default: now). */
  startedAt?: Date;
  /** Each engine's pool's status file for `doctor` (`sandbox/pool/pool-status.ts`). */
  status?: ((engine: string) => PoolStatusSink) | undefined;
  /**
   * Whether a sandbox of `image` may be warmed for a next trial: not one of a trial's own
   * setup (`fix/setup.ts`), which that trial removes at its end (default: any).
   */
  lasts?: ((image: string) => boolean) | undefined;
}

/**
 * The sandboxes of a trial's first attempt: the agent's and its verification's (a replayed
 * patch's run asks for the verification's alone). Each is warmed for the next trial once this
 * trial asks for its own, so the next one finds both waiting, however quick its agent.
 */
const FIRST_ROLES: ReadonlySet<string> = new Set(['attempt-1', 'verify-1']);

export class TrialPools {
  private readonly pools = new Map<string, WarmPool>();
  /** Every run id handed out or fixed ahead: its task and trial. */
  private readonly runs = new Map<string, { taskId: string; trial: number }>();
  private readonly started = new Set<string>();
  /** Tries of each trial begun (a retry after an infrastructure failure is the second). */
  private readonly tries = new Map<string, number>();
  /** (run, role) pairs a run asked for. */
  private readonly heard = new Set<string>();
  /** (run, role) pairs warmed for a next trial. */
  private readonly warmed = new Set<string>();
  private readonly stamp: string;
  /** Set while the pool warms for a next trial: that request is the pool's own, not a run's. */
  private warming = false;

  constructor(private readonly options: TrialPoolsOptions) {
    this.stamp = (options.startedAt ?? new Date()).toISOString().replace(/[-:.]/g, '').slice(0, 18);
  }

  /**
   * The run id of try `attempt` (0 for the first) of a trial: fixed by the eval's start, so the
   * next trial's is known before it starts; a retry's has a suffix of its own.
   */
  runIdOf(taskId: string, trial: number, attempt = 0): string {
    const id = `${taskId}-t${trial}-${this.stamp}${attempt > 0 ? `-r${attempt}` : ''}`;
    if (!this.runs.has(id)) this.runs.set(id, { taskId, trial });
    return id;
  }

  /** The run id of a trial's next try, which starts now (a retry's never reuses a folder). */
  begin(taskId: string, trial: number): string {
    const key = `${taskId}\0${trial}`;
    const attempt = this.tries.get(key) ?? 0;
    this.tries.set(key, attempt + 1);
    const runId = this.runIdOf(taskId, trial, attempt);
    this.start(runId);
    return runId;
  }

  /** A trial's run starts: nothing is warmed for it any more. */
  start(runId: string): void {
    this.started.add(runId);
  }

  /** The pool of `engine`, made on first use over that engine's backend. */
  poolFor(engine: string, backend: SandboxBackend): WarmPool {
    let pool = this.pools.get(engine);
    if (!pool) {
      pool = new WarmPool(backend, {
        capacity: this.options.capacity,
        shared: true,
        onRequest: (spec) => this.warmNext(pool!, spec),
        ...(this.options.status ? { status: this.options.status(engine) } : {}),
        ...(this.options.onChange ? { onChange: (stats) => this.options.onChange?.(engine, stats) } : {}),
      });
      this.pools.set(engine, pool);
    }
    return pool;
  }

  /** On a run's first attempt's sandbox: the same sandbox, warmed for the next trial of its task. */
  private warmNext(pool: WarmPool, spec: SandboxSpec): void {
    const { runId, role } = spec;
    if (this.warming || !runId || !role || !FIRST_ROLES.has(role) || this.heard.has(`${runId}\0${role}`))
      return;
    const run = this.runs.get(runId);
    if (!run) return;
    this.heard.add(`${runId}\0${role}`);
    if (run.trial + 1 >= this.options.trials) return;
    if (this.options.lasts && !this.options.lasts(spec.image)) return;
    const next = this.runIdOf(run.taskId, run.trial + 1);
    // Started already (or warmed by another try of this trial): nothing to get ahead of.
    if (this.started.has(next) || this.warmed.has(`${next}\0${role}`)) return;
    this.warmed.add(`${next}\0${role}`);
    this.warming = true;
    try {
      pool.warm({ ...spec, runId: next });
    } finally {
      this.warming = false;
    }
  }

  /** Removes what waits in every engine's pool, and makes no more. Never throws. */
  async drain(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.drain()));
  }
}
