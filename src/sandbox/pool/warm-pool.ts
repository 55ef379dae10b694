/**
 * A warm pool: a `SandboxBackend` that wraps another and hands out sandboxes it created and
 * started ahead, so a step that needs a sandbox does not wait for one to start.
 *
 * The rules, each pinned by a test (tests/unit/sandbox/warm-pool.test.ts and the Docker ones):
 * - A sandbox is only handed to a `create` whose spec is the same in everything (image, run,
 *   role, env, resources, injected files, keep, hidden paths, runtime, egress): the key is the
 *   whole spec, so labels, limits and network can never differ from what was asked.
 * - It is proven pristine when handed out: still alive, made from the image the reference
 *   names now (not one the tag named when it was warmed), and its own change list empty and
 *   complete. A sandbox that fails any of these is removed and a new one made instead.
 * - It is handed out once: taken out of the pool before it is checked, never put back.
 * - `drain` removes every sandbox still waiting (and those still starting, once started);
 *   after it the pool makes no more. Pooled sandboxes carry the run's labels like any other,
 *   so `gc --run` and the orphan reaper remove what a crashed run left waiting.
 */
import { createHash } from 'node:crypto';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../types.js';

/** What the pool holds and did, for `doctor` and the progress line. */
export interface PoolStats {
  /** Started and waiting to be handed out. */
  ready: number;
  /** Being made. */
  starting: number;
  /** Handed out from the pool. */
  handedOut: number;
  /** Asked for with no sandbox of that spec waiting: made cold. */
  cold: number;
  /** Removed instead of handed out (stale image, changed, dead, failed to start) or drained. */
  discarded: number;
}

export interface WarmPoolOptions {
  /** Most sandboxes waiting or starting at once, over every spec. */
  capacity: number;
  /**
   * The id of the image a reference names now; a sandbox warmed from another id is stale.
   * Absent: the backend's own `imageId`, else no stale check is possible and none is made.
   */
  imageId?: ((image: string) => Promise<string | undefined>) | undefined;
  /** Called whenever the counts change. */
  onChange?: ((stats: PoolStats) => void) | undefined;
  /**
   * Shared by an eval's runs: a run that ends removes only what waits for it (`drainRun`),
   * and the eval drains the rest at its end. Otherwise the pool is one run's.
   */
  shared?: boolean | undefined;
  /**
   * Told every spec a run asks for or warms, before the pool answers (an eval's pool warms the
   * next trial's sandbox from it: `evals/trial-pools.ts`). Never throws into the pool.
   */
  onRequest?: ((spec: SandboxSpec) => void) | undefined;
  /** Where `doctor` finds the counts while the pool lives (`pool-status.ts`); closed by `drain`. */
  status?: PoolStatusSink | undefined;
}

/** The counts told as they change, closed when the pool is drained (`PoolStatusFile`). */
export interface PoolStatusSink {
  update(stats: PoolStats): void;
  close(): Promise<void>;
}

interface Entry {
  key: string;
  /** The run whose labels the sandbox carries (its spec's `runId`). */
  runId: string | undefined;
  /** The image id the reference named when the sandbox was made. */
  imageId: string | undefined;
  making: Promise<Sandbox | undefined>;
  ready: boolean;
}

/** Canonical JSON (keys sorted), so two equal specs give one key whatever their key order. */
function canonical(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return { buffer: value.toString('base64') };
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = canonical(v);
    }
    return out;
  }
  return value;
}

/** The pool key of a spec: a hash of all of it (injected files' bytes included). */
export function poolKey(spec: SandboxSpec): string {
  return createHash('sha256')
    .update(JSON.stringify(canonical(spec)))
    .digest('hex');
}

/** Why a pooled sandbox may not be handed out, or undefined when it may. */
async function unfit(
  sandbox: Sandbox,
  entry: Entry,
  currentImageId: string | undefined,
): Promise<string | undefined> {
  if (entry.imageId !== currentImageId) return 'stale: the image reference names another image now';
  // Both at once: the proof is on the path of the step that takes the sandbox.
  const [alive, scan] = await Promise.all([sandbox.isAlive(), sandbox.changes({ maxEntries: 1 })]);
  if (!alive) return 'dead';
  if (!scan.complete || scan.changes.length > 0) return 'not pristine: its workspace changed';
  return undefined;
}

export class WarmPool implements SandboxBackend {
  private readonly entries: Entry[] = [];
  private closed = false;
  private readonly counts = { handedOut: 0, cold: 0, discarded: 0 };
  /** Why each discarded sandbox was not handed out, newest last (for tests and `doctor`). */
  readonly discards: string[] = [];

  readonly workspaceGitImage?: NonNullable<SandboxBackend['workspaceGitImage']>;

  constructor(
    readonly inner: SandboxBackend,
    private readonly options: WarmPoolOptions,
  ) {
    if (inner.workspaceGitImage) this.workspaceGitImage = inner.workspaceGitImage.bind(inner);
  }

  get name(): string {
    return this.inner.name;
  }
  get shared(): boolean {
    return this.options.shared === true;
  }
  get engine(): string {
    return this.inner.engine;
  }

  stats(): PoolStats {
    const ready = this.entries.filter((e) => e.ready).length;
    return { ready, starting: this.entries.length - ready, ...this.counts };
  }

  private changed(): void {
    const stats = this.stats();
    this.options.onChange?.(stats);
    this.options.status?.update(stats);
  }

  private currentImageId(image: string): Promise<string | undefined> {
    const resolve = this.options.imageId ?? this.inner.imageId?.bind(this.inner);
    return resolve ? resolve(image).catch(() => undefined) : Promise.resolve(undefined);
  }

  /**
   * Starts making up to `count` sandboxes of `spec` ahead, within the capacity. Never throws:
   * a sandbox that fails to start is discarded, and its `create` makes one cold.
   */
  warm(spec: SandboxSpec, count = 1): void {
    this.heard(spec);
    const key = poolKey(spec);
    for (let i = 0; i < count; i++) {
      if (this.closed || this.entries.length >= this.options.capacity) return;
      const entry: Entry = {
        key,
        runId: spec.runId,
        imageId: undefined,
        ready: false,
        making: Promise.resolve(undefined),
      };
      entry.making = (async () => {
        entry.imageId = await this.currentImageId(spec.image);
        const sandbox = await this.inner.create(spec);
        // Started its command channel too, so the first call does not pay for it.
        await sandbox.exec('true', { fast: true, timeoutMs: 10_000 }).catch(() => undefined);
        return sandbox;
      })().then(
        (sandbox) => {
          entry.ready = true;
          this.changed();
          return sandbox;
        },
        (error: unknown) => {
          this.drop(entry, `failed to start: ${String(error)}`);
          return undefined;
        },
      );
      this.entries.push(entry);
    }
    this.changed();
  }

  private drop(entry: Entry, why: string): void {
    const index = this.entries.indexOf(entry);
    if (index >= 0) this.entries.splice(index, 1);
    this.counts.discarded++;
    this.discards.push(why);
    this.changed();
  }

  /** A sandbox of `spec`: a pooled one proven fit, else a new one from the wrapped backend. */
  async create(spec: SandboxSpec): Promise<Sandbox> {
    this.heard(spec);
    const key = poolKey(spec);
    // Ready ones first; one still starting is still sooner than a new one.
    const entry =
      this.entries.find((e) => e.key === key && e.ready) ?? this.entries.find((e) => e.key === key);
    if (entry) {
      // Out of the pool before anything is awaited: no two callers ever get the same sandbox.
      this.entries.splice(this.entries.indexOf(entry), 1);
      const [sandbox, currentId] = await Promise.all([entry.making, this.currentImageId(spec.image)]);
      if (sandbox) {
        const why = await unfit(sandbox, entry, currentId).catch(
          (error: unknown) => `check failed: ${String(error)}`,
        );
        if (why === undefined) {
          this.counts.handedOut++;
          this.changed();
          return sandbox;
        }
        await sandbox.dispose({ keep: false }).catch(() => undefined);
        this.counts.discarded++;
        this.discards.push(why);
      }
    }
    this.counts.cold++;
    this.changed();
    return this.inner.create(spec);
  }

  private heard(spec: SandboxSpec): void {
    try {
      this.options.onRequest?.(spec);
    } catch {
      // A listener's failure is no reason to refuse a sandbox.
    }
  }

  /**
   * Removes every sandbox waiting or starting for run `runId` (a run that ends, in a pool its
   * eval shares); the pool goes on for the other runs. Never throws.
   */
  drainRun(runId: string): Promise<void> {
    return this.remove(this.entries.filter((e) => e.runId === runId));
  }

  /** Removes every sandbox waiting or starting, and makes no more. Never throws. */
  async drain(): Promise<void> {
    this.closed = true;
    await this.remove([...this.entries]);
    await this.options.status?.close();
  }

  private async remove(gone: readonly Entry[]): Promise<void> {
    for (const entry of gone) {
      const index = this.entries.indexOf(entry);
      if (index >= 0) this.entries.splice(index, 1);
    }
    await Promise.all(
      gone.map(async (entry) => {
        const sandbox = await entry.making;
        this.counts.discarded++;
        this.discards.push('drained');
        await sandbox?.dispose({ keep: false }).catch(() => undefined);
      }),
    );
    this.changed();
  }

  egressProblem(): Promise<string | undefined> {
    return this.inner.egressProblem?.() ?? Promise.resolve('the backend cannot enforce egress');
  }
  imageId(image: string): Promise<string | undefined> {
    return this.inner.imageId?.(image) ?? Promise.resolve(undefined);
  }
  workspaceTree: SandboxBackend['workspaceTree'] = (image, options) =>
    this.inner.workspaceTree(image, options);
  attach: SandboxBackend['attach'] = (request) => this.inner.attach(request);
  release: SandboxBackend['release'] = (request) => this.inner.release(request);
  state: SandboxBackend['state'] = (request) => this.inner.state(request);
  interactiveShell: SandboxBackend['interactiveShell'] = (request, io) =>
    this.inner.interactiveShell(request, io);
}

/**
 * How many sandboxes to keep warm: each trial running at once needs its attempt and its
 * verification, and a run of several attempts one more pair in reserve, never past `max`.
 */
export function poolCapacity(concurrency: number, attempts: number, max = 16): number {
  const perTrial = attempts > 1 ? 4 : 2;
  return Math.max(0, Math.min(max, Math.max(1, concurrency) * perTrial));
}
