/**
 * The engines of one eval: connected, each with its capacity, trials placed on them by
 * `Placement`, and an engine that stops answering marked lost for the rest of the eval.
 *
 * The eval scheduler: `connectFleet(await resolveEngines(...), { trialCpus })` once, and
 * `fleet.monitor()` while trials run; per trial `const slot = await fleet.acquire({ signal })`,
 * run the trial's sandboxes on `slot.engine.engine` (a DockerEngine) under `slot.lost` (it
 * aborts the moment the engine is found lost), `slot.release()` when it ends; after a trial
 * ends as infrastructure, `await fleet.checkEngine(slot.engine.name)` before retrying it with
 * `avoid: [that engine]`: a lost engine is never placed on again, and a live one only when
 * no other engine is left.
 */
import { SandboxUnavailable } from '../errors.js';
import {
  describeEngine,
  engineConnector,
  type EngineRef,
  type EngineSpec,
} from '../sandbox/backend-registry.js';
import { defaultCapacity, Placement, type AcquireOptions, type EngineLoad } from './placement.js';

/**
 * What the fleet needs of an engine client: a ping and its CPUs. The backend's own connection
 * in real use (a DockerEngine, made by the registry's `engineConnector`), a fake in tests.
 */
export interface EngineClient {
  ping(timeoutMs?: number): Promise<unknown>;
  info(): Promise<{ cpus: number }>;
}

export interface FleetEngine<E extends EngineClient = EngineClient> {
  name: string;
  /** How to find this engine again later (`inspect`, `shell`, `gc` of its kept containers); no secrets. */
  ref?: EngineRef;
  /** `engines.yaml:4:5`, `--engine NAME` or the default. */
  origin: string;
  /** `tcp://10.0.0.5:2376 (TLS)`; no secrets. */
  endpoint: string;
  engine: E;
  capacity: number;
  capacityFrom: 'engines file' | 'cpus';
  cpus: number;
}

export interface FleetSlot<E extends EngineClient = EngineClient> {
  engine: FleetEngine<E>;
  /** Aborts, with a SandboxUnavailable naming the engine, once the engine is found lost. */
  lost: AbortSignal;
  /** Frees the slot; calling it again does nothing. See `Lease.release` for `handOver`. */
  release(options?: { handOver?: boolean }): void;
}

export interface ConnectFleetOptions<E extends EngineClient> {
  /** CPUs one trial's sandbox may use (the catalog's limit): default capacity = engine CPUs / this. */
  trialCpus: number;
  /** Global cap on trials at once (`--concurrency`). */
  concurrency?: number | undefined;
  pingTimeoutMs?: number;
  /** Makes the client of an engine (tests give fakes). */
  connect?: (spec: EngineSpec) => E;
}

/**
 * Connects to every engine at once. One that does not answer now fails the whole start,
 * naming every such engine: the user listed it, and `doctor` says what is wrong with it.
 */
export async function connectFleet<E extends EngineClient = EngineClient>(
  specs: EngineSpec[],
  options: ConnectFleetOptions<E>,
): Promise<Fleet<E>> {
  const connector = options.connect ? undefined : await engineConnector();
  const connect = options.connect ?? ((spec: EngineSpec) => connector!(spec).connection as E);
  const settled = await Promise.allSettled(
    specs.map(async (spec): Promise<FleetEngine<E>> => {
      const engine = connect(spec);
      await engine.ping(options.pingTimeoutMs ?? 10_000);
      const info = await engine.info();
      return {
        name: spec.name,
        ...(spec.ref ? { ref: spec.ref } : {}),
        origin: spec.origin,
        endpoint: await describeEngine(spec),
        engine,
        capacity: spec.capacity ?? defaultCapacity(info.cpus, options.trialCpus),
        capacityFrom: spec.capacity === undefined ? 'cpus' : 'engines file',
        cpus: info.cpus,
      };
    }),
  );
  const failed = settled.flatMap((s, i) =>
    s.status === 'rejected'
      ? [`${specs[i]?.name} (${specs[i]?.origin}): ${(s.reason as Error).message}`]
      : [],
  );
  if (failed.length > 0) {
    throw new SandboxUnavailable(
      `${failed.length === 1 ? 'an engine does' : `${failed.length} engines do`} not answer:\n${failed.map((f) => `  ${f}`).join('\n')}`,
      {
        hint: 'Run `sandbox-harness doctor` with the same --engines/--engine to see what is wrong with each.',
      },
    );
  }
  const engines = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  return new Fleet(engines, options.concurrency);
}

export interface CheckEngineOptions {
  /** Pings before the engine counts as lost, and the wait between them. */
  attempts?: number;
  timeoutMs?: number;
  delayMs?: number;
}

export interface MonitorOptions {
  /** Time between two pings of an engine that runs trials. */
  intervalMs?: number;
  /** Each ping's own limit: an engine that stopped answering often hangs rather than refuses. */
  timeoutMs?: number;
  /** Missed pings in a row that make an engine lost. */
  misses?: number;
}

export class Fleet<E extends EngineClient = EngineClient> {
  private readonly placement: Placement;
  private readonly byName: Map<string, FleetEngine<E>>;
  private readonly lostControllers = new Map<string, AbortController>();
  private readonly checking = new Map<string, Promise<'alive' | 'lost'>>();
  private readonly lostListeners: Array<(engine: string, reason: string) => void> = [];

  constructor(
    readonly engines: readonly FleetEngine<E>[],
    concurrency?: number,
  ) {
    this.placement = new Placement(engines, concurrency);
    this.byName = new Map(engines.map((e) => [e.name, e]));
    for (const e of engines) this.lostControllers.set(e.name, new AbortController());
  }

  /** A slot on the engine with the most free capacity, when one is free; see `Placement.acquire`. */
  async acquire(options: AcquireOptions | AbortSignal = {}): Promise<FleetSlot<E>> {
    const lease = await this.placement.acquire(options);
    return {
      engine: this.get(lease.engine),
      lost: this.lostSignal(lease.engine),
      release: (options) => lease.release(options),
    };
  }

  /**
   * After a trial on `name` failed as infrastructure: does the engine still answer? If not
   * after `attempts` pings, it is lost for the rest of this eval. A lost engine stays lost.
   * Trials that fail together on one engine share one check.
   */
  checkEngine(name: string, options: CheckEngineOptions = {}): Promise<'alive' | 'lost'> {
    if (this.placement.isLost(name)) return Promise.resolve('lost');
    let pending = this.checking.get(name);
    if (!pending) {
      pending = this.check(name, options).finally(() => this.checking.delete(name));
      this.checking.set(name, pending);
    }
    return pending;
  }

  private async check(name: string, options: CheckEngineOptions): Promise<'alive' | 'lost'> {
    const engine = this.get(name);
    const attempts = options.attempts ?? 3;
    let lastError: unknown;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (this.placement.isLost(name)) return 'lost';
      try {
        await engine.engine.ping(options.timeoutMs ?? 5000);
        return 'alive';
      } catch (error) {
        lastError = error;
        if (attempt < attempts) await new Promise((r) => setTimeout(r, options.delayMs ?? 1000));
      }
    }
    this.markLost(name, `no answer to ${attempts} pings: ${firstLine(lastError)}`);
    return 'lost';
  }

  /**
   * Pings every engine that runs trials, every `intervalMs`; `misses` unanswered pings in a
   * row make it lost, which aborts its trials at once (`FleetSlot.lost`) instead of leaving
   * them hanging on a connection that will never answer. Returns the function that stops it.
   */
  monitor(options: MonitorOptions = {}): () => void {
    const intervalMs = options.intervalMs ?? 5000;
    const timeoutMs = options.timeoutMs ?? 5000;
    const misses = options.misses ?? 3;
    const missed = new Map<string, number>();
    const busy = new Set<string>();
    const timer = setInterval(() => {
      for (const load of this.placement.loads()) {
        if (load.lost || load.running === 0 || busy.has(load.name)) continue;
        busy.add(load.name);
        this.get(load.name)
          .engine.ping(timeoutMs)
          .then(
            () => missed.set(load.name, 0),
            (error: unknown) => {
              const count = (missed.get(load.name) ?? 0) + 1;
              missed.set(load.name, count);
              if (count >= misses)
                this.markLost(load.name, `no answer to ${count} pings in a row: ${firstLine(error)}`);
            },
          )
          .finally(() => busy.delete(load.name));
      }
    }, intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Marks the engine lost (once): nothing is placed there again and its trials' `lost` signals abort. */
  markLost(name: string, reason: string): void {
    if (this.placement.isLost(name)) return;
    this.placement.markLost(name, reason);
    const engine = this.get(name);
    this.lostControllers.get(name)?.abort(
      new SandboxUnavailable(`engine ${name} (${engine.endpoint}) stopped answering: ${reason}`, {
        hint: `\`sandbox-harness doctor --engine ...\` (or --engines) shows what is wrong with it; its trials are retried on the other engines.`,
      }),
    );
    for (const listener of this.lostListeners) listener(name, reason);
  }

  /** Called once per engine found lost, with the reason. */
  onLost(listener: (engine: string, reason: string) => void): void {
    this.lostListeners.push(listener);
  }

  /** Aborts when the engine is found lost. */
  lostSignal(name: string): AbortSignal {
    const controller = this.lostControllers.get(name);
    if (!controller) throw new RangeError(`no engine named ${name} in this fleet`);
    return controller.signal;
  }

  /** Every engine with its running trials and whether it is lost, in the order given. */
  loads(): EngineLoad[] {
    return this.placement.loads();
  }

  private get(name: string): FleetEngine<E> {
    const engine = this.byName.get(name);
    if (!engine) throw new RangeError(`no engine named ${name} in this fleet`);
    return engine;
  }
}

function firstLine(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
}
