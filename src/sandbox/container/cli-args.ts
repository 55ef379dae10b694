/**
 * The neutral container spec as a container CLI's flags: the arguments after `docker create`
 * or `podman create` (or `run -d`), image and command included, for a backend that starts
 * sandboxes with a node's own engine CLI. The only file in src/ that writes these flags
 * (tests/unit/structure.test.ts); a test reads them back into the spec and finds every field.
 *
 * Two things the Docker API says that a CLI cannot, said here in the CLI's own words:
 * - no network stack at all (`NetworkDisabled`): `--network none` gets the engine's network
 *   sandbox instead, which turns IPv6 off on lo and writes its own hosts and resolver files
 *   over the image's. So IPv6 stays on for lo (`--sysctl`), the loopback names come from
 *   `--add-host`, and the resolver from `--dns`/`--dns-option`/`--dns-search .` (no search
 *   domains of the host's), which is what the API backend writes into those files itself.
 * - files placed before the start: not flags. The caller copies `spec.files` into the created
 *   container (`docker cp`) before it starts it.
 * Variables are flags too (`--env NAME=value`), so they are in the engine process's argument
 * list on that node; a caller that must keep them from other users there writes them to an
 * env file instead.
 */
import type { ContainerSpec } from './container-spec.js';

/** What keeps IPv6 on for lo under `--network none`, as it is with no network stack at all. */
export const LOOPBACK_IPV6_SYSCTL = 'net.ipv6.conf.lo.disable_ipv6=0';

export function containerCliArgs(spec: ContainerSpec): string[] {
  const { hardening, network } = spec;
  const args: string[] = [];
  const flag = (name: string, ...values: (string | number)[]) => {
    for (const value of values) args.push(name, String(value));
  };
  if (spec.name !== undefined) flag('--name', spec.name);
  flag('--hostname', spec.hostname);
  flag('--user', spec.user);
  flag('--workdir', spec.workingDir);
  flag('--env', ...spec.env);
  flag('--label', ...Object.entries(spec.labels).map(([k, v]) => `${k}=${v}`));
  flag('--network', network.mode === 'none' ? 'none' : network.name);
  if (network.mode === 'none') flag('--sysctl', LOOPBACK_IPV6_SYSCTL);
  flag('--dns', ...network.resolver.nameServers);
  flag('--dns-option', ...network.resolver.options);
  // With no network the host's search domains must not come along: `.` means none.
  if (network.mode === 'none' && network.resolver.search.length === 0) flag('--dns-search', '.');
  flag('--dns-search', ...network.resolver.search);
  flag('--add-host', ...spec.extraHosts);
  flag('--cap-drop', ...hardening.capDrop);
  if (hardening.noNewPrivileges) flag('--security-opt', 'no-new-privileges');
  if (hardening.privileged) args.push('--privileged');
  if (hardening.init) args.push('--init');
  flag('--ipc', hardening.ipc);
  flag('--pids-limit', spec.pids);
  flag('--memory', spec.memoryBytes);
  flag('--memory-swap', hardening.noSwap ? spec.memoryBytes : -1);
  flag('--cpus', cpus(spec.nanoCpus));
  flag(
    '--tmpfs',
    ...spec.tmpfs.map(
      (t) => `${t.path}:${[...t.flags, `size=${t.sizeBytes}`, `mode=${t.mode.toString(8)}`].join(',')}`,
    ),
  );
  flag('--ulimit', `nofile=${spec.ulimits.nofile}:${spec.ulimits.nofile}`);
  flag('--ulimit', `fsize=${spec.ulimits.fsize}:${spec.ulimits.fsize}`);
  flag('--ulimit', `nproc=${spec.ulimits.nproc}:${spec.ulimits.nproc}`);
  // No --volume, --mount or --publish: the spec has none (`hardening.mounts`, `publishPorts`).
  if (hardening.autoRemove) args.push('--rm');
  flag('--restart', hardening.restart);
  flag('--log-driver', hardening.logDriver);
  if (hardening.healthcheck === 'none') args.push('--no-healthcheck');
  if (spec.diskBytes) flag('--storage-opt', `size=${spec.diskBytes}`);
  if (spec.runtime) flag('--runtime', spec.runtime);
  flag('--entrypoint', spec.entrypoint[0]);
  // The image is a name the reference grammar accepted: it cannot start with `-`.
  args.push(spec.image, ...spec.cmd);
  return args;
}

/** `--cpus` of a NanoCpus value, exactly: 1500000000 -> `1.5`, 100000000 -> `0.1`. */
function cpus(nanoCpus: number): string {
  const whole = Math.floor(nanoCpus / 1e9);
  const fraction = String(nanoCpus % 1e9)
    .padStart(9, '0')
    .replace(/0+$/, '');
  return fraction === '' ? String(whole) : `${whole}.${fraction}`;
}
