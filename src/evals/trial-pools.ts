/**
 * The warm pool an eval's trials share (`eval --pool`), one per engine. Each trial's run takes
 * its sandboxes from it as from a pool of its own (made ahead, proven pristine when taken,
 * never reused), and the pool warms the first sandboxes of the trials that start next: the
 * next `ahead` trials of the eval's order that have not started (as many as run at once),
 * each of a task whose first sandboxes an earlier trial asked for (their spec is that
 * trial's, under the new trial's run id). A trial that starts finds them waiting; warming is
 * just in time, so the pool never holds a sandbox for a trial far off (an eval's order runs
 * trial 0 of every task, then trial 1, ...).
 *
 * A sandbox carries its run's labels from the moment it is made (`gc --run`, the orphan
 * reaper, `attach` all go by them), and the pool hands a sandbox only to a spec equal in
 * everything, labels included. So each trial's run id is fixed ahead (`runIdOf`): the
 * sandbox warmed for it carries that id, and is handed to nothing else. When that trial asks
 * for anything else (it ran elsewhere, or its spec differs), the warmed one is never used
 * and goes when the eval drains the pool.
 */
import { randomBytes } from 'node:crypto';
import type { SandboxBackend, SandboxSpec } from '../sandbox/types.js';
import { WarmPool, type PoolStats, type PoolStatusSink } from '../sandbox/pool/warm-pool.js';

export interface TrialPoolsOptions {
  /** Most sandboxes waiting or starting at once, per engine. */
  capacity: number;
  /** The eval's trials in the order they start (the plan's). */
  order: readonly { taskId: string; trial: number }[];
  /** How many of the trials not started yet are warmed for (the trials that run at once). */
  ahead: number;
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
 * patch's run asks for the verification's alone). Both are warmed for a trial about to start,
 * so it finds them waiting, however quick its agent.
 */
const FIRST_ROLES: ReadonlySet<string> = new Set(['attempt-1', 'verify-1']);

export class TrialPools {
  private readonly pools = new Map<string, WarmPool>();
  /** Every run id handed out or fixed ahead: its task and trial. */
  private readonly runs = new Map<string, { taskId: string; trial: number }>();
  private readonly started = new Set<string>();
  /** Tries of each trial begun (a retry after an infrastructure failure is the second). */
  private readonly tries = new Map<string, number>();
  /** Each task's first sandboxes as a trial of it asked for them, by role, with the pool asked. */
  private readonly learned = new Map<string, Map<string, { pool: WarmPool; spec: SandboxSpec }>>();
  /** (run, role) pairs warmed for a trial. */
  private readonly warmed = new Set<string>();
  /** Where in `order` the trials not started yet begin (those before it have all started). */
  private cursor = 0;
  private readonly stamp: string;
  /** Set while the pool warms for a trial: that request is the pool's own, not a run's. */
  private warming = false;

  constructor(private readonly options: TrialPoolsOptions) {
    // The eval's start to the millisecond, and a few random characters: two evals started in
    // the same millisecond on one engine must not share run ids (labels, `gc --run`).
    const at = (options.startedAt ?? new Date()).toISOString().replace(/[-:.]/g, '').slice(0, 18);
    this.stamp = `${at}-${randomBytes(3).toString('hex')}`;
  }

  /**
   * The run id of try `attempt` (0 for the first) of a trial: fixed by the eval's start, so
   * every trial's is known before it starts; a retry's has a suffix of its own.
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
    this.warmAhead();
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
        onRequest: (spec) => this.learn(pool!, spec),
        ...(this.options.status ? { status: this.options.status(engine) } : {}),
        ...(this.options.onChange ? { onChange: (stats) => this.options.onChange?.(engine, stats) } : {}),
      });
      this.pools.set(engine, pool);
    }
    return pool;
  }

  /** A run asked for a first sandbox: its task's spec for that role is known from now on. */
  private learn(pool: WarmPool, spec: SandboxSpec): void {
    const { runId, role } = spec;
    if (this.warming || !runId || !role || !FIRST_ROLES.has(role)) return;
    const run = this.runs.get(runId);
    if (!run) return;
    if (this.options.lasts && !this.options.lasts(spec.image)) return;
    let roles = this.learned.get(run.taskId);
    if (!roles) this.learned.set(run.taskId, (roles = new Map()));
    if (roles.has(role)) return;
    roles.set(role, { pool, spec });
    this.warmAhead();
  }

  /** Warms the first sandboxes of the next `ahead` trials not started, where their task's are known. */
  private warmAhead(): void {
    const { order, ahead } = this.options;
    while (this.cursor < order.length && this.hasStarted(order[this.cursor]!)) this.cursor++;
    let looked = 0;
    for (let i = this.cursor; i < order.length && looked < ahead; i++) {
      const next = order[i]!;
      if (this.hasStarted(next)) continue;
      looked++;
      const runId = this.runIdOf(next.taskId, next.trial);
      for (const [role, { pool, spec }] of this.learned.get(next.taskId) ?? []) {
        if (this.warmed.has(`${runId}\0${role}`)) continue;
        this.warmed.add(`${runId}\0${role}`);
        this.warming = true;
        try {
          pool.warm({ ...spec, runId });
        } finally {
          this.warming = false;
        }
      }
    }
  }

  private hasStarted(id: { taskId: string; trial: number }): boolean {
    return this.started.has(this.runIdOf(id.taskId, id.trial));
  }

  /** Removes what waits in every engine's pool, and makes no more. Never throws. */
  async drain(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.drain()));
  }
}
