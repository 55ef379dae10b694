/**
 * Whether a sandbox resolves names the way the harness wrote them: its /etc/hosts and
 * /etc/resolv.conf as placed before the start (loopback-names.ts), not the engine's own. An
 * engine may put a file of its own over them at the start: rootful Podman builds the hosts
 * file from the host's /etc/hosts by default (`base_hosts_file`), so the host's own entries
 * (names and addresses of its network) are readable in every sandbox. Nothing there is
 * reachable without a network, but nothing of the host's resolver settings belongs in a
 * sandbox, so `doctor` says so and how to turn it off.
 */
import { hostsFile, resolvConf, SANDBOX_HOSTNAME } from '../../container/loopback-names.js';
import type { DoctorCheck } from '../../types.js';

/** Printed by the doctor's probe after its own output: the two files, each after its marker. */
export const NAMES_PROBE_SCRIPT = 'echo @@hosts; cat /etc/hosts; echo @@resolv; cat /etc/resolv.conf';

/** The probe's output before the files, and the files as the sandbox saw them. */
export function splitNamesProbe(output: string): { before: string; hosts?: string; resolv?: string } {
  const at = output.indexOf('@@hosts\n');
  if (at < 0) return { before: output };
  const rest = output.slice(at + '@@hosts\n'.length);
  const split = rest.indexOf('@@resolv\n');
  return split < 0
    ? { before: output.slice(0, at), hosts: rest }
    : {
        before: output.slice(0, at),
        hosts: rest.slice(0, split),
        resolv: rest.slice(split + '@@resolv\n'.length),
      };
}

/**
 * Entries of a hosts file that tell nothing of the host: the container's own name (this
 * tool's containers are all `sandbox-harness-...`) and the engine's name for the host on a
 * network the sandbox does not have (Podman writes it with a documentation address).
 */
const HARMLESS_NAME = /^(?:sandbox-harness-[a-z0-9_.-]+|host\.containers\.internal|host\.docker\.internal)$/i;

/** `address name` pairs of a hosts file (comments and blank lines aside). */
function hostPairs(text: string): string[] {
  const pairs: string[] = [];
  for (const line of text.split('\n')) {
    const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
    if (!address) continue;
    for (const name of names) pairs.push(`${address} ${name}`);
  }
  return pairs;
}

/** Entries of the sandbox's hosts file the harness did not write, the harmless ones aside. */
function foreignHosts(seen: string, hostname: string): string[] {
  const ours = new Set(hostPairs(hostsFile(hostname)));
  return [...new Set(hostPairs(seen))].filter(
    (pair) => !ours.has(pair) && !HARMLESS_NAME.test(pair.split(' ')[1] ?? ''),
  );
}

/** Lines of the sandbox's resolv.conf the harness did not write (comments and blank lines aside). */
function foreignResolv(seen: string): string[] {
  const ours = new Set(
    resolvConf()
      .split('\n')
      .map((l) => l.trim()),
  );
  return seen
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#') && !ours.has(l));
}

/** The check from what a probe sandbox saw (`hostname`: the name it was given). */
export function namesCheck(
  seen: { hosts?: string | undefined; resolv?: string | undefined },
  product: 'Docker' | 'Podman',
  hostname = SANDBOX_HOSTNAME,
): DoctorCheck {
  if (seen.hosts === undefined || seen.resolv === undefined) {
    return {
      name: 'sandbox-names',
      ok: true,
      warning: true,
      detail: "not read: the probe did not print the sandbox's /etc/hosts and /etc/resolv.conf",
    };
  }
  const hosts = foreignHosts(seen.hosts, hostname);
  const resolv = foreignResolv(seen.resolv);
  if (hosts.length === 0 && resolv.length === 0) {
    return {
      name: 'sandbox-names',
      ok: true,
      detail: "/etc/hosts and /etc/resolv.conf in a sandbox are the harness's: loopback names only",
    };
  }
  const found = [
    ...(hosts.length
      ? [
          `/etc/hosts has ${hosts.length} entr${hosts.length === 1 ? 'y' : 'ies'} the harness did not write (${hosts.slice(0, 3).join('; ')})`,
        ]
      : []),
    ...(resolv.length ? [`/etc/resolv.conf has ${resolv.length} (${resolv.slice(0, 3).join('; ')})`] : []),
  ];
  return {
    name: 'sandbox-names',
    ok: false,
    detail: `${product} puts resolver files of its own into sandboxes: ${found.join('; ')}`,
    fix:
      product === 'Podman'
        ? 'Podman takes the host\'s /etc/hosts as the base of every container\'s: start its service with a containers.conf that says `[containers]` `base_hosts_file = "image"` (README "Stronger isolation" shows the command).'
        : "Configure the engine not to write containers' /etc/hosts or /etc/resolv.conf from the host's.",
  };
}
