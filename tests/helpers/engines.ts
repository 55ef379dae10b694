/**
 * Real extra Docker engines for fleet tests, on this one machine: each dockerd runs in a
 * network namespace of its own, reached over a veth pair on a private /24, listening on
 * TCP with mutual TLS (a CA, a server certificate for its address and a client certificate,
 * all made here with openssl) plus a unix socket, with its own data root, exec root, pid
 * file and cgroup parent.
 *
 * Everything an engine is made of is named `shfleet<slot>` (namespace, veth ends, cgroup
 * parent) and lives under /var/tmp/sandbox-harness-test-engines/shfleet<slot>/, whose
 * `owner.json` names the process that started it. `stopEngines` takes all of it down and
 * can be called any number of times; `reapEngines` does the same for engines whose owner
 * died (a crashed or killed earlier test run), never for those of a live process.
 *
 * Images given to `startEngines` are seeded from a cache of image stores (see `IMAGE_CACHE`):
 * shipping the node base image to a fresh engine takes ~20 s here, hard-linking a stored copy
 * of it into the new data root takes under a second. The Slurm lab (tests/helpers/slurm.ts)
 * runs its nodes on these engines.
 *
 * Root only (namespaces, veth, dockerd). `nsenter --net` and not `ip netns exec`, which
 * remounts /sys and makes dockerd fail ("Devices cgroup isn't mounted").
 */
import { spawn, execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { shipImages } from '../../src/sandbox/docker/images/image-shipping.js';
import {
  readTlsFiles,
  type EngineEndpoint,
  type TlsMaterial,
} from '../../src/sandbox/docker/engine/endpoint.js';
import { dockerEngine, DockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { withFileLock } from '../../src/image-context/build-lock.js';

const run = promisify(execFile);

export const ENGINE_PREFIX = 'shfleet';
export const ENGINES_ROOT = '/var/tmp/sandbox-harness-test-engines';
/**
 * Image stores kept between test runs, one folder per set of images (named by a hash of their
 * references and image ids): dockerd's `image/` and `overlay2/` folders as a fresh engine left
 * them after loading exactly those images. A new engine's data root gets hard links to them
 * (same file system, no bytes copied). That is safe because dockerd never writes a file of an
 * image layer or of the image store in place: layers are overlay lower folders (a container's
 * writes go to its own upper folder), and the store's metadata is replaced by rename. The image
 * ids are checked once the engine answers; a mismatch falls back to shipping.
 */
export const IMAGE_CACHE = join(ENGINES_ROOT, '.image-cache');
/** The /16 the engines' /24s are cut from (one per slot); override when it clashes here. */
const SUBNET = process.env.SANDBOX_HARNESS_TEST_ENGINE_SUBNET ?? '10.231';
const MAX_SLOTS = 200;
const PORT = 2376;

export interface TestEngine {
  name: string;
  slot: number;
  /** The engine's address inside its namespace (TLS listener) and the host's end of the veth. */
  address: string;
  hostAddress: string;
  port: number;
  dir: string;
  socketPath: string;
  logFile: string;
  /** Client files: ca.pem, cert.pem, key.pem in one folder (the layout DOCKER_CERT_PATH expects). */
  clientTlsDir: string;
  tls: TlsMaterial;
  endpoint: EngineEndpoint;
  url: string;
  engine: DockerEngine;
  /**
   * This start's claim on the slot (in `owner.json`): a later engine may take the same name
   * once this one is stopped, and nothing done on behalf of this one may touch that one.
   */
  claim: string;
}

export interface StartEnginesOptions {
  count: number;
  /** The process whose death makes these engines leftovers (default: this one). */
  ownerPid?: number;
  /**
   * Images present on every engine, with the same image ids as on `source` (default: the local
   * engine): seeded from `IMAGE_CACHE` (filled on first use), shipped when that cannot be used.
   */
  images?: string[];
  source?: DockerEngine;
  /** `false`: ship the images to each engine instead (what the fleet's own shipping does). */
  imageCache?: boolean;
  /** How long one engine may take to answer over TLS. */
  readyTimeoutMs?: number;
  /**
   * The engines' daemon.json (default: empty), e.g. `{"userns-remap": "default"}`. The host's
   * own /etc/docker/daemon.json never applies to a test engine.
   */
  daemonConfig?: Record<string, unknown>;
}

export interface Owner {
  pid: number;
  /** Start time of the owner (clock ticks since boot), so a reused pid is not taken for it. */
  startTicks: string;
  createdAt: string;
  /** Set by `claimFolder`: which claim of the folder's name this is. */
  claim?: string;
}

/** Fails (never skips) when the machine cannot run test engines, saying what to do. */
export async function requireEngineTools(): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw new Error(
      'fleet tests start Docker engines in network namespaces and need root (run them as root, as CI does)',
    );
  }
  const missing: string[] = [];
  for (const [tool, pkg] of [
    ['ip', 'iproute2'],
    ['openssl', 'openssl'],
    ['nsenter', 'util-linux'],
    ['dockerd', 'docker.io'],
  ] as const) {
    if (!(await onPath(tool))) missing.push(`${tool} (${pkg})`);
  }
  if (missing.length) {
    throw new Error(
      `fleet tests need ${missing.join(', ')}: run \`bash scripts/setup.sh\` (installs them on Debian as root)`,
    );
  }
}

async function onPath(tool: string): Promise<boolean> {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin', '/usr/bin'])) {
    if (dir && existsSync(join(dir, tool))) return true;
  }
  return false;
}

export async function processStartTicks(pid: number): Promise<string | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  // Field 22 (starttime); the command name (field 2) may hold spaces, so count after its ')'.
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

export async function ownerAlive(owner: Owner | undefined): Promise<boolean> {
  if (!owner || !Number.isInteger(owner.pid) || owner.pid <= 0) return false;
  return (await processStartTicks(owner.pid)) === owner.startTicks;
}

export async function readOwner(dir: string): Promise<Owner | undefined> {
  try {
    return JSON.parse(await readFile(join(dir, 'owner.json'), 'utf8')) as Owner;
  } catch {
    return undefined;
  }
}

async function ip(...args: string[]): Promise<void> {
  await run('ip', args);
}

/** Addresses and routes in use here, so a slot whose /24 would clash is skipped. */
async function usedPrefixes(): Promise<string[]> {
  const { stdout: addrs } = await run('ip', ['-4', '-o', 'addr', 'show']);
  const { stdout: routes } = await run('ip', ['-4', 'route', 'show', 'table', 'all']);
  return [
    ...addrs.matchAll(/inet (\d+\.\d+\.\d+)\.\d+/g),
    ...routes.matchAll(/^(?:\S+ )?(\d+\.\d+\.\d+)\.\d+/gm),
  ].map((m) => m[1] ?? '');
}

/**
 * Takes the lowest free slot: a folder renamed into place, which only one process can win.
 * Under the slots lock, so that no reaper decides a name is a leftover just before it is taken.
 */
async function claimSlot(owner: Owner): Promise<{ slot: number; name: string; dir: string; claim: string }> {
  return withSlotsLock(async () => {
    const used = new Set(await usedPrefixes());
    return claimFolder({
      root: ENGINES_ROOT,
      prefix: ENGINE_PREFIX,
      owner,
      max: MAX_SLOTS,
      usable: (slot, name) => !used.has(`${SUBNET}.${slot}`) && !existsSync(`/run/netns/${name}`),
    });
  });
}

/**
 * Claiming a slot and reaping leftovers, one process at a time: a reaper that finds a name
 * with no folder (a namespace or cgroup left by a dead run) must not take down an engine that
 * another process claims under that name in the meantime.
 */
async function withSlotsLock<T>(fn: () => Promise<T>): Promise<T> {
  return withLabLock(ENGINES_ROOT, 'slots', fn);
}

/**
 * One process at a time under the lock `name` in the lab folder `root` (claims and reaps of
 * its folders): a fixed place, whatever cache folder a test process's environment names.
 */
export async function withLabLock<T>(root: string, name: string, fn: () => Promise<T>): Promise<T> {
  const key = join(root, name);
  // Callers of this process queue here first: the file lock polls once a second.
  const turn = (labQueues.get(key) ?? Promise.resolve()).then(async () => {
    await mkdir(root, { recursive: true });
    return withFileLock(`.${name}`, () => undefined, fn, { staleMs: 60_000, dir: root });
  });
  labQueues.set(
    key,
    turn.then(
      () => undefined,
      () => undefined,
    ),
  );
  return turn;
}
const labQueues = new Map<string, Promise<void>>();

/**
 * The lowest slot whose folder `<root>/<prefix><slot>` does not exist and that `usable` accepts,
 * claimed by renaming a folder holding `owner.json` into place (only one process can win).
 */
export async function claimFolder(options: {
  root: string;
  prefix: string;
  owner: Owner;
  max: number;
  usable?: (slot: number, name: string) => boolean | Promise<boolean>;
}): Promise<{ slot: number; name: string; dir: string; claim: string }> {
  const { root, prefix, max } = options;
  const claim = randomUUID();
  const owner: Owner = { ...options.owner, claim };
  await mkdir(root, { recursive: true });
  for (let slot = 1; slot <= max; slot++) {
    const name = `${prefix}${slot}`;
    const dir = join(root, name);
    if (existsSync(dir) || !(await (options.usable?.(slot, name) ?? true))) continue;
    const staging = await mkdtemp(join(root, '.claim-'));
    await writeFile(join(staging, 'owner.json'), JSON.stringify(owner));
    try {
      await rename(staging, dir);
      return { slot, name, dir, claim };
    } catch {
      await rm(staging, { recursive: true, force: true });
    }
  }
  throw new Error(`no free slot under ${root} (${max} in use or clashing)`);
}

/** The owner record for `pid` (default: this process). */
export async function ownerOf(pid = process.pid): Promise<Owner> {
  const startTicks = await processStartTicks(pid);
  if (!startTicks) throw new Error(`owner process ${pid} does not exist`);
  return { pid, startTicks, createdAt: new Date().toISOString() };
}

async function openssl(cwd: string, ...args: string[]): Promise<void> {
  await run('openssl', args, { cwd });
}

/** A CA, a server certificate for `address` and a client certificate, all P-256, valid 2 days. */
async function makeCertificates(dir: string, address: string): Promise<{ server: string; client: string }> {
  const server = join(dir, 'server');
  const client = join(dir, 'client');
  await mkdir(server, { recursive: true });
  await mkdir(client, { recursive: true });
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  await openssl(
    dir,
    'req',
    '-x509',
    ...newKey,
    '-keyout',
    'ca-key.pem',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=sandbox-harness test CA',
  );
  await writeFile(join(dir, 'server.ext'), `subjectAltName=IP:${address}\nextendedKeyUsage=serverAuth\n`);
  await writeFile(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [who, subject, ext] of [
    ['server', `/CN=${address}`, 'server.ext'],
    ['client', '/CN=sandbox-harness test client', 'client.ext'],
  ] as const) {
    await openssl(dir, 'req', ...newKey, '-keyout', `${who}/key.pem`, '-out', `${who}.csr`, '-subj', subject);
    await openssl(
      dir,
      'x509',
      '-req',
      '-in',
      `${who}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca-key.pem',
      '-CAcreateserial',
      '-out',
      `${who}/cert.pem`,
      '-days',
      '2',
      '-extfile',
      ext,
    );
    await writeFile(join(dir, who, 'ca.pem'), await readFile(join(dir, 'ca.pem')));
  }
  return { server, client };
}

async function startOne(
  owner: Owner,
  readyTimeoutMs: number,
  daemonConfig: Record<string, unknown> = {},
  seed?: string,
): Promise<TestEngine> {
  const { slot, name, dir, claim } = await claimSlot(owner);
  try {
    if (seed) await seedDataRoot(seed, join(dir, 'data'));
    const hostAddress = `${SUBNET}.${slot}.1`;
    const address = `${SUBNET}.${slot}.2`;
    const certs = await makeCertificates(join(dir, 'tls'), address);

    await ip('netns', 'add', name);
    await ip('link', 'add', `${name}h`, 'type', 'veth', 'peer', 'name', `${name}n`);
    await ip('link', 'set', `${name}n`, 'netns', name);
    await ip('addr', 'add', `${hostAddress}/24`, 'dev', `${name}h`);
    await ip('link', 'set', `${name}h`, 'up');
    await ip('-n', name, 'addr', 'add', `${address}/24`, 'dev', `${name}n`);
    await ip('-n', name, 'link', 'set', `${name}n`, 'up');
    await ip('-n', name, 'link', 'set', 'lo', 'up');

    const socketPath = join(dir, 'docker.sock');
    const logFile = join(dir, 'dockerd.log');
    // Under userns-remap the remapped root must reach its data root below this folder (made
    // 0700 by mkdtemp): search permission only, nothing listable (its keys stay 0600).
    if (daemonConfig['userns-remap'] !== undefined) await chmod(dir, 0o711);
    // A config file of its own: the host's /etc/docker/daemon.json (hosts, storage...) must not apply.
    await writeFile(join(dir, 'daemon.json'), `${JSON.stringify(daemonConfig)}\n`);
    const tls = await readTlsFiles({
      ca: join(certs.client, 'ca.pem'),
      cert: join(certs.client, 'cert.pem'),
      key: join(certs.client, 'key.pem'),
    });
    const endpoint: EngineEndpoint = { transport: 'tcp', host: address, port: PORT, tls };
    const engine = new DockerEngine(endpoint);
    await runDockerd({ name, dir, address, engine }, readyTimeoutMs);
    return {
      name,
      slot,
      address,
      hostAddress,
      port: PORT,
      dir,
      socketPath,
      logFile,
      clientTlsDir: certs.client,
      tls,
      endpoint,
      url: `tcp://${address}:${PORT}`,
      engine,
      claim,
    };
  } catch (error) {
    await teardown(name, dir);
    throw error;
  }
}

/** dockerd of engine `name` in its namespace, until it answers over TLS (or fails saying why). */
async function runDockerd(
  e: { name: string; dir: string; address: string; engine: DockerEngine },
  readyTimeoutMs: number,
): Promise<void> {
  const { name, dir, address } = e;
  const server = join(dir, 'tls', 'server');
  const logFile = join(dir, 'dockerd.log');
  const args = [
    `--net=/run/netns/${name}`,
    'dockerd',
    '--config-file',
    join(dir, 'daemon.json'),
    '--data-root',
    join(dir, 'data'),
    '--exec-root',
    join(dir, 'exec'),
    '--pidfile',
    join(dir, 'docker.pid'),
    '--cgroup-parent',
    `/${name}`,
    '-H',
    `unix://${join(dir, 'docker.sock')}`,
    '-H',
    `tcp://${address}:${PORT}`,
    '--tlsverify',
    '--tlscacert',
    join(server, 'ca.pem'),
    '--tlscert',
    join(server, 'cert.pem'),
    '--tlskey',
    join(server, 'key.pem'),
    '--bridge',
    'none',
    '--iptables=false',
    '--ip-masq=false',
  ];
  const log = openSync(logFile, 'a');
  const child = spawn('nsenter', args, { detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = `exited with ${code ?? signal}`));
  child.once('error', (error) => (exited = error.message));
  child.unref();
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited) throw new Error(`dockerd of ${name} ${exited}; log:\n${await tail(logFile)}`);
    try {
      await e.engine.ping(1000);
      return;
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(
          `dockerd of ${name} did not answer over TLS within ${readyTimeoutMs} ms (${String(error)}); log:\n${await tail(logFile)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * The engine dies as a machine that crashes would: dockerd is killed (SIGKILL) and its TCP
 * port refuses from then on. Its containerd and containers live on until `restartEngine` or
 * `stopEngines`.
 */
export async function killEngine(e: Pick<TestEngine, 'name' | 'dir'>): Promise<void> {
  const pid = Number((await readFile(join(e.dir, 'docker.pid'), 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pid) || pid <= 0 || !(await isDockerdOf(pid, e.dir))) {
    throw new Error(`no dockerd of ${e.name} to kill`);
  }
  signal(pid, 'SIGKILL');
  await waitGone([pid], 10_000);
}

/** dockerd of a killed engine started again on the same data root, address and certificates. */
export async function restartEngine(
  e: Pick<TestEngine, 'name' | 'dir' | 'address' | 'engine'>,
  readyTimeoutMs = 60_000,
): Promise<void> {
  await runDockerd(e, readyTimeoutMs);
}

async function tail(file: string, lines = 20): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.split('\n').slice(-lines).join('\n');
}

/**
 * Starts `count` engines (in parallel), after reaping leftovers of dead test runs. Either
 * all start or none is left behind.
 */
export async function startEngines(options: StartEnginesOptions): Promise<TestEngine[]> {
  await requireEngineTools();
  await reapEngines();
  const owner = await ownerOf(options.ownerPid);
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const images = options.images ?? [];
  const source = options.source ?? dockerEngine();
  // A remapped engine keeps its store one folder deeper (data/<uid>.<gid>/): no seeding there.
  const seeded =
    images.length > 0 && options.imageCache !== false && options.daemonConfig?.['userns-remap'] === undefined;
  const seed = seeded ? await imageCacheEntry(source, images, owner, readyTimeoutMs) : undefined;
  const settled = await Promise.allSettled(
    Array.from({ length: options.count }, () =>
      startOne(owner, readyTimeoutMs, options.daemonConfig, seed?.dir),
    ),
  );
  const started = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  try {
    if (failure) throw failure.reason;
    if (images.length) {
      await Promise.all(
        started.map(async (e) => {
          if (seed && (await hasImages(e.engine, seed.ids))) return;
          await shipImages(source, e.engine, images);
        }),
      );
    }
  } catch (error) {
    await stopEngines(started);
    throw error;
  }
  return started;
}

interface CacheEntry {
  dir: string;
  /** Reference -> image id, as on the source engine. */
  ids: Map<string, string>;
}

const cacheFills = new Map<string, Promise<CacheEntry>>();

/** The `IMAGE_CACHE` folder holding exactly `refs` as `source` has them, filled when missing. */
async function imageCacheEntry(
  source: DockerEngine,
  refs: string[],
  owner: Owner,
  readyTimeoutMs: number,
): Promise<CacheEntry> {
  const ids = new Map<string, string>();
  for (const ref of [...new Set(refs)].sort()) {
    const image = await source.images.inspect(ref);
    if (!image) {
      throw new Error(
        `cannot put ${ref} on the test engines: it is not on ${source.where ?? 'the local engine'} (\`bash scripts/setup.sh\` makes the base images)`,
      );
    }
    ids.set(ref, image.id);
  }
  const key = createHash('sha256')
    .update(JSON.stringify([...ids]))
    .digest('hex')
    .slice(0, 16);
  const dir = join(IMAGE_CACHE, key);
  // An entry appears by rename once complete, so one that exists is whole.
  if (existsSync(join(dir, 'images.json'))) return { dir, ids };
  let pending = cacheFills.get(key);
  if (!pending) {
    pending = fillImageCache(source, ids, dir, owner, readyTimeoutMs).finally(() => cacheFills.delete(key));
    cacheFills.set(key, pending);
  }
  return pending;
}

/**
 * A new engine's data root holding the entry's images: the image store's metadata as hard links
 * (a few hundred small files), each layer's folder made anew with copies of its few small files,
 * and its content (`diff`, ~43,000 files for the node base image) a read-only bind mount of the
 * entry's. Creating that is instant, and so is taking it down (the teardown unmounts before it
 * removes the folder), where removing hard links to every file took ~4 s per engine. Only the
 * content is shared, read-only: an image layer's content is only ever an overlay lower folder (a
 * container writes to a layer of its own), while dockerd does write the layer's own files (it
 * marks a parent layer `committed`), and removing the image fails rather than empty the entry.
 * Anything that fails leaves the data root empty: the images are shipped instead.
 */
async function seedDataRoot(seed: string, dataRoot: string): Promise<void> {
  const layers = join(dataRoot, 'overlay2');
  const contents: Array<[string, string]> = [];
  try {
    await mkdir(layers, { recursive: true });
    await run('cp', ['-al', join(seed, 'image'), dataRoot]);
    await run('cp', ['-a', join(seed, 'overlay2', 'l'), layers]);
    for (const layer of await readdir(join(seed, 'overlay2'))) {
      if (layer === 'l') continue;
      const from = join(seed, 'overlay2', layer);
      await mkdir(join(layers, layer, 'diff'), { recursive: true });
      for (const entry of await readdir(from)) {
        if (entry !== 'diff') await run('cp', ['-a', join(from, entry), join(layers, layer)]);
      }
      contents.push([join(from, 'diff'), join(layers, layer, 'diff')]);
    }
    // dockerd makes its data root (and the overlay2 driver its folder) a mount of its own,
    // binding it onto itself without the mounts below it unless it is a mount point already:
    // so both are made mount points first (after the hard links, which cannot cross a mount).
    await run('mount', ['--bind', dataRoot, dataRoot]);
    await run('mount', ['--bind', layers, layers]);
    for (const [from, to] of contents) await run('mount', ['--bind', '-o', 'ro', from, to]);
  } catch {
    await unmountUnder(dataRoot);
    await rm(dataRoot, { recursive: true, force: true });
  }
}

/** Unmounts everything mounted under `dir` (lazily, deepest first). */
async function unmountUnder(dir: string): Promise<void> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  const mounts = mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((mount) => mount === dir || mount.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const mount of mounts) await run('umount', ['-l', mount]).catch(() => undefined);
}

/** Whether a folder of `entry` is mounted somewhere (an engine runs on it). */
async function inUse(entry: string): Promise<boolean> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  return mountinfo.split('\n').some((line) => (line.split(' ')[3] ?? '').startsWith(`${entry}/`));
}

/**
 * One throwaway engine loads the images (shipped from `source`) and is stopped; its image
 * store becomes the entry. Two processes filling the same entry both finish; the first rename
 * wins and the other's copy is dropped.
 */
async function fillImageCache(
  source: DockerEngine,
  ids: Map<string, string>,
  dir: string,
  owner: Owner,
  readyTimeoutMs: number,
): Promise<CacheEntry> {
  await mkdir(IMAGE_CACHE, { recursive: true });
  for (const entry of await readdir(IMAGE_CACHE)) {
    // Staging folders of fills whose process died midway.
    const path = join(IMAGE_CACHE, entry);
    if (entry.startsWith('.staging-') && !(await ownerAlive(await readOwner(path)))) {
      await rm(path, { recursive: true, force: true });
    }
  }
  const engine = await startOne(owner, readyTimeoutMs);
  try {
    await shipImages(source, engine.engine, [...ids.keys()]);
    if (!(await hasImages(engine.engine, ids)))
      throw new Error(`shipping ${[...ids.keys()].join(', ')} failed`);
    await stopDockerd(engine.dir);
    const staging = await mkdtemp(join(IMAGE_CACHE, '.staging-'));
    await writeFile(join(staging, 'owner.json'), JSON.stringify(owner));
    for (const part of ['image', 'overlay2'])
      await rename(join(engine.dir, 'data', part), join(staging, part));
    await writeFile(join(staging, 'images.json'), `${JSON.stringify(Object.fromEntries(ids), null, 2)}\n`);
    await rm(join(staging, 'owner.json'));
    await rename(staging, dir).catch(async () => rm(staging, { recursive: true, force: true }));
  } finally {
    await teardown(engine.name, engine.dir);
  }
  await evictStaleEntries(dir, ids);
  return { dir, ids };
}

/** Entries for the same references with other image ids (an older build of a base image). */
async function evictStaleEntries(keep: string, ids: Map<string, string>): Promise<void> {
  const refs = JSON.stringify([...ids.keys()]);
  for (const entry of await readdir(IMAGE_CACHE)) {
    const path = join(IMAGE_CACHE, entry);
    if (entry.startsWith('.') || path === keep) continue;
    const stored = await readFile(join(path, 'images.json'), 'utf8')
      .then((text) => Object.keys(JSON.parse(text) as Record<string, string>).sort())
      .catch(() => undefined);
    if (stored && JSON.stringify(stored) === refs && !(await inUse(path))) {
      await rm(path, { recursive: true, force: true });
    }
  }
}

async function hasImages(engine: DockerEngine, ids: Map<string, string>): Promise<boolean> {
  for (const [ref, id] of ids) {
    if ((await engine.images.inspect(ref))?.id !== id) return false;
  }
  return true;
}

/**
 * Takes the engines down and removes every trace; safe to call again, and on engines half
 * started. Each only while its folder is still its own claim (`claim`): once stopped, its name
 * is free, and a second stop must not reach the engine another test file has started under
 * that name since. Without a claim (`scripts/test-engines.ts stop NAME`), whatever holds it.
 */
export async function stopEngines(
  engines: Array<Pick<TestEngine, 'name' | 'dir'> & { claim?: string | undefined }>,
): Promise<void> {
  await Promise.all(
    engines.map(async (e) => {
      if (e.claim !== undefined && !(await stillClaimed(e.dir, e.claim))) return;
      await teardown(e.name, e.dir);
    }),
  );
}

/**
 * Whether the folder is still the claim `claim`. A folder appears only by rename, owner
 * record included, and goes last in a teardown; so one that is gone was stopped whole.
 */
export async function stillClaimed(dir: string, claim: string): Promise<boolean> {
  return (await readOwner(dir))?.claim === claim;
}

/** Whether the folder is there as another claim than `claim`: what it holds is not that claim's. */
export async function claimedByAnother(dir: string, claim: string): Promise<boolean> {
  const owner = await readOwner(dir);
  return owner !== undefined && owner.claim !== claim;
}

/** Takes down engines whose owner process is gone; returns their names. */
export async function reapEngines(): Promise<string[]> {
  return withSlotsLock(reapUnlocked);
}

async function reapUnlocked(): Promise<string[]> {
  const reaped: string[] = [];
  const names = new Set<string>();
  for (const entry of await readdir(ENGINES_ROOT).catch(() => [] as string[])) {
    if (entry.startsWith(ENGINE_PREFIX)) names.add(entry);
    else if (entry.startsWith('.claim-')) {
      // A claim that never got renamed into place: its writer died between two calls.
      const staging = join(ENGINES_ROOT, entry);
      if (!(await ownerAlive(await readOwner(staging)))) await rm(staging, { recursive: true, force: true });
    }
  }
  // Namespaces and cgroups without a folder: a run that died while its folder was being removed.
  const ours = new RegExp(`^${ENGINE_PREFIX}\\d+$`);
  for (const entry of await readdir('/run/netns').catch(() => [] as string[])) {
    if (ours.test(entry)) names.add(entry);
  }
  for (const controller of await readdir('/sys/fs/cgroup').catch(() => [] as string[])) {
    for (const entry of await readdir(`/sys/fs/cgroup/${controller}`).catch(() => [] as string[])) {
      if (ours.test(entry)) names.add(entry);
    }
  }
  for (const entry of await readdir('/sys/fs/cgroup').catch(() => [] as string[])) {
    if (ours.test(entry)) names.add(entry);
  }
  for (const name of names) {
    const dir = join(ENGINES_ROOT, name);
    if (await ownerAlive(await readOwner(dir))) continue;
    await teardown(name, dir);
    reaped.push(name);
  }
  return reaped;
}

/** dockerd of the engine in `dir`, gracefully: it stops its containers and its containerd. */
async function stopDockerd(dir: string): Promise<void> {
  const pid = Number((await readFile(join(dir, 'docker.pid'), 'utf8').catch(() => '')).trim());
  if (Number.isInteger(pid) && pid > 0 && (await isDockerdOf(pid, dir))) {
    signal(pid, 'SIGTERM');
    await waitGone([pid], 20_000);
    signal(pid, 'SIGKILL');
  }
}

async function teardown(name: string, dir: string): Promise<void> {
  // 1. dockerd first, so its containers stop the ordinary way.
  await stopDockerd(dir);
  // 2. Whatever is left: processes in the namespace (dockerd, containerd, shims) and in the
  //    engine's cgroups (container processes, which have namespaces of their own).
  for (let round = 0; round < 5; round++) {
    const pids = [...(await namespacePids(name)), ...(await cgroupPids(name))];
    if (pids.length === 0) break;
    for (const p of pids) signal(p, 'SIGKILL');
    await waitGone(pids, 5000);
  }
  // 3. Mounts under the folder (overlay layers, container namespaces, seeded image layers),
  //    before anything is removed: `rm` must never reach into a seeded layer.
  await unmountUnder(dir);
  // 4. Cgroups, namespace (which takes the veth pair with it), a stray host-side veth end.
  for (const root of await cgroupRoots(name)) await removeCgroupTree(root);
  if (existsSync(`/run/netns/${name}`)) await ip('netns', 'delete', name).catch(() => undefined);
  if (existsSync(`/sys/class/net/${name}h`)) await ip('link', 'delete', `${name}h`).catch(() => undefined);
  // 5. The folder last: while it exists, reapEngines can still find the engine.
  await rm(dir, { recursive: true, force: true });
}

async function isDockerdOf(pid: number, dir: string): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.split('\0').includes('dockerd') && cmdline.includes(dir);
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

export async function waitGone(pids: number[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (pids.every((p) => !existsSync(`/proc/${p}`) || isZombie(p))) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A zombie has exited; only its parent (maybe not us) can reap it. */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

export async function namespacePids(name: string): Promise<number[]> {
  if (!existsSync(`/run/netns/${name}`)) return [];
  const { stdout } = await run('ip', ['netns', 'pids', name]).catch(() => ({ stdout: '' }));
  return stdout
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((p) => Number.isInteger(p) && p > 0 && p !== process.pid);
}

/** `/sys/fs/cgroup/<controller>/<name>` (v1) or `/sys/fs/cgroup/<name>` (v2). */
async function cgroupRoots(name: string): Promise<string[]> {
  const roots: string[] = [];
  if (existsSync(`/sys/fs/cgroup/${name}`)) roots.push(`/sys/fs/cgroup/${name}`);
  for (const controller of await readdir('/sys/fs/cgroup').catch(() => [] as string[])) {
    const candidate = `/sys/fs/cgroup/${controller}/${name}`;
    if (existsSync(candidate)) roots.push(candidate);
  }
  return roots;
}

async function cgroupPids(name: string): Promise<number[]> {
  const pids = new Set<number>();
  const walk = async (dir: string): Promise<void> => {
    const procs = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
    for (const line of procs.split('\n')) if (line.trim()) pids.add(Number(line));
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      if (entry.isDirectory()) await walk(join(dir, entry.name));
    }
  };
  for (const root of await cgroupRoots(name)) await walk(root);
  pids.delete(process.pid);
  return [...pids];
}

async function removeCgroupTree(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.isDirectory()) await removeCgroupTree(join(dir, entry.name));
  }
  // cgroup folders go with rmdir, not rm -r (their files cannot be unlinked).
  await run('rmdir', [dir]).catch(() => undefined);
}

/**
 * What is left of `name` on this machine (for tests of the clean-up itself). With `claim`:
 * of that claim only; a folder of another claim is another engine's name, and all it holds.
 */
export async function traces(name: string, claim?: string): Promise<string[]> {
  if (claim !== undefined && (await claimedByAnother(join(ENGINES_ROOT, name), claim))) return [];
  const found: string[] = [];
  if (existsSync(join(ENGINES_ROOT, name))) found.push(`folder ${join(ENGINES_ROOT, name)}`);
  if (existsSync(`/run/netns/${name}`)) found.push(`network namespace ${name}`);
  if (existsSync(`/sys/class/net/${name}h`)) found.push(`veth ${name}h`);
  for (const root of await cgroupRoots(name)) found.push(`cgroup ${root}`);
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  if (mountinfo.includes(`${join(ENGINES_ROOT, name)}/`)) found.push('mounts');
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const cgroup = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cgroup.includes(`:/${name}/`) || cmdline.includes(join(ENGINES_ROOT, name))) {
      found.push(`process ${pid} (${cmdline.split('\0').join(' ').trim().slice(0, 80)})`);
    }
  }
  return found;
}

/**
 * Engines shared by the test files of one run: started by the first file that asks, owned by
 * the run's vitest process (tests/global-setup.ts names it in SANDBOX_HARNESS_TEST_RUN, which
 * every worker inherits), so `reapEngines` leaves them alone while the run lives and takes them
 * down after a crashed one; stopped by the run's global teardown (`stopSharedEngines`). What
 * each file makes on a shared engine carries names of its own, as on the local engine.
 */
const SHARED_RECORD = 'shared.json';

interface SharedRecord {
  kind: string;
  run: number;
  engine: Omit<TestEngine, 'tls' | 'endpoint' | 'engine'>;
}

/** The pid of this run's vitest process, or undefined outside a run (a file run by other means). */
export function testRunPid(): number | undefined {
  const pid = Number(process.env.SANDBOX_HARNESS_TEST_RUN);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

async function engineOf(record: SharedRecord['engine']): Promise<TestEngine> {
  const tls = await readTlsFiles({
    ca: join(record.clientTlsDir, 'ca.pem'),
    cert: join(record.clientTlsDir, 'cert.pem'),
    key: join(record.clientTlsDir, 'key.pem'),
  });
  const endpoint: EngineEndpoint = { transport: 'tcp', host: record.address, port: record.port, tls };
  return { ...record, tls, endpoint, engine: new DockerEngine(endpoint) };
}

async function sharedRecords(run: number): Promise<SharedRecord[]> {
  const records: SharedRecord[] = [];
  for (const entry of await readdir(ENGINES_ROOT).catch(() => [] as string[])) {
    if (!entry.startsWith(ENGINE_PREFIX)) continue;
    const text = await readFile(join(ENGINES_ROOT, entry, SHARED_RECORD), 'utf8').catch(() => undefined);
    if (!text) continue;
    const record = JSON.parse(text) as SharedRecord;
    if (record.run === run) records.push(record);
  }
  return records;
}

/**
 * The run's shared engine of `kind`, started by `start` (with the run as its owner) if this
 * run has none that answers; one process at a time decides, under a lock.
 */
export async function sharedEngine(
  kind: string,
  run: number,
  start: (ownerPid: number) => Promise<TestEngine>,
): Promise<TestEngine> {
  return withFileLock(
    `test-engine-${kind}-${run}`,
    () => undefined,
    async () => {
      for (const record of await sharedRecords(run)) {
        if (record.kind !== kind) continue;
        const found = await engineOf(record.engine);
        if (
          await found.engine.ping(5000).then(
            () => true,
            () => false,
          )
        )
          return found;
        await stopEngines([found]);
      }
      const started = await start(run);
      const { tls: _tls, endpoint: _endpoint, engine: _engine, ...engine } = started;
      const record: SharedRecord = { kind, run, engine };
      await writeFile(join(started.dir, SHARED_RECORD), `${JSON.stringify(record, null, 2)}\n`);
      return started;
    },
  );
}

/** Stops every engine shared by the run of `run` (its global teardown). */
export async function stopSharedEngines(run: number): Promise<void> {
  await stopEngines((await sharedRecords(run)).map((r) => r.engine));
}

/** Ships the images of `refs` that `target` lacks (or holds as another image) from the local engine. */
export async function shipMissing(target: DockerEngine, refs: string[]): Promise<void> {
  const missing: string[] = [];
  for (const ref of refs) {
    const [here, there] = await Promise.all([dockerEngine().images.inspect(ref), target.images.inspect(ref)]);
    if (!here) throw new Error(`${ref} is not on the local engine`);
    if (there?.id !== here.id) missing.push(ref);
  }
  if (missing.length > 0) await shipImages(dockerEngine(), target, missing);
}
