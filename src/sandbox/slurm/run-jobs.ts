/**
 * One Slurm job per run (a trial, a fix): the run's sandboxes (baseline, attempts,
 * verifications, the checker's) are containers in that job's allocation, on its node. A run
 * that asked for a second allocation while it held one would deadlock a full cluster: every
 * node held by attempts whose verifications wait in the queue behind each other (seen: four
 * trials on three one-CPU nodes, none finishing). The job ends with the run's last sandbox: a
 * run that holds none waits in the queue like any other, holding nothing.
 */

export interface PlacedJob {
  job: string;
  node: string;
}

export interface RunJobLease extends PlacedJob {
  /** 0 for the job's first sandbox, then 1, 2, ...: makes each container's name its own. */
  seq: number;
  /** This sandbox is done with the job: the job ends once no sandbox of the run holds it. */
  release(): Promise<void>;
}

interface Entry {
  placed: Promise<PlacedJob>;
  /** Set once placed: a job that runs, which a shared sandbox may join. */
  running?: PlacedJob;
  users: number;
  seq: number;
}

export class RunJobs {
  private readonly runs = new Map<string, Entry>();

  constructor(private readonly cancel: (job: string) => Promise<void>) {}

  /**
   * The run's job (placed by `place` when the run has none), held until `release`. With
   * `shared` (a sandbox other runs wait for: the eval's one baseline of an image), any job this
   * process holds will do: queued behind the very runs that wait for it, it would never run
   * on a cluster they fill. `usable` says which held job it may join (not one on a node left
   * out since it was placed).
   */
  async acquire(
    runId: string | undefined,
    place: () => Promise<PlacedJob>,
    options: { shared?: boolean; usable?: (placed: PlacedJob) => boolean } = {},
  ): Promise<RunJobLease> {
    const usable = options.usable ?? (() => true);
    while (options.shared) {
      const entries = [...this.runs];
      const held = entries.find(([, e]) => e.running !== undefined && e.users > 0 && usable(e.running));
      if (held) return this.join(held[0], held[1]);
      // Jobs of this process wait in the queue: the first to run takes it (a job of its own
      // would queue behind them). With none waiting, it queues like any other, first in line.
      const waiting = entries.filter(([, e]) => e.running === undefined);
      if (waiting.length === 0) break;
      await Promise.race(
        waiting.map(([, e]) =>
          e.placed.then(
            () => undefined,
            () => undefined,
          ),
        ),
      );
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (runId === undefined) {
      // Nothing joins a job without a run; it ends with its one user.
      const placed = await place();
      return { ...placed, seq: 0, release: () => this.cancel(placed.job) };
    }
    let entry = this.runs.get(runId);
    if (entry) {
      entry.users++;
    } else {
      entry = { placed: place(), users: 1, seq: -1 };
      this.runs.set(runId, entry);
    }
    const current = entry;
    try {
      current.running = await current.placed;
    } catch (error) {
      current.users--;
      if (this.runs.get(runId) === current) this.runs.delete(runId);
      throw error;
    }
    current.users--;
    return this.join(runId, current);
  }

  /** One more sandbox in the placed job of `runId`'s entry. */
  private join(runId: string, current: Entry & { running?: PlacedJob }): RunJobLease {
    const placed = current.running!;
    current.users++;
    const seq = ++current.seq;
    let released = false;
    return {
      ...placed,
      seq,
      release: async () => {
        if (released) return;
        released = true;
        if (--current.users > 0) return;
        if (this.runs.get(runId) === current) this.runs.delete(runId);
        return this.cancel(placed.job);
      },
    };
  }

  /** No new sandbox joins `job` (its node was lost): the run's next sandbox gets a job of its own. */
  forget(job: string): void {
    for (const [runId, entry] of this.runs) {
      void entry.placed.then(
        (placed) => {
          if (placed.job === job && this.runs.get(runId) === entry) this.runs.delete(runId);
        },
        () => undefined,
      );
    }
  }
}
