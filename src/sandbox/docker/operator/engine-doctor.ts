/**
 * Is the Docker engine fit to run sandboxes? Each check says what it found and, when
 * something is wrong, the command that fixes it. `fatal` problems make the engine unusable.
 */
import { egressProblem } from '../network/egress-network.js';
import { buildResolverProblem } from '../network/build-egress.js';
import { HarnessError, errorMessage } from '../../../errors.js';
import { formatBytes, formatDuration } from '../../../format.js';
import { DEFAULT_RESOURCES, type DoctorCheck, type DoctorReport, type EngineFacts } from '../../types.js';

export type { DoctorCheck, DoctorReport, EngineFacts } from '../../types.js';
import { findOnPath, isDebianRoot } from '../host-tools.js';
import {
  dockerEngine,
  dockerHostHint,
  StorageQuotaUnsupported,
  type DockerEngine,
  type EngineInfo,
} from '../engine/index.js';
import { BASE_IMAGES, DEFAULT_BASE_IMAGE } from '../images/base-images.js';
import { baseImageStatus } from '../images/image-inventory.js';
import { hardenedContainer } from '../../container/container-spec.js';
import { probeContainerRequest, runProbe, type ProbeContainer } from './probe-container.js';
import { NAMES_PROBE_SCRIPT, namesCheck, splitNamesProbe } from './names-check.js';
import { runtimeChecks } from './runtime-doctor.js';

export interface DoctorOptions {
  engine?: DockerEngine;
  /** How long the test container may take to start and run. */
  containerTimeoutMs?: number;
  /**
   * An engine of a fleet (named by `--engines`/`--engine`): `endpoint` names it; it needs the
   * API this code is tested on (1.41); a missing base image is fixed by shipping it, which
   * `prepareHint` says how; the offline bootstrap (this machine's tools) is not its concern.
   */
  fleet?: { endpoint: string; prepareHint: string };
}

/**
 * Whether `sandbox.egress` can be enforced on this engine from here. Not a problem when it
 * cannot (network none needs none of it), so the check passes either way and says which:
 * a catalog with egress is then refused by `fix`, never run with more network.
 */
export async function egressCheck(engine: DockerEngine): Promise<DoctorCheck> {
  const problem = await egressProblem(engine).catch((error: unknown) => errorMessage(error));
  const build = problem ? undefined : await buildResolverProblem();
  return {
    name: 'egress',
    ok: true,
    detail: problem
      ? `sandbox.egress cannot be enforced here (${problem}); catalogs that set it are refused, sandboxes run with network none`
      : `sandbox.egress can be enforced: a per-sandbox internal network, a proxy on this host, the host firewall (iptables); ${build ? `not for image builds (phase build): ${build}` : 'image builds too (phase build)'}`,
  };
}

/** Below this much free disk under the data root, images and trial containers may not fit. */
export const LOW_DISK_BYTES = 5 * 1024 ** 3;

/**
 * Oldest Engine API the harness supports, for the local engine and every engine of a fleet
 * (which run unattended and exchange images by save/load): Docker 20.10.
 */
export const MIN_API: readonly [number, number] = [1, 41];
export const MIN_DOCKER = '20.10';

/**
 * Said with every refusal. An engine ignores the HostConfig fields its API version does not
 * know (the JSON decoder skips them), so on an older engine a limit could silently not apply.
 */
export const MIN_API_WHY =
  `Docker ${MIN_DOCKER} (API ${MIN_API.join('.')}) is the oldest engine the sandbox hardening is tested on, and the first ` +
  'that runs on cgroup v2 hosts; an older engine ignores settings it does not know instead of refusing them, ' +
  'so a sandbox limit could silently not apply.';

export function dockerEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  return env.DOCKER_HOST && env.DOCKER_HOST.trim() !== '' ? env.DOCKER_HOST : 'unix:///var/run/docker.sock';
}

function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

async function daemonFix(error: unknown): Promise<string> {
  const code = causeCode(error);
  if (code === 'EACCES') {
    return 'Your user may not use the Docker socket: `sudo usermod -aG docker "$USER"` and log in again (or run as root).';
  }
  const dockerHost = dockerHostHint();
  if (dockerHost) return dockerHost;
  if (await isDebianRoot()) {
    return '`sandbox-harness setup` (or `bash scripts/ensure-docker.sh`): installs docker.io if needed and starts dockerd.';
  }
  return 'Start the Docker engine (`sudo systemctl start docker`, or Docker Desktop), or point DOCKER_HOST at one.';
}

/** `1.41` >= `1.41`, `1.43` >= `1.41`, `2.0` >= `1.41`; anything that is not `N.N` is not. */
export function apiAtLeast(version: string, [major, minor]: readonly [number, number]): boolean {
  const match = /^(\d+)\.(\d+)$/.exec(version.trim());
  if (!match) return false;
  const a = Number(match[1]);
  const b = Number(match[2]);
  return a > major || (a === major && b >= minor);
}

/** The engine must speak API 1.41 or newer; an older or unknown one is refused, saying why. */
export function serverVersionCheck(info: EngineInfo): DoctorCheck {
  // Podman answers the Docker API with its own version: named as what it is.
  const found = `${productName(info)} ${info.serverVersion || 'unknown'} (API ${info.apiVersion || 'unknown'}) on ${info.operatingSystem || 'unknown OS'}`;
  if (apiAtLeast(info.apiVersion, MIN_API)) return { name: 'server-version', ok: true, detail: found };
  return {
    name: 'server-version',
    ok: false,
    fatal: true,
    detail: info.apiVersion
      ? `${found}: older than Docker ${MIN_DOCKER} (API ${MIN_API.join('.')}), which sandbox-harness needs`
      : `${found}: the engine did not say its API version, and sandbox-harness needs ${MIN_API.join('.')} or newer`,
    fix: `Upgrade the Docker engine to ${MIN_DOCKER} or newer (Debian: \`apt-get install -y docker.io\`). Why: ${MIN_API_WHY}`,
  };
}

/** Which program answers the engine's API, as people call it. */
export function productName(info: Pick<EngineInfo, 'product'>): 'Docker' | 'Podman' {
  return info.product === 'podman' ? 'Podman' : 'Docker';
}

function versionChecks(info: EngineInfo): DoctorCheck[] {
  const checks: DoctorCheck[] = [serverVersionCheck(info)];
  const driver = info.storageDriver;
  const driverOk = driver !== '' && driver !== 'vfs';
  checks.push({
    name: 'storage-driver',
    ok: driverOk,
    detail:
      driver === 'vfs'
        ? 'vfs: works, but every container copies its whole image (slow, disk hungry)'
        : driver || 'unknown',
    ...(driverOk
      ? {}
      : {
          fix: 'Use overlay2: set {"storage-driver": "overlay2"} in /etc/docker/daemon.json and restart dockerd.',
        }),
  });
  checks.push({
    name: 'cgroups',
    ok: true,
    detail: `cgroup v${info.cgroupVersion || '?'} (limits work on v1 and v2)`,
  });
  const missing = [
    info.memoryLimit ? undefined : 'memory',
    info.swapLimit ? undefined : 'swap',
    info.pidsLimit ? undefined : 'pids',
  ].filter((x): x is string => x !== undefined);
  checks.push({
    name: 'kernel-limits',
    ok: missing.length === 0,
    detail:
      missing.length === 0
        ? 'memory, swap and pids limits supported'
        : `the kernel does not enforce ${missing.join(', ')} limits: a runaway sandbox is not fully contained`,
    ...(missing.length === 0
      ? {}
      : {
          fix: missing.includes('swap')
            ? 'Boot with `cgroup_enable=memory swapaccount=1` (cgroup v1) or use cgroup v2, then restart dockerd.'
            : 'Use a kernel with the memory and pids cgroup controllers enabled (or cgroup v2), then restart dockerd.',
        }),
  });
  return checks;
}

interface ContainerResult {
  check: DoctorCheck;
  /** Whether the probe's /etc/hosts and /etc/resolv.conf were the harness's (names-check.ts). */
  names?: DoctorCheck;
  /** From `df` inside the container: the file system of the engine's data root. */
  disk?: { freeBytes: number; totalBytes: number };
}

/** `df -Pk /` output: the overlay root reports the file system its writable layers live on. */
export function parseDf(output: string): { freeBytes: number; totalBytes: number } | undefined {
  const last = output.trim().split('\n').pop() ?? '';
  const fields = last.trim().split(/\s+/);
  const total = Number(fields[1]);
  const free = Number(fields[3]);
  if (fields.length < 6 || !Number.isFinite(total) || !Number.isFinite(free) || total <= 0) return undefined;
  return { freeBytes: free * 1024, totalBytes: total * 1024 };
}

/** A probe runs as a sandbox would: its user, its folder, its default limits, no network. */
function doctorProbe(image: string): ProbeContainer {
  return {
    image,
    role: 'doctor',
    limits: {
      memoryBytes: DEFAULT_RESOURCES.memoryBytes,
      nanoCpus: Math.round(DEFAULT_RESOURCES.cpus * 1e9),
      pids: DEFAULT_RESOURCES.pids,
      maxFileBytes: DEFAULT_RESOURCES.maxFileBytes,
      tmpfsBytes: DEFAULT_RESOURCES.tmpfsBytes,
      nofile: 1024,
    },
  };
}

async function containerCheck(
  engine: DockerEngine,
  image: string,
  timeoutMs: number,
  product: 'Docker' | 'Podman',
): Promise<ContainerResult> {
  try {
    // df is a hint about free disk, never a reason for the check to fail.
    const probe = await runProbe(engine, {
      ...doctorProbe(image),
      script: `df -Pk / 2>/dev/null; ${NAMES_PROBE_SCRIPT}; true`,
      timeoutMs,
      check: (details) => {
        const network = String(details.hostConfig.NetworkMode ?? '');
        if (network !== 'none') throw new Error(`the container got network mode "${network}", not "none"`);
      },
    });
    if (probe.exitCode !== 0) throw new Error(`a command in it exited with ${probe.exitCode}`);
    const seen = splitNamesProbe(probe.stdout);
    const disk = parseDf(seen.before);
    return {
      names: namesCheck(seen, product),
      check: {
        name: 'sandbox-container',
        ok: true,
        detail: `a hardened --network none container of ${image} started and ran in ${formatDuration(probe.elapsedMs)}`,
      },
      ...(disk ? { disk } : {}),
    };
  } catch (error) {
    return {
      check: {
        name: 'sandbox-container',
        ok: false,
        fatal: true,
        detail: `a hardened --network none container of ${image} failed: ${errorMessage(error).split('\n')[0]}`,
        fix:
          error instanceof HarnessError && error.hint
            ? error.hint
            : 'Read the engine log (`/var/log/sandbox-harness-dockerd.log` when `sandbox-harness setup` started it); the engine must support --init, cap-drop, pids and memory limits.',
      },
    };
  }
}

export function diskCheck(facts: EngineFacts): DoctorCheck {
  const stored = facts.usage
    ? `; the engine holds ${facts.usage.images} images (${facts.usage.layersBytes === undefined ? 'size not reported' : formatBytes(facts.usage.layersBytes)}), ${facts.usage.containers} containers (${formatBytes(facts.usage.containersBytes)}), build cache ${formatBytes(facts.usage.buildCacheBytes)}`
    : '';
  const root = facts.dockerRootDir || 'the data root';
  if (facts.freeBytes === undefined || facts.totalBytes === undefined) {
    return {
      name: 'disk',
      ok: true,
      warning: true,
      detail: `free space under ${root} unknown (no container ran)${stored}`,
      fix: 'make a base image (see base-images), then run doctor again to measure it',
    };
  }
  const low = facts.freeBytes < LOW_DISK_BYTES;
  return {
    name: 'disk',
    ok: !low,
    detail: `${formatBytes(facts.freeBytes)} free of ${formatBytes(facts.totalBytes)} under ${root}${stored}`,
    ...(low
      ? {
          fix: `Free disk space on that machine (images and trial containers need several GB): \`docker system prune\` there removes what no container uses, \`sandbox-harness gc\` removes kept sandboxes.`,
        }
      : {}),
  };
}

/**
 * How a sandbox's disk budget (`sandbox.resources.diskBytes`) will be held on this engine: by
 * the engine's own per-container quota where the storage driver has one (overlay2 on xfs with
 * pquota), else by the harness's watchdog, which samples the writable layer every second and
 * stops the sandbox past its budget. Both hold the budget; the user should know which one,
 * because the watchdog lets a fast writer go over by up to a second's writing.
 */
async function diskBudgetCheck(engine: DockerEngine, image: string, driver: string): Promise<DoctorCheck> {
  let id: string | undefined;
  try {
    // Made, never started: whether the engine takes the quota is all this asks.
    id = await engine.containers.create(
      hardenedContainer({
        ...probeContainerRequest(doctorProbe(image)),
        entrypoint: ['true'],
        cmd: [],
        env: [],
        diskBytes: DEFAULT_RESOURCES.diskBytes,
      }),
    );
    return {
      name: 'disk-budget',
      ok: true,
      detail: `held by the engine: ${driver || 'the storage driver'} gives each sandbox a writable-layer quota`,
    };
  } catch (error) {
    if (error instanceof StorageQuotaUnsupported) {
      return {
        name: 'disk-budget',
        ok: true,
        detail:
          `held by the harness's watchdog: ${driver || 'the storage driver'} here has no per-container quota, ` +
          'so the writable layer is measured every second and a sandbox over its budget is stopped (overlay2 on xfs with pquota lets the engine hold it exactly)',
      };
    }
    return {
      name: 'disk-budget',
      ok: false,
      detail: `could not tell how the disk budget is held: ${errorMessage(error).split('\n')[0]}`,
      fix: 'Run `sandbox-harness doctor` again; if it persists, read the engine log.',
    };
  } finally {
    if (id) await engine.containers.remove(id).catch(() => undefined);
  }
}

export async function runDoctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  const engine = options.engine ?? dockerEngine();
  const fleet = options.fleet;
  const endpoint = fleet?.endpoint ?? dockerEndpoint();
  const checks: DoctorCheck[] = [];
  // Filled in once the engine has said what it is; a report before that has none.
  const known: { facts?: EngineFacts } = {};
  const report = (): DoctorReport => ({
    ok: checks.every((c) => c.ok),
    usable: !checks.some((c) => !c.ok && c.fatal),
    endpoint,
    checks,
    ...(known.facts ? { engine: known.facts } : {}),
  });
  const unreachableFix = async (error: unknown) =>
    fleet
      ? `Check that the engine at ${fleet.endpoint} runs and that this machine reaches it (address, port, firewall, TLS files or ssh key).`
      : daemonFix(error);

  try {
    await engine.ping(5000);
    checks.push({ name: 'daemon', ok: true, detail: `answers at ${endpoint}` });
  } catch (error) {
    checks.push({
      name: 'daemon',
      ok: false,
      fatal: true,
      detail: `no answer at ${endpoint}: ${errorMessage(error)}`,
      fix: await unreachableFix(error),
    });
    return report();
  }

  let info: EngineInfo;
  try {
    info = await engine.info();
    checks.push(...versionChecks(info));
  } catch (error) {
    checks.push({
      name: 'server-version',
      ok: false,
      fatal: true,
      detail: errorMessage(error),
      fix: await unreachableFix(error),
    });
    return report();
  }
  const facts: EngineFacts = {
    name: info.name,
    product: productName(info),
    serverVersion: info.serverVersion,
    apiVersion: info.apiVersion,
    cpus: info.cpus,
    memoryBytes: info.memoryBytes,
    dockerRootDir: info.dockerRootDir,
  };
  known.facts = facts;
  const usage = await engine.storageUsage().catch(() => undefined);
  if (usage) facts.usage = usage;

  const bases = await baseImageStatus(engine);
  const present = bases.filter((b) => b.present);
  const defaultBase = bases.find((b) => b.tag === DEFAULT_BASE_IMAGE);
  const probeImage = defaultBase?.present ? defaultBase.tag : present[0]?.tag;
  if (probeImage) {
    const container = await containerCheck(
      engine,
      probeImage,
      options.containerTimeoutMs ?? 30_000,
      productName(info),
    );
    checks.push(container.check);
    if (container.names) checks.push(container.names);
    if (container.disk) Object.assign(facts, container.disk);
    if (container.check.ok) checks.push(await diskBudgetCheck(engine, probeImage, info.storageDriver));
    if (container.check.ok) checks.push(...(await runtimeChecks(engine, info, probeImage)));
  } else {
    checks.push({
      name: 'sandbox-container',
      ok: false,
      detail: 'not tried: there is no base image to start a container from',
      fix: fleet?.prepareHint ?? 'sandbox-harness images ensure node',
    });
  }
  checks.push(diskCheck(facts));
  checks.push(await egressCheck(engine));

  const describe = (b: (typeof bases)[number]) =>
    b.present
      ? `${b.kind}: ${b.tag} (${b.origin ?? 'present'})`
      : `${b.kind}: not built${b.tag === DEFAULT_BASE_IMAGE ? '' : ' (optional)'}`;
  // Only the default base is needed; the others are for projects that choose them.
  const optionalMissing = bases.filter((b) => !b.present && b.tag !== DEFAULT_BASE_IMAGE);
  checks.push({
    name: 'base-images',
    ok: defaultBase?.present === true,
    detail: bases.map(describe).join('; '),
    ...(defaultBase?.present
      ? optionalMissing.length > 0
        ? {
            warning: true as const,
            fix: `only needed for projects on that base (sandbox.baseImage: ${optionalMissing.map((b) => b.tag).join(', ')}): ${optionalMissing
              .map((b) => (fleet ? fleet.prepareHint : `sandbox-harness images ensure ${b.kind}`))
              .join('; ')}`,
          }
        : {}
      : {
          fix:
            fleet?.prepareHint ??
            `sandbox-harness images ensure node (pulls ${BASE_IMAGES.node.registryImage}, or bootstraps offline)`,
        }),
  });
  // The offline bootstrap runs on this machine; an engine of a fleet gets its base image shipped.
  if (fleet) return report();

  const mmdebstrap = await findOnPath('mmdebstrap');
  const needed = !defaultBase?.present;
  checks.push({
    name: 'offline-bootstrap',
    ok: mmdebstrap !== undefined || !needed,
    detail: mmdebstrap
      ? `mmdebstrap at ${mmdebstrap}: base images can be made without a registry`
      : 'mmdebstrap not installed: base images can only come from a registry',
    ...(mmdebstrap === undefined
      ? {
          ...(needed ? {} : { warning: true as const }),
          fix: (await isDebianRoot())
            ? 'apt-get install -y mmdebstrap'
            : 'sudo apt-get install -y mmdebstrap',
        }
      : {}),
  });

  return report();
}
