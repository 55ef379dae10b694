/**
 * Fleet: how to make images present on a fresh engine. One extra engine is started on this
 * machine (`scripts/test-engines.ts`: its own network namespace, TCP with mutual TLS, its
 * own data root; root only) and stopped at the end, whatever happens. Against it, with the
 * local engine as the source:
 *
 * - base image (`sandbox-harness/base-node:20`): **ship** (docker save on the local engine
 *   streamed through this process into docker load on the engine) against **build** (made on
 *   the engine the way `images ensure` makes it: registry, else offline bootstrap from Debian
 *   packages, then the recipe);
 * - repo image of `examples/shipping-service/repo` on an engine that has the base image:
 *   **ship** (the repo tag and the base tag in one stream) against **build** (the same
 *   context built there, which gives the same content-hash tag).
 *
 * Every repetition starts from the state it measures: what the previous one made on the
 * engine is removed first (build cache included, since a removed image takes its
 * intermediate layers along). The repo methods alternate (build, ship, ship, build, ...);
 * the base image is built once (minutes, an order of magnitude above shipping) and shipped
 * in every repetition.
 * The defaults in `src/sandbox/docker/images/image-shipping.ts` (`DEFAULT_PRESENCE`) are compared with the winner.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { checkInterrupted, onCleanup, runOk } from './process.mjs';
import { summarize, ratio } from './stats.mjs';

/**
 * `scripts/test-engines.ts` with these arguments (start, stop, ...).
 *
 * @param {string} packageRoot
 * @param {string[]} args
 */
export function testEngines(packageRoot, args) {
  return runOk(
    process.execPath,
    ['--import', 'tsx', join(packageRoot, 'scripts', 'test-engines.ts'), ...args],
    {
      cwd: packageRoot,
    },
  );
}

/**
 * @param {{ packageRoot: string, reps: number, log: (line: string) => void }} o
 */
export async function benchFleet(o) {
  if (process.getuid?.() !== 0) {
    throw Object.assign(
      new Error(
        'the fleet benchmark starts a Docker engine in a network namespace and needs root (or use --skip-fleet)',
      ),
      { exitCode: 3 },
    );
  }
  const dist = (/** @type {string} */ p) => import(pathToFileURL(join(o.packageRoot, 'dist', p)).href);
  const [{ DockerEngine, dockerEngine }, { readTlsDir }, fleet, images] = await Promise.all([
    dist('sandbox/docker/engine/index.js'),
    dist('sandbox/docker/engine/endpoint.js'),
    dist('sandbox/docker/images/image-shipping.js'),
    dist('sandbox/docker/index.js'),
  ]);
  const local = dockerEngine();
  const baseTag = images.DEFAULT_BASE_IMAGE;
  const repoDir = join(o.packageRoot, 'examples', 'shipping-service', 'repo');

  o.log('  starting a fresh engine (network namespace, TCP + mutual TLS) ...');
  let started = performance.now();
  const { stdout } = await testEngines(o.packageRoot, [
    'start',
    '--count',
    '1',
    '--owner-pid',
    String(process.pid),
    '--json',
  ]);
  const engineStartMs = performance.now() - started;
  const [info] = JSON.parse(stdout);
  const stop = () => testEngines(o.packageRoot, ['stop', info.name]).then(() => undefined);
  const unregister = onCleanup(stop);
  try {
    const url = new URL(info.url.replace(/^tcp:/, 'http:'));
    const tls = await readTlsDir(info.certDir);
    const target = new DockerEngine({ transport: 'tcp', host: url.hostname, port: Number(url.port), tls });
    const engineInfo = await target.info();
    const localBase = await local.images.inspect(baseTag);
    if (!localBase) throw new Error(`${baseTag} is missing on the local engine`);

    /** Removes every image on the engine: the next repetition starts from nothing. */
    const wipe = async (/** @type {string[]} */ keep = []) => {
      for (const image of await target.images.list({})) {
        if (image.tags.some((t) => keep.includes(t))) continue;
        for (const ref of image.tags.length ? image.tags : [image.id]) await target.images.remove(ref);
      }
    };
    const time = async (/** @type {() => Promise<{ how: string, bytes?: number }>} */ fn) => {
      checkInterrupted();
      const t0 = performance.now();
      const result = await fn();
      const ms = performance.now() - t0;
      if (result.how === 'present')
        throw new Error('the engine already had the image: the repetition measured nothing');
      return { ms, bytes: result.bytes };
    };

    // ---- base image ------------------------------------------------------------------
    /** @type {{ ship: number[], build: number[], shipBytes: number[] }} */
    const base = { ship: [], build: [], shipBytes: [] };
    for (let rep = 0; rep < o.reps; rep++) {
      // Building the base image takes minutes and is ten times the ship time here: once is enough.
      const order = rep === 0 ? ['ship', 'build'] : ['ship'];
      for (const method of order) {
        await wipe();
        o.log(`  base image, ${method} (${method === 'build' ? 'once' : `${rep + 1}/${o.reps}`}) ...`);
        const r = await time(() =>
          fleet.ensureBaseImageOn(target, { source: local, method, onLine: () => undefined }),
        );
        base[method].push(r.ms);
        if (method === 'ship') base.shipBytes.push(r.bytes ?? 0);
      }
    }

    // ---- repo image ------------------------------------------------------------------
    await wipe();
    await fleet.ensureBaseImageOn(target, { source: local, method: 'ship' });
    // The source has it already, so its own build (or reuse) is not in the times below.
    const sourceRepo = await images.buildRepoImage({ repoDir, engine: local });
    /** @type {{ ship: number[], build: number[], shipBytes: number[] }} */
    const repo = { ship: [], build: [], shipBytes: [] };
    for (let rep = 0; rep < o.reps; rep++) {
      const order = rep % 2 === 0 ? ['build', 'ship'] : ['ship', 'build'];
      for (const method of order) {
        await wipe([baseTag]);
        // Shipping the repo image re-tags the base; it must still be the local one's.
        if ((await target.images.inspect(baseTag))?.id !== localBase.id) {
          await fleet.ensureBaseImageOn(target, { source: local, method: 'ship' });
        }
        o.log(`  repo image, ${method} (${rep + 1}/${o.reps}) ...`);
        const r = await time(() =>
          fleet.ensureRepoImageOn(target, { source: local, repo: { repoDir }, method }),
        );
        repo[method].push(r.ms);
        if (method === 'ship') repo.shipBytes.push(r.bytes ?? 0);
      }
    }

    const summary = (/** @type {{ ship: number[], build: number[], shipBytes: number[] }} */ m) => {
      const ship = summarize(m.ship);
      const build = summarize(m.build);
      const faster = ship.medianMs <= build.medianMs ? 'ship' : 'build';
      return { ship, build, shipBytes: Math.max(...m.shipBytes), faster, shipToBuild: ratio(ship, build) };
    };
    const baseResult = summary(base);
    const repoResult = summary(repo);
    return {
      reps: o.reps,
      engine: {
        startMs: Math.round(engineStartMs),
        url: info.url,
        serverVersion: engineInfo.serverVersion,
        storageDriver: engineInfo.storageDriver,
      },
      base: { image: baseTag, ...baseResult },
      repo: { image: sourceRepo.tag, repo: 'examples/shipping-service/repo', ...repoResult },
      defaults: fleet.DEFAULT_PRESENCE,
      defaultsMatchMeasurement:
        fleet.DEFAULT_PRESENCE.base === baseResult.faster &&
        fleet.DEFAULT_PRESENCE.repo === repoResult.faster,
    };
  } finally {
    unregister();
    await stop();
  }
}
