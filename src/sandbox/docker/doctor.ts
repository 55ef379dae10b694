/**
 * Is the Docker engine fit to run sandboxes? Each check says what it found and, when
 * something is wrong, the command that fixes it. `fatal` problems make the engine unusable.
 */
import { randomBytes } from 'node:crypto';
import { HarnessError, errorMessage } from '../../errors.js';
import { DEFAULT_RESOURCES, SANDBOX_GID, SANDBOX_UID, WORKSPACE } from '../types.js';
import { findOnPath, isDebianRoot } from './bootstrap.js';
import { dockerEngine, type DockerEngine, type EngineInfo } from './engine.js';
import { BASE_IMAGES, baseImageStatus, DEFAULT_BASE_IMAGE } from './images.js';
import { containerLabels } from './labels.js';

export interface DoctorCheck {
  /** Stable identifier: `daemon`, `server-version`, `storage-driver`, `cgroups`, `kernel-limits`, `sandbox-container`, `base-images`, `offline-bootstrap`. */
  name: string;
  ok: boolean;
  /** What was found, one line. */
  detail: string;
  /** The command (or step) that fixes it; only when `ok` is false. */
  fix?: string;
  /** True when this problem alone makes sandboxes impossible. */
  fatal?: boolean;
}

export interface DoctorReport {
  /** Every check passed. */
  ok: boolean;
  /** Sandboxes can run (no fatal problem). */
  usable: boolean;
  /** Where the daemon was looked for: DOCKER_HOST, else the default socket. */
  endpoint: string;
  checks: DoctorCheck[];
}

export interface DoctorOptions {
  engine?: DockerEngine;
  /** How long the test container may take to start and run `true`. */
  containerTimeoutMs?: number;
}

/** Oldest Engine API the harness supports: Docker 20.10. */
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
  if (process.env.DOCKER_HOST) {
    return `Nothing answers at DOCKER_HOST=${process.env.DOCKER_HOST}: start that engine, or \`unset DOCKER_HOST\` to use the local socket.`;
  }
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
  const found = `Docker ${info.serverVersion || 'unknown'} (API ${info.apiVersion || 'unknown'}) on ${info.operatingSystem || 'unknown OS'}`;
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

async function containerCheck(engine: DockerEngine, image: string, timeoutMs: number): Promise<DoctorCheck> {
  const started = Date.now();
  let id: string | undefined;
  try {
    id = await engine.createContainer({
      name: `sandbox-harness-doctor-${randomBytes(4).toString('hex')}`,
      image,
      entrypoint: ['true'],
      cmd: [],
      user: `${SANDBOX_UID}:${SANDBOX_GID}`,
      workingDir: WORKSPACE,
      env: ['LANG=C.UTF-8'],
      labels: containerLabels({ runId: 'doctor', role: 'doctor' }),
      memoryBytes: DEFAULT_RESOURCES.memoryBytes,
      nanoCpus: Math.round(DEFAULT_RESOURCES.cpus * 1e9),
      pids: DEFAULT_RESOURCES.pids,
      maxFileBytes: DEFAULT_RESOURCES.maxFileBytes,
      tmpfsBytes: DEFAULT_RESOURCES.tmpfsBytes,
      nofile: 1024,
    });
    await engine.startContainer(id);
    for (;;) {
      const state = await engine.inspectContainer(id);
      if (!state) throw new Error('the container vanished while it ran');
      if (!state.running && state.status !== 'created') {
        const network = String(state.hostConfig.NetworkMode ?? '');
        if (state.exitCode !== 0) throw new Error(`\`true\` exited with ${state.exitCode} (${state.status})`);
        if (network !== 'none') throw new Error(`the container got network mode "${network}", not "none"`);
        break;
      }
      if (Date.now() - started > timeoutMs)
        throw new Error(`the container did not finish within ${timeoutMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return {
      name: 'sandbox-container',
      ok: true,
      detail: `a hardened --network none container of ${image} started and ran \`true\` in ${Date.now() - started} ms`,
    };
  } catch (error) {
    return {
      name: 'sandbox-container',
      ok: false,
      fatal: true,
      detail: `a hardened --network none container of ${image} failed: ${errorMessage(error).split('\n')[0]}`,
      fix:
        error instanceof HarnessError && error.hint
          ? error.hint
          : 'Read the engine log (`/var/log/sandbox-harness-dockerd.log` when `sandbox-harness setup` started it); the engine must support --init, cap-drop, pids and memory limits.',
    };
  } finally {
    if (id) await engine.removeContainer(id).catch(() => undefined);
  }
}

export async function runDoctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  const engine = options.engine ?? dockerEngine();
  const endpoint = dockerEndpoint();
  const checks: DoctorCheck[] = [];
  const report = (): DoctorReport => ({
    ok: checks.every((c) => c.ok),
    usable: !checks.some((c) => !c.ok && c.fatal),
    endpoint,
    checks,
  });

  try {
    await engine.ping(5000);
    checks.push({ name: 'daemon', ok: true, detail: `answers at ${endpoint}` });
  } catch (error) {
    checks.push({
      name: 'daemon',
      ok: false,
      fatal: true,
      detail: `no answer at ${endpoint}: ${errorMessage(error)}`,
      fix: await daemonFix(error),
    });
    return report();
  }

  try {
    checks.push(...versionChecks(await engine.info()));
  } catch (error) {
    checks.push({
      name: 'server-version',
      ok: false,
      fatal: true,
      detail: errorMessage(error),
      fix: await daemonFix(error),
    });
    return report();
  }

  const bases = await baseImageStatus(engine);
  const present = bases.filter((b) => b.present);
  const defaultBase = bases.find((b) => b.tag === DEFAULT_BASE_IMAGE);
  const probeImage = defaultBase?.present ? defaultBase.tag : present[0]?.tag;
  if (probeImage) {
    checks.push(await containerCheck(engine, probeImage, options.containerTimeoutMs ?? 30_000));
  } else {
    checks.push({
      name: 'sandbox-container',
      ok: false,
      detail: 'not tried: there is no base image to start a container from',
      fix: 'sandbox-harness images ensure node',
    });
  }

  const describe = (b: (typeof bases)[number]) =>
    b.present ? `${b.kind}: ${b.tag} (${b.origin ?? 'present'})` : `${b.kind}: missing`;
  checks.push({
    name: 'base-images',
    ok: defaultBase?.present === true,
    detail: bases.map(describe).join('; '),
    ...(defaultBase?.present
      ? {}
      : {
          fix: `sandbox-harness images ensure node (pulls ${BASE_IMAGES.node.registryImage}, or bootstraps offline)`,
        }),
  });

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
          fix: (await isDebianRoot())
            ? 'apt-get install -y mmdebstrap'
            : 'sudo apt-get install -y mmdebstrap',
        }
      : {}),
  });

  return report();
}
