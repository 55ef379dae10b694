/**
 * OCI runtimes of a Docker-API engine (runc, gVisor's runsc, crun, ...). A runtime is a field
 * of the sandbox spec, not another backend: every one of them speaks the same Engine API, so
 * the Docker backend validates the name against what the engine lists and passes it on.
 * What differs between runtimes (another kernel, another /proc) is detected by probes, not
 * assumed from the name.
 */
import { ConfigError } from '../../errors.js';
import { runtimeNameProblem } from '../../object-names.js';
import type { DockerEngine, EngineInfo } from './engine/index.js';

/** The name runc has on every Docker engine; the default when neither catalog nor flag names one. */
export const DEFAULT_RUNTIME = 'runc';

/** What `doctor` and a refusal say about adding gVisor on Debian. */
export const GVISOR_HOWTO = [
  'apt-get install -y runsc',
  `merge {"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]}}} into /etc/docker/daemon.json`,
  'kill -HUP "$(cat /var/run/docker.pid)"   # a reload: running containers keep running',
].join('; ');

export const GVISOR_SETUP = 'sandbox-harness setup --runtime runsc';

/** A runtime name as an engine spells it: what `docker run --runtime` takes. */
export function validRuntimeName(name: string): boolean {
  return runtimeNameProblem(name) === undefined;
}

/** The runtime a sandbox gets: the one asked for, else the engine's default (runc on Docker). */
export function effectiveRuntime(info: Pick<EngineInfo, 'defaultRuntime'>, asked?: string): string {
  return asked ?? (info.defaultRuntime || DEFAULT_RUNTIME);
}

/**
 * Refuses a runtime the engine does not list, before anything is built: a configuration error
 * (exit 2) that names the engine, what it lists, and how to add gVisor.
 */
export async function requireRuntime(engine: DockerEngine, runtime: string): Promise<EngineInfo> {
  if (!validRuntimeName(runtime)) {
    throw new ConfigError(`runtime ${JSON.stringify(runtime)} is not a runtime name`, [], {
      hint: 'A runtime is a name the engine lists in `docker info` (Runtimes), such as runc or runsc.',
    });
  }
  const info = await engine.recentInfo();
  const where = engine.where ?? 'the local engine';
  // Podman's Docker API takes no runtime per container (it ignores HostConfig.Runtime): every
  // container runs under the service's, so only that one can be honoured.
  if (info.product === 'podman' && runtime !== info.defaultRuntime) {
    throw new ConfigError(
      `runtime "${runtime}" cannot be chosen per sandbox on the Podman service at ${where}: its Docker API runs every container under the service's runtime, ${info.defaultRuntime || 'unknown'}`,
      [],
      {
        hint: `Start the service with that runtime: \`podman --runtime ${runtime} system service --time=0 unix:///run/podman/podman.sock\`, or leave the runtime unset.`,
        details: { runtime, available: [info.defaultRuntime] },
      },
    );
  }
  if (info.runtimes.includes(runtime)) return info;
  throw new ConfigError(
    `runtime "${runtime}" is not available on ${where}: it lists ${info.runtimes.length > 0 ? info.runtimes.join(', ') : 'no runtimes'}`,
    [],
    {
      hint:
        runtime === 'runsc'
          ? `Add gVisor: \`${GVISOR_SETUP}\` (Debian, root), or by hand: ${GVISOR_HOWTO}. \`sandbox-harness doctor\` lists the engine's runtimes.`
          : `Register it in the engine's daemon.json ("runtimes") and reload the engine, or use one it lists. \`sandbox-harness doctor\` lists them.`,
      details: { runtime, available: info.runtimes },
    },
  );
}

/** Whether `runtime` (or the engine's default) is gVisor, by the program the engine runs for it. */
export function isGvisor(
  info: Pick<EngineInfo, 'defaultRuntime' | 'runtimePaths'>,
  runtime?: string,
): boolean {
  const name = effectiveRuntime(info, runtime);
  const program = info.runtimePaths[name] ?? name;
  return /(^|\/)runsc$/.test(program);
}

/**
 * Host tasks gVisor needs for itself and per process of the sandbox, measured here (runsc
 * 2022-12, ptrace platform): 54 tasks idle, about 8 more per process that stays (each address
 * space has a stub process and its threads), up to 50 per process at the peak of ten running
 * at once (stubs are pooled, not given back); threads of one process nearly free. A fork bomb
 * grows them without bound (forks that fail leak stubs), so under gVisor a fork bomb ends the
 * sandbox once its cgroup is full: contained, as the pids cgroup contains it under runc.
 */
export const GVISOR_HOST_TASKS = { base: 256, perProcess: 16 } as const;

/**
 * The process limits of a sandbox that may run `pids` tasks. Under runc the pids cgroup is the
 * bound. Under gVisor the cgroup holds gVisor's own kernel too, and a sentry that cannot make
 * a thread panics and takes the sandbox with it: so its cgroup gets room for the sentry
 * (`GVISOR_HOST_TASKS`), and the sandbox's own tasks are bounded by RLIMIT_NPROC, which
 * gVisor's kernel enforces per sandbox (its users are its own), failing fork with EAGAIN as
 * the pids cgroup does under runc.
 */
export function processLimits(pids: number, gvisor: boolean): { pids: number; nproc?: number } {
  if (!gvisor) return { pids };
  return { pids: pids * GVISOR_HOST_TASKS.perProcess + GVISOR_HOST_TASKS.base, nproc: pids };
}
