/**
 * Rootful Podman's Docker-compatible API service for tests, on its own socket. Tests never
 * skip: when Podman is missing they fail with the command that fixes it. A service this
 * helper started is stopped by `stopPodman`; one that was already answering (scripts/setup.sh
 * starts one for CI) is left alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { access, mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { DockerEngine, dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { shipImages } from '../../src/sandbox/docker/images/image-shipping.js';

export const PODMAN_SOCKET = process.env.SANDBOX_HARNESS_PODMAN_SOCKET ?? '/run/podman/podman.sock';
const LOG = '/var/log/sandbox-harness-podman.log';
/** The service's own containers.conf (the one scripts/setup.sh writes). */
const PODMAN_CONF = '/etc/sandbox-harness/podman-containers.conf';

let started: ChildProcess | undefined;

async function answers(engine: DockerEngine): Promise<boolean> {
  return engine.ping(2000).then(
    () => true,
    () => false,
  );
}

/** The Podman service's engine, started when nothing answers on its socket. */
export async function podmanEngine(): Promise<DockerEngine> {
  const engine = new DockerEngine({ transport: 'unix', socketPath: PODMAN_SOCKET });
  if (await answers(engine)) return engine;
  const podman = await access('/usr/bin/podman').then(
    () => '/usr/bin/podman',
    () => undefined,
  );
  if (!podman || process.getuid?.() !== 0) {
    throw new Error(
      `no Podman API service answers at unix://${PODMAN_SOCKET}: run scripts/setup.sh as root (it installs podman and starts \`podman system service --time=0 unix://${PODMAN_SOCKET}\`)`,
    );
  }
  await mkdir('/run/podman', { recursive: true });
  // As scripts/setup.sh starts it: containers' /etc/hosts not made from the host's.
  await mkdir(dirname(PODMAN_CONF), { recursive: true });
  await writeFile(PODMAN_CONF, '[containers]\nbase_hosts_file = "image"\n');
  const log = openSync(LOG, 'a');
  // runc: Podman's default here, crun 1.8, refuses this host's hybrid cgroup set-up.
  started = spawn(podman, ['--runtime', 'runc', 'system', 'service', '--time=0', `unix://${PODMAN_SOCKET}`], {
    detached: true,
    stdio: ['ignore', log, log],
    env: { ...process.env, CONTAINERS_CONF: PODMAN_CONF },
  });
  closeSync(log);
  started.unref();
  const deadline = Date.now() + 30_000;
  while (!(await answers(engine))) {
    if (Date.now() > deadline)
      throw new Error(`podman system service did not answer within 30 s (log: ${LOG})`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return engine;
}

/** Stops the service if this process started it. */
export function stopPodman(): void {
  if (started?.pid) {
    try {
      process.kill(started.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  started = undefined;
}

/**
 * Makes `refs` present in Podman's store by the fleet's save/load stream from the local
 * engine (Podman's build would need the base image anyway, and ships the same bytes).
 */
export async function shipToPodman(engine: DockerEngine, refs: string[]): Promise<void> {
  const missing: string[] = [];
  for (const ref of refs) {
    const [here, there] = await Promise.all([dockerEngine().images.inspect(ref), engine.images.inspect(ref)]);
    if (!here) throw new Error(`${ref} is not on the local engine`);
    if (there?.id !== here.id) missing.push(ref);
  }
  if (missing.length > 0) await shipImages(dockerEngine(), engine, missing);
}
