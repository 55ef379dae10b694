/**
 * `doctor`'s checks of what stands between a sandbox and the host: each OCI runtime the
 * engine lists (probed with a hardened sandbox, not judged by its name), user namespaces,
 * and, for Podman, whether its limits can hold at all.
 */
import { randomBytes } from 'node:crypto';
import { errorMessage } from '../../errors.js';
import { formatDuration } from '../../format.js';
import { BoundedBuffer } from '../posix/sinks.js';
import { DEFAULT_RESOURCES, SANDBOX_GID, SANDBOX_UID, WORKSPACE } from '../types.js';
import type { DoctorCheck } from './doctor.js';
import type { DockerEngine, EngineInfo } from './engine.js';
import { containerLabels } from './labels.js';
import {
  GVISOR_HOWTO,
  GVISOR_SETUP,
  isGvisor,
  processLimits,
  readRuntimeProbe,
  RUNTIME_PROBE_SCRIPT,
  type RuntimeProbe,
} from './runtimes.js';

/** One hardened probe sandbox under `runtime`; what it saw inside. */
export async function probeRuntime(
  engine: DockerEngine,
  info: EngineInfo,
  image: string,
  runtime: string,
  timeoutMs = 30_000,
): Promise<RuntimeProbe> {
  let id: string | undefined;
  const started = Date.now();
  try {
    const processes = processLimits(DEFAULT_RESOURCES.pids, isGvisor(info, runtime));
    id = await engine.createContainer({
      name: `sandbox-harness-doctor-${randomBytes(4).toString('hex')}`,
      image,
      entrypoint: ['sleep'],
      cmd: ['60'],
      user: `${SANDBOX_UID}:${SANDBOX_GID}`,
      workingDir: WORKSPACE,
      env: ['LANG=C.UTF-8'],
      labels: containerLabels({ runId: 'doctor', role: 'doctor-runtime', runtime }),
      memoryBytes: 256 * 1024 * 1024,
      nanoCpus: 1e9,
      pids: processes.pids,
      ...(processes.nproc ? { nproc: processes.nproc } : {}),
      maxFileBytes: 1024 * 1024,
      tmpfsBytes: 1024 * 1024,
      nofile: 1024,
      // Podman takes no runtime per container: its probe is of the service's own.
      ...(info.product === 'docker' ? { runtime } : {}),
    });
    await engine.startContainer(id);
    const out = new BoundedBuffer(4096);
    const running = await engine.startExec(id, {
      cmd: ['sh', '-c', RUNTIME_PROBE_SCRIPT],
      user: `${SANDBOX_UID}:${SANDBOX_GID}`,
      workingDir: WORKSPACE,
      env: [],
      stdout: out,
      stderr: new BoundedBuffer(1024),
    });
    for (;;) {
      const exec = await running.inspect();
      if (!exec.running && exec.exitCode !== null) break;
      if (Date.now() - started > timeoutMs)
        throw new Error(`the probe did not finish within ${formatDuration(timeoutMs)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await Promise.race([running.streamEnded, new Promise((r) => setTimeout(r, 1000))]);
    running.detach();
    return readRuntimeProbe(runtime, out.bytes().toString('utf8'));
  } catch (error) {
    return {
      runtime,
      holdsBaseline: false,
      notes: [`a hardened sandbox did not run: ${errorMessage(error).split('\n')[0]}`],
    };
  } finally {
    if (id) await engine.removeContainer(id).catch(() => undefined);
  }
}

function describeProbe(probe: RuntimeProbe, isDefault: boolean): string {
  const verdict = probe.holdsBaseline
    ? 'holds the hardening baseline'
    : 'does NOT hold the hardening baseline';
  const notes = probe.notes.length > 0 ? ` (${probe.notes.join('; ')})` : '';
  return `${probe.runtime}${isDefault ? ' (default)' : ''}: ${verdict}${notes}`;
}

/** The `runtimes`, `userns` and (for Podman) `podman` checks. */
export async function runtimeChecks(
  engine: DockerEngine,
  info: EngineInfo,
  image: string,
): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  // Podman can only run the service's runtime through its Docker API.
  const names = info.product === 'podman' ? [info.defaultRuntime] : info.runtimes;
  const probes: RuntimeProbe[] = [];
  for (const name of names) probes.push(await probeRuntime(engine, info, image, name));
  const defaultProbe = probes.find((p) => p.runtime === info.defaultRuntime);
  const gvisor = info.runtimes.some((name) => isGvisor(info, name));
  const hint = gvisor
    ? undefined
    : `gVisor (runsc) is not registered: \`${GVISOR_SETUP}\` (Debian, root), or by hand: ${GVISOR_HOWTO}`;
  checks.push({
    name: 'runtimes',
    ok: defaultProbe?.holdsBaseline !== false && probes.every((p) => p.holdsBaseline) && hint === undefined,
    detail:
      probes.length > 0
        ? probes.map((p) => describeProbe(p, p.runtime === info.defaultRuntime)).join('; ')
        : 'the engine lists no runtimes',
    ...(hint
      ? { fix: hint }
      : probes.some((p) => !p.holdsBaseline)
        ? {
            fix: `Do not use a runtime that does not hold the baseline (\`--runtime\`, catalog sandbox.runtime); ${info.product === 'podman' ? 'start the Podman service with another: `podman --runtime runc system service ...`' : "fix or remove it in the engine's daemon.json"}.`,
          }
        : {}),
    ...(defaultProbe && !defaultProbe.holdsBaseline ? { fatal: true } : {}),
  });
  const userns = info.securityOptions.some((o) => /(^|,)name=userns(,|$)/.test(o));
  checks.push({
    name: 'userns',
    ok: true,
    detail: userns
      ? "user namespaces on (userns-remap): a sandbox's users map to unprivileged host ids, so even a process that escaped as root inside is nobody on the host"
      : 'user namespaces off: a sandbox\'s uid 1000 is the host\'s uid 1000 (an engine with "userns-remap" is another wall: docs/isolation.md)',
  });
  if (info.product === 'podman') {
    const rootless = info.securityOptions.some((o) => /(^|,)name=rootless(,|$)/.test(o));
    const v1 = info.cgroupVersion === '1';
    checks.push({
      name: 'podman',
      ok: !(rootless && v1),
      detail: `Podman ${info.podmanVersion ?? '?'} (Docker API ${info.apiVersion}), ${rootless ? 'rootless' : 'rootful'}, cgroup v${info.cgroupVersion || '?'}${
        rootless && v1
          ? ': a rootless Podman on cgroup v1 cannot enforce memory and pids limits, so a sandbox there is not contained'
          : ''
      }`,
      ...(rootless && v1
        ? {
            fatal: true,
            fix: 'Run Podman rootful (`sudo podman system service ...`), or boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1).',
          }
        : {}),
    });
  }
  return checks;
}
