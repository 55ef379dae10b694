/**
 * The engines of one eval: connected, each with its capacity, trials placed on them by
 * `Placement`, and an engine that stops answering marked lost for the rest of the eval.
 *
 * For the scheduler (phase two): `connectFleet(await resolveEngines(...), { trialCpus })`
 * once; per trial `const slot = await fleet.acquire(signal)`, run the trial's sandboxes on
 * `slot.engine.engine` (a DockerEngine), `slot.release()` when it ends; after a trial ends as
 * infrastructure, `await fleet.checkEngine(slot.engine.name)` before retrying it: a lost
 * engine is never placed on again, so the retry lands elsewhere.
 */
import { SandboxUnavailable } from '../errors.js';
import { describeEndpoint } from '../sandbox/docker/endpoint.js';
import { DockerEngine } from '../sandbox/docker/engine.js';
import type { EngineSpec } from './engines-file.js';
import { defaultCapacity, Placement, type EngineLoad } from './placement.js';

/** What the fleet needs of an engine client; a DockerEngine in real use. */
export type EngineClient = Pick<DockerEngine, 'ping' | 'info'>;

export interface FleetEngine<E extends EngineClient = DockerEngine> {
  name: string;
  /** `engines.yaml:4:5`, `--engine NAME` or the default. */
  origin: string;
  /** `tcp://10.0.0.5:2376 (TLS)`; no secrets. */
  endpoint: string;
  engine: E;
  capacity: number;
  capacityFrom: 'engines file' | 'cpus';
  cpus: number;
}

export interface FleetSlot<E extends EngineClient = DockerEngine> {
  engine: FleetEngine<E>;
  /** Frees the slot; calling it again does nothing. */
  release(): void;
}

export interface ConnectFleetOptions<E extends EngineClient> {
  /** CPUs one trial's sandbox may use (the catalog's limit): default capacity = engine CPUs / this. */
  trialCpus: number;
  /** Global cap on trials at once (`--concurrency`). */
  concurrency?: number;
  pingTimeoutMs?: number;
  /** Makes the client of an engine (tests give fakes). */
  connect?: (spec: EngineSpec) => E;
}

/**
 * Connects to every engine at once. One that does not answer now fails the whole start,
 * naming every such engine: the user listed it, and `doctor` says what is wrong with it.
 */
export async function connectFleet<E extends EngineClient = DockerEngine>(
  specs: EngineSpec[],
  options: ConnectFleetOptions<E>,
): Promise<Fleet<E>> {
  const connect = options.connect ?? ((spec: EngineSpec) => new DockerEngine(spec.endpoint) as unknown as E);
  const settled = await Promise.allSettled(
    specs.map(async (spec): Promise<FleetEngine<E>> => {
      const engine = connect(spec);
      await engine.ping(options.pingTimeoutMs ?? 10_000);
      const info = await engine.info();
      return {
        name: spec.name,
        origin: spec.origin,
        endpoint: describeEndpoint(spec.endpoint),
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

export class Fleet<E extends EngineClient = DockerEngine> {
  private readonly placement: Placement;
  private readonly byName: Map<string, FleetEngine<E>>;

  constructor(
    readonly engines: readonly FleetEngine<E>[],
    concurrency?: number,
  ) {
    this.placement = new Placement(engines, concurrency);
    this.byName = new Map(engines.map((e) => [e.name, e]));
  }

  /** A slot on the engine with the most free capacity, when one is free; see `Placement.acquire`. */
  async acquire(signal?: AbortSignal): Promise<FleetSlot<E>> {
    const lease = await this.placement.acquire(signal);
    return { engine: this.get(lease.engine), release: () => lease.release() };
  }

  /**
   * After a trial on `name` failed as infrastructure: does the engine still answer? If not
   * after `attempts` pings, it is lost for the rest of this eval. A lost engine stays lost.
   */
  async checkEngine(name: string, options: CheckEngineOptions = {}): Promise<'alive' | 'lost'> {
    if (this.placement.isLost(name)) return 'lost';
    const engine = this.get(name);
    const attempts = options.attempts ?? 3;
    let lastError: unknown;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        await engine.engine.ping(options.timeoutMs ?? 5000);
        return 'alive';
      } catch (error) {
        lastError = error;
        if (attempt < attempts) await new Promise((r) => setTimeout(r, options.delayMs ?? 1000));
      }
    }
    const reason = lastError instanceof Error ? lastError.message.split('\n')[0] : String(lastError);
    this.placement.markLost(name, `no answer to ${attempts} pings: ${reason}`);
    return 'lost';
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
