/**
 * `doctor`'s checks of what stands between a sandbox and the host: each OCI runtime the
 * engine lists (probed with a hardened sandbox, not judged by its name), user namespaces,
 * and, for Podman, whether its limits can hold at all.
 */
import type { DoctorCheck } from '../../types.js';
import type { DockerEngine, EngineInfo } from '../engine/index.js';
import { GVISOR_HOWTO, GVISOR_SETUP, isGvisor } from '../runtimes.js';
import { probeRuntime, type RuntimeProbe } from './runtime-probe.js';

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
