/**
 * `setup --runtime runsc`: gVisor on the local engine, on Debian as root. Installs the `runsc`
 * package when missing, registers it in /etc/docker/daemon.json (merged: everything the file
 * says stays), reloads dockerd with SIGHUP (a reload: running containers keep running; never
 * a restart), and checks that the engine lists it and that a hardened sandbox runs under it.
 * Idempotent: with runsc registered it changes nothing and only verifies.
 */
import { execFile } from 'node:child_process';
import { access, readFile, rename, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { ConfigError, SandboxUnavailable } from '../../../errors.js';
import { isDebianRoot } from '../host-tools.js';
import type { DockerEngine } from '../engine/index.js';
import { GVISOR_HOWTO } from '../runtimes.js';
import { probeRuntime, type RuntimeProbe } from './runtime-probe.js';

const run = promisify(execFile);

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

export interface GvisorSetupOptions {
  engine: DockerEngine;
  /** An image to probe with (the base image). */
  image: string;
  daemonJson?: string;
  pidFile?: string;
  say?: (line: string) => void;
}

export interface GvisorSetupResult {
  installed: boolean;
  registered: boolean;
  reloaded: boolean;
  probe: RuntimeProbe;
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

export async function setUpGvisor(options: GvisorSetupOptions): Promise<GvisorSetupResult> {
  const say = options.say ?? (() => undefined);
  const daemonJson = options.daemonJson ?? '/etc/docker/daemon.json';
  const pidFile = options.pidFile ?? '/var/run/docker.pid';
  if (!options.engine.isLocal()) {
    throw new ConfigError('setup --runtime runsc sets up the local engine only', [], {
      hint: `On the engine's own machine: ${GVISOR_HOWTO}`,
    });
  }
  let installed = false;
  if (!(await exists(RUNSC_ENTRY.path))) {
    if (!(await isDebianRoot())) {
      throw new ConfigError(`${RUNSC_ENTRY.path} is missing and this is not Debian as root`, [], {
        hint: GVISOR_HOWTO,
      });
    }
    say('apt-get install -y runsc');
    await run('apt-get', ['install', '-y', '--no-install-recommends', 'runsc'], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    }).catch(async () => {
      await run('apt-get', ['update', '-q']);
      await run('apt-get', ['install', '-y', '--no-install-recommends', 'runsc'], {
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      });
    });
    installed = true;
  }
  const before = await readFile(daemonJson, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  const merged = mergeDaemonRuntime(before, 'runsc', RUNSC_ENTRY);
  let reloaded = false;
  const listed = async () => (await options.engine.info()).runtimes.includes('runsc');
  if (merged.changed) {
    say(`registering runsc in ${daemonJson}`);
    const temp = `${daemonJson}.sandbox-harness-${process.pid}`;
    await writeFile(temp, merged.text, { mode: 0o644 });
    await rename(temp, daemonJson);
  }
  if (merged.changed || !(await listed())) {
    const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
    const comm = pid > 0 ? (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() : '';
    if (comm !== 'dockerd') {
      throw new SandboxUnavailable(`no dockerd to reload (${pidFile} names ${pid || 'nothing'})`, {
        hint: `Reload the engine yourself (kill -HUP <dockerd pid>, or systemctl reload docker); ${daemonJson} already names runsc.`,
      });
    }
    say(`reloading dockerd (pid ${pid}) with SIGHUP; running containers keep running`);
    process.kill(pid, 'SIGHUP');
    reloaded = true;
    const deadline = Date.now() + 15_000;
    while (!(await listed())) {
      if (Date.now() > deadline)
        throw new SandboxUnavailable(`dockerd did not list runsc within 15 s of the reload`, {
          hint: `Check ${daemonJson} and the engine's log.`,
        });
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const info = await options.engine.info();
  const probe = await probeRuntime(options.engine, info, options.image, 'runsc');
  if (!probe.holdsBaseline) {
    throw new SandboxUnavailable(
      `runsc is registered, but a hardened sandbox under it failed: ${probe.notes.join('; ')}`,
      {
        hint: `Check that ${daemonJson} gives runsc "--network=none" and read the engine's log.`,
      },
    );
  }
  return { installed, registered: merged.changed, reloaded, probe };
}
