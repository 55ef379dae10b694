/**
 * A second, real dockerd with `"userns-remap": "default"` for tests: a test engine of
 * `engines.ts` (its own network namespace, data root, exec root and containerd) whose
 * daemon.json turns user namespaces on. Every container of it runs in a user namespace whose
 * ids 0..65535 are the remap user's subordinate ids on the host (`dockremap` in /etc/subuid
 * and /etc/subgid, which scripts/setup.sh adds), so a sandbox's root is nobody on the host.
 *
 * Images get there by the fleet's save/load stream from the local engine (offline); the
 * engine stores them under a data root of its own per remap (`<data>/<uid>.<gid>`), with
 * every file owned by the remapped ids. Tests never skip: without the remap user they fail
 * with the command that adds it.
 */
import { readFile } from 'node:fs/promises';
import {
  sharedEngine,
  shipMissing,
  startEngines,
  stopEngines,
  testRunPid,
  type TestEngine,
} from './engines.js';

export const REMAP_USER = 'dockremap';

/** The host ids a remapped container's ids start at (its uid 0 is `uid` on the host). */
export interface RemapBase {
  uid: number;
  gid: number;
  /** How many ids the range holds (a container id past it cannot exist). */
  size: number;
}

async function firstRange(file: string): Promise<{ start: number; size: number } | undefined> {
  const text = await readFile(file, 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const [name, start, size] = line.trim().split(':');
    if (name === REMAP_USER && /^\d+$/.test(start ?? '') && /^\d+$/.test(size ?? ''))
      return { start: Number(start), size: Number(size) };
  }
  return undefined;
}

/**
 * The remap user's subordinate ids, as dockerd reads them (the first range of each file:
 * dockerd maps every range, and the suite's sandbox ids, 0 and 1000, fall in the first).
 */
export async function remapBase(): Promise<RemapBase> {
  const [uids, gids] = await Promise.all([firstRange('/etc/subuid'), firstRange('/etc/subgid')]);
  if (!uids || !gids || uids.size < 65536 || gids.size < 65536) {
    throw new Error(
      `the userns-remap engine needs a "${REMAP_USER}" user with 65536 subordinate ids in /etc/subuid and /etc/subgid (got ${JSON.stringify({ uids, gids })}): run \`bash scripts/setup.sh\` as root`,
    );
  }
  return { uid: uids.start, gid: gids.start, size: Math.min(uids.size, gids.size) };
}

export interface UsernsEngine {
  engine: TestEngine;
  remap: RemapBase;
}

/** Starts the userns-remap engine with `images` shipped from the local engine; stop it with `stopUsernsEngine`. */
export async function startUsernsEngine(images: string[], ownerPid?: number): Promise<UsernsEngine> {
  const remap = await remapBase();
  const [engine] = await startEngines({
    count: 1,
    daemonConfig: { 'userns-remap': 'default' },
    images,
    // Loading an image under a remap rewrites every file's owner: slower than a plain engine's.
    readyTimeoutMs: 120_000,
    ...(ownerPid ? { ownerPid } : {}),
  });
  if (!engine) throw new Error('startEngines returned no engine');
  const info = await engine.engine.info();
  if (!info.securityOptions.some((o) => /(^|,)name=userns(,|$)/.test(o))) {
    await stopEngines([engine]);
    throw new Error(
      `dockerd of ${engine.name} started without user namespaces (security options: ${info.securityOptions.join(' ')}); log: ${engine.logFile}`,
    );
  }
  return { engine, remap };
}

export async function stopUsernsEngine(started: UsernsEngine | undefined): Promise<void> {
  if (started) await stopEngines([started.engine]);
}

/**
 * The userns-remap engine of this test run, with `images` present: started once and shared by
 * every file that asks (a dockerd and a base image loaded under the remap, a minute each time
 * on a busy machine), stopped by the run's global teardown (helpers/engines.ts `sharedEngine`).
 * Outside a vitest run, an engine of its own. `release` stops only an engine of its own.
 */
export async function sharedUsernsEngine(
  images: string[],
): Promise<{ userns: UsernsEngine; release: () => Promise<void> }> {
  const run = testRunPid();
  if (!run) {
    const own = await startUsernsEngine(images);
    return { userns: own, release: () => stopUsernsEngine(own) };
  }
  const remap = await remapBase();
  const engine = await sharedEngine(
    'userns',
    run,
    async (ownerPid) => (await startUsernsEngine([], ownerPid)).engine,
  );
  await shipMissing(engine.engine, images);
  return { userns: { engine, remap }, release: async () => undefined };
}
