/**
 * An eval over a fleet of engines: the scheduler's view of the fleet (`fleetPlacement`), and
 * per engine the dependencies of a trial (`fleetDeps`): a sandbox provider bound to that
 * engine, made ready before its first trial (the base image shipped there, each task's repo
 * image built there), and one baseline cache for the whole eval.
 */
import { join } from 'node:path';
import type { LoadedCatalog } from '../catalog/load.js';
import type { BaselineCache, BaselineResult } from '../fix/baseline-cache.js';
import type { FixDeps } from '../fix/types.js';
import { formatDuration } from '../format.js';
import { catalogImageOptions, fixDeps, reuseImages } from '../fix/deps.js';
import type { Fleet } from '../fleet/fleet.js';
import { ImageError } from '../errors.js';
import { daemonFetches } from '../image-context/dockerfile.js';
import { readRepoFile } from '../repo-files.js';
import { sandboxProvider } from '../sandbox/backend-registry.js';
import type { SandboxProvider } from '../sandbox/types.js';
import { taskRefusal } from './task-refusals.js';
import type { TrialPlacement } from './trial-placement.js';

/** The scheduler's view of a fleet: slots by free capacity, lost engines, retries elsewhere. */
export function fleetPlacement(fleet: Fleet): TrialPlacement {
  return {
    async acquire({ replacing, ...options }) {
      replacing?.release({ handOver: true });
      const slot = await fleet.acquire(options);
      return { engine: slot.engine.name, lost: slot.lost, release: (o) => slot.release(o) };
    },
    checkEngine: (engine) => fleet.checkEngine(engine),
    loads: () => fleet.loads(),
    onLost: (listener) => fleet.onLost(listener),
  };
}

export interface EvalTask {
  id: string;
  catalog: LoadedCatalog;
  repoDir: string;
  /** What set the catalog's build limit, when another file did (`SuiteTask.buildLimitFrom`). */
  buildLimitFrom?: { file: string; field: string };
}

export interface FleetDepsOptions {
  fleet: Fleet;
  tasks: readonly EvalTask[];
  /** Shared by every engine (see `sharedBaselines`). */
  baselines: BaselineCache;
  /** Where each engine's image build logs go (`image-<task>-<engine>.log`). */
  logDir: string;
  /** The eval's own signal (Ctrl-C): an engine's preparation serves many trials, so no one trial's signal stops it. */
  signal: AbortSignal;
  onLine?: (line: string) => void;
}

/**
 * The dependencies of a trial on a fleet engine, ready before its first trial there: the
 * engine answers and has room, every base image the tasks need is there (shipped from the
 * local engine, checked by image id), and every task's repo image is built there (reused by
 * content hash afterwards). Trials that arrive while it is being prepared wait for the same
 * preparation; one that fails is tried again by the next trial (a lost engine gets none).
 */
export function fleetDeps(
  options: FleetDepsOptions,
): (engine: string, signal: AbortSignal) => Promise<FixDeps> {
  const ready = new Map<string, Promise<FixDeps>>();
  return (name, signal) => {
    let pending = ready.get(name);
    if (!pending) {
      pending = prepareEngine(options, name);
      ready.set(name, pending);
      pending.catch(() => ready.delete(name));
    }
    return untilAborted(pending, signal);
  };
}

async function prepareEngine(options: FleetDepsOptions, name: string): Promise<FixDeps> {
  const engine = options.fleet.engines.find((e) => e.name === name);
  if (!engine) throw new RangeError(`no engine named ${name} in this fleet`);
  const provider = await sandboxProvider('docker', {
    engine: { name, connection: engine.engine, endpoint: engine.endpoint },
  });
  const deps = reuseImages(
    fixDeps(provider, {
      baselines: options.baselines,
      ...(engine.ref ? { engineRef: engine.ref } : {}),
    }),
  );
  await provider.preflight();
  await prepareImages(provider, deps, {
    tasks: options.tasks,
    signal: options.signal,
    logFile: (task) => join(options.logDir, `image-${task.id}-${name}.log`),
    say: (line: string) => options.onLine?.(`${name}: ${line}`),
  });
  return deps;
}

/**
 * An engine's images, before its first trial: what the repo images are built FROM (or the
 * prebuilt images themselves), then each task's repo image. One task's image refused there (a
 * base not present anywhere, a build refused) is that task's: it is said, the others are made,
 * and that task's trials there meet the refusal again when they ask for the image (a refused
 * build is their `error`, an image missing there their `infrastructure`, retried elsewhere).
 * What says nothing about a task (the engine lost, Ctrl-C) stops the engine's preparation.
 */
export async function prepareImages(
  provider: Pick<SandboxProvider, 'ensureBaseImage'>,
  deps: Pick<FixDeps, 'image'>,
  options: {
    tasks: readonly EvalTask[];
    signal: AbortSignal;
    logFile: (task: EvalTask) => string;
    say: (line: string) => void;
  },
): Promise<void> {
  const { signal, say } = options;
  const ownRefusal = (error: unknown): string | undefined =>
    signal.aborted ? undefined : taskRefusal(error, { image: true });
  // What a repo image is built FROM (or the prebuilt image itself) must be there first: a
  // build that finds no base would bootstrap one there, ten times slower than shipping it.
  const bases = new Set(
    options.tasks.map((t) => t.catalog.catalog.sandbox.image ?? t.catalog.catalog.sandbox.baseImage),
  );
  for (const image of bases) {
    try {
      const presence = await provider.ensureBaseImage({
        ...(image ? { image } : {}),
        method: 'ship',
        signal,
        onLine: say,
      });
      if (presence.how !== 'present') {
        say(`${presence.tag} ${presence.how} in ${formatDuration(presence.durationMs)}`);
      }
    } catch (error) {
      const reason = ownRefusal(error);
      if (reason === undefined) throw error;
      say(`${image ?? 'the default base image'} cannot be made present here: ${reason}`);
    }
  }
  // A task's own recipe (a Harbor environment's Dockerfile) may start FROM another image: a
  // build without network there would refuse it as not present, so it goes along too. One
  // that is not here either is left to that build, which refuses it naming its line.
  const fromRecipes = new Set((await Promise.all(options.tasks.map(recipeImages))).flat());
  for (const image of fromRecipes) {
    if (bases.has(image)) continue;
    try {
      const presence = await provider.ensureBaseImage({ image, method: 'ship', signal, onLine: say });
      if (presence.how !== 'present')
        say(`${presence.tag} ${presence.how} in ${formatDuration(presence.durationMs)}`);
    } catch (error) {
      if (error instanceof ImageError && error.details?.notOnSource === true) continue;
      const reason = ownRefusal(error);
      if (reason === undefined) throw error;
      say(`${image} cannot be made present here: ${reason}`);
    }
  }
  for (const task of options.tasks) {
    try {
      const image = await deps.image({
        repoDir: task.repoDir,
        ...catalogImageOptions(task.catalog, task.buildLimitFrom),
        rebuild: false,
        logFile: options.logFile(task),
        onProgress: () => undefined,
        signal,
      });
      if (!image.reused) say(`built ${image.tag} for ${task.id}`);
    } catch (error) {
      const reason = ownRefusal(error);
      if (reason === undefined) throw error;
      say(`task ${task.id}: its image is refused here: ${reason}`);
    }
  }
}

/**
 * The images a task's own recipe (catalog `sandbox.dockerfile`) starts FROM or copies from,
 * with the catalog's build arguments; none without one, or when it cannot be read (the build
 * says why).
 */
export async function recipeImages(task: Pick<EvalTask, 'catalog'>): Promise<string[]> {
  const sandbox = task.catalog.catalog.sandbox;
  if (!sandbox.dockerfile || sandbox.image) return [];
  let text: string;
  try {
    text = (
      await readRepoFile(task.catalog.dir, sandbox.dockerfile, 'sandbox.dockerfile', {
        rootName: "the catalog's folder",
      })
    ).toString('utf8');
  } catch {
    return [];
  }
  const buildArgs = { ...(sandbox.baseImage ? { BASE_IMAGE: sandbox.baseImage } : {}), ...sandbox.buildArgs };
  return [...new Set(daemonFetches(text, buildArgs).flatMap((f) => (f.kind === 'image' ? [f.ref] : [])))];
}

function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * One baseline cache for trials on several engines. A trial waiting for a baseline that
 * another trial measures on another engine must not inherit that engine's loss: when the
 * measurement it waited for fails, it measures (or waits for a new measurement) again, and
 * only a failure of its own measurement is its failure.
 */
export function sharedBaselines(inner: BaselineCache): BaselineCache {
  return {
    async get(
      key: string,
      measure: (started: () => void) => Promise<BaselineResult>,
      onStarted?: () => void,
    ): Promise<BaselineResult> {
      for (;;) {
        let mine = false;
        try {
          return await inner.get(
            key,
            (started) => {
              mine = true;
              return measure(started);
            },
            onStarted,
          );
        } catch (error) {
          if (mine) throw error;
        }
      }
    },
  };
}
