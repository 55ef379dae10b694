/**
 * The names a sandbox resolves with no network at all: `localhost` (IPv4 and IPv6), the
 * usual Debian loopback aliases and the sandbox's own host name, all to loopback.
 *
 * Why the harness writes them itself: a container created with `NetworkDisabled` (which
 * every sandbox is: no network stack set up by the engine at all) gets no hosts file from
 * the engine, only the empty placeholder of the container's init layer, so `localhost`
 * went to DNS and failed (`getaddrinfo EAI_AGAIN localhost`: vitest < 4, vite, any test
 * server or database client on localhost). The engine's own hosts handling would need its
 * network sandbox (`NetworkMode: none` without `NetworkDisabled`), which also switches IPv6
 * off on lo, so `::1` could not be bound. Written into the container's filesystem before it
 * starts, through the engine API, the files hold for every runtime that runs the container's
 * root filesystem (runc, runsc) and need nothing the runtime does.
 *
 * Root-owned, mode 0644, in the root-owned /etc: the sandbox user cannot change them.
 */
import type { TarInput } from '../tar.js';

/** Every sandbox's host name: the same in every sandbox, so test output does not vary with it. */
export const SANDBOX_HOSTNAME = 'sandbox';

export function hostsFile(hostname = SANDBOX_HOSTNAME): string {
  return [
    '# Written by sandbox-harness: this sandbox has no network; these names are its loopback.',
    '127.0.0.1\tlocalhost',
    '::1\tlocalhost ip6-localhost ip6-loopback',
    `127.0.0.1\t${hostname}`,
    `::1\t${hostname}`,
    '',
  ].join('\n');
}

/** A container's name resolution: its name servers, search domains and resolver options. */
export interface Resolver {
  nameServers: string[];
  search: string[];
  options: string[];
}

/**
 * No name server the sandbox could reach: a name not in the hosts file fails at once
 * (connection refused on its own loopback, where the unprivileged sandbox user cannot bind
 * port 53) instead of waiting for a server, and nothing of the host's resolver settings
 * (its servers, its search domains) enters the sandbox.
 */
export const LOOPBACK_RESOLVER: Resolver = {
  nameServers: ['127.0.0.1'],
  search: [],
  options: ['timeout:1', 'attempts:1'],
};

export function resolvConf(resolver: Resolver = LOOPBACK_RESOLVER): string {
  return [
    '# Written by sandbox-harness: this sandbox has no network; only /etc/hosts resolves.',
    ...resolver.nameServers.map((server) => `nameserver ${server}`),
    ...(resolver.search.length > 0 ? [`search ${resolver.search.join(' ')}`] : []),
    ...(resolver.options.length > 0 ? [`options ${resolver.options.join(' ')}`] : []),
    '',
  ].join('\n');
}

/** The hosts file and the resolver configuration, as entries of a tar unpacked at `/`. */
export function loopbackNameEntries(hostname = SANDBOX_HOSTNAME): TarInput[] {
  return [
    {
      name: 'etc/hosts',
      type: 'file',
      content: Buffer.from(hostsFile(hostname)),
      mode: 0o644,
      owner: 'root',
    },
    { name: 'etc/resolv.conf', type: 'file', content: Buffer.from(resolvConf()), mode: 0o644, owner: 'root' },
  ];
}

/**
 * The same names as host mappings the engine adds to a hosts file it manages itself: Podman
 * mounts its own `/etc/hosts` over the container's (IPv4 only), and Docker does for a sandbox
 * with egress; without them `::1` and the aliases would not resolve there. Docker writes no
 * hosts file for a network-disabled container, so there these change nothing.
 */
export function loopbackExtraHosts(hostname = SANDBOX_HOSTNAME): string[] {
  return [
    'localhost:::1',
    'ip6-localhost:::1',
    'ip6-loopback:::1',
    `${hostname}:127.0.0.1`,
    `${hostname}:::1`,
  ];
}
