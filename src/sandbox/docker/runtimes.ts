/**
 * OCI runtimes of a Docker-API engine (runc, gVisor's runsc, crun, ...). A runtime is a field
 * of the sandbox spec, not another backend: every one of them speaks the same Engine API, so
 * the Docker backend validates the name against what the engine lists and passes it on.
 * What differs between runtimes (another kernel, another /proc) is detected by probes, not
 * assumed from the name.
 */
import { ConfigError } from '../../errors.js';
import type { DockerEngine, EngineInfo } from './engine.js';

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
  return /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/.test(name);
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
  const info = await engine.info();
  if (info.runtimes.includes(runtime)) return info;
  const where = engine.where ?? 'the local engine';
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

export interface RuntimeEntry {
  path: string;
  runtimeArgs?: string[];
}

/** runsc for sandboxes: `--network=none` or a network-none container fails to start. */
export const RUNSC_ENTRY: RuntimeEntry = { path: '/usr/bin/runsc', runtimeArgs: ['--network=none'] };

/**
 * daemon.json with `name` registered, keeping everything else it says; `changed: false` when
 * it already had exactly that entry. A file that is not a JSON object is refused, never
 * overwritten: it is the engine's configuration, and someone else's.
 */
export function mergeDaemonRuntime(
  text: string | undefined,
  name: string,
  entry: RuntimeEntry,
): { text: string; changed: boolean } {
  let config: Record<string, unknown> = {};
  if (text !== undefined && text.trim() !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new ConfigError(`daemon.json is not valid JSON (${(error as Error).message}); not changed`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new ConfigError('daemon.json is not a JSON object; not changed');
    }
    config = parsed as Record<string, unknown>;
  }
  const runtimes = config.runtimes ?? {};
  if (typeof runtimes !== 'object' || runtimes === null || Array.isArray(runtimes)) {
    throw new ConfigError('daemon.json has a "runtimes" that is not an object; not changed');
  }
  const existing = (runtimes as Record<string, unknown>)[name];
  if (JSON.stringify(existing) === JSON.stringify(entry)) return { text: text ?? '', changed: false };
  const merged = { ...config, runtimes: { ...(runtimes as Record<string, unknown>), [name]: entry } };
  return { text: `${JSON.stringify(merged, null, 2)}\n`, changed: true };
}
