/**
 * The address half of the proxy's guard, asked at every connect: one spelling per address
 * (an IPv4-mapped IPv6 address is its IPv4 address), ranges that are never a destination
 * whatever the catalog names, and whether an address is this host's own *now* (interfaces
 * and addresses come and go while a proxy lives: a bridge made after start, an address
 * added, one on an interface without carrier that `os.networkInterfaces()` leaves out).
 */
import { createSocket } from 'node:dgram';
import { closeSync, openSync, readSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

export interface Address {
  address: string;
  family: 4 | 6;
}

/**
 * The one spelling of an address: IPv4 dotted; IPv6 compressed, lower case; an IPv4-mapped
 * IPv6 address (`::ffff:7f00:1`, `0:0:0:0:0:ffff:127.0.0.1`) as the IPv4 address it maps.
 * Undefined for anything else, including an IPv6 address with a zone (`fe80::1%eth0`).
 */
export function canonicalAddress(text: string): Address | undefined {
  if (isIP(text) === 4) return { address: text, family: 4 };
  if (isIP(text) !== 6 || text.includes('%')) return undefined;
  let compressed: string;
  try {
    compressed = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(compressed);
  if (!mapped) return { address: compressed, family: 6 };
  const high = parseInt(mapped[1]!, 16);
  const low = parseInt(mapped[2]!, 16);
  return { address: [high >> 8, high & 255, low >> 8, low & 255].join('.'), family: 4 };
}

/**
 * Never a destination, whatever `privateRanges` says: this host (unspecified, loopback),
 * the link (link-local, site-local), many hosts at once (multicast, broadcast, reserved),
 * and IPv6 forms that carry an IPv4 address inside (IPv4-compatible, 6to4, Teredo) or lead
 * nowhere (discard).
 */
const NEVER: Array<[string, number, 'ipv4' | 'ipv6', string]> = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified ("this host")'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved or broadcast'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['::', 96, 'ipv6', 'IPv4-compatible (deprecated)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local (deprecated)'],
  ['ff00::', 8, 'ipv6', 'multicast'],
  ['100::', 64, 'ipv6', 'discard-only'],
  ['2001::', 32, 'ipv6', 'Teredo (carries an IPv4 address)'],
  ['2002::', 16, 'ipv6', '6to4 (carries an IPv4 address)'],
];

const never = NEVER.map(([address, prefix, family, what]) => {
  const list = new BlockList();
  list.addSubnet(address, prefix, family);
  return { list, family, what, range: `${address}/${prefix}` };
});

/** Why no name may lead to this address, whatever the catalog says; undefined when none of these. */
export function neverReachable(a: Address): string | undefined {
  const family = a.family === 4 ? 'ipv4' : 'ipv6';
  // The most specific range first (::1 is also in ::/96), so the reason names the right one.
  const hit = never.find((range) => range.family === family && range.list.check(a.address, family));
  return hit
    ? `${a.address} is a ${hit.what} address (${hit.range}), never reachable through the proxy`
    : undefined;
}

/** At most this much of a /proc table is read (a router's full table is not). */
const MAX_PROC_BYTES = 4 * 1024 * 1024;

/** A small kernel table, read synchronously (procfs answers from memory, in microseconds). */
function readProc(path: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const parts: Buffer[] = [];
    let total = 0;
    const buffer = Buffer.alloc(64 * 1024);
    while (total < MAX_PROC_BYTES) {
      const n = readSync(fd, buffer, 0, buffer.length, null);
      if (n <= 0) break;
      parts.push(Buffer.from(buffer.subarray(0, n)));
      total += n;
    }
    return Buffer.concat(parts).toString('latin1');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** IPv4 ranges the kernel delivers locally (`host LOCAL` in /proc/net/fib_trie: addresses, AnyIP routes). */
export function localRangesOfFibTrie(text: string): Array<[string, number]> {
  const ranges: Array<[string, number]> = [];
  let leaf: string | undefined;
  for (const line of text.split('\n')) {
    const key = /^\s*\|-- (\d+\.\d+\.\d+\.\d+)\s*$/.exec(line);
    if (key) {
      leaf = key[1];
      continue;
    }
    const prefix = /^\s*\/(\d+) \S+ LOCAL\s*$/.exec(line);
    if (prefix && leaf) ranges.push([leaf, Number(prefix[1])]);
  }
  return ranges;
}

/** Every IPv6 address of every interface, up or down (/proc/net/if_inet6). */
export function addressesOfIfInet6(text: string): string[] {
  const addresses: string[] = [];
  for (const line of text.split('\n')) {
    const hex = /^([0-9a-f]{32})\s/.exec(line)?.[1];
    if (!hex) continue;
    const groups = hex.match(/.{4}/g)!.join(':');
    const canonical = canonicalAddress(groups);
    if (canonical) addresses.push(canonical.address);
  }
  return addresses;
}

/**
 * The kernel's own answer: a UDP socket binds to an address only if the kernel delivers it
 * locally (an address of any interface, up or not, with carrier or not; an AnyIP route; or a
 * broadcast address, never a destination either).
 */
function kernelDeliversLocally(a: Address): Promise<boolean> {
  const socket = createSocket(a.family === 4 ? 'udp4' : 'udp6');
  return new Promise<boolean>((resolve) => {
    socket.once('error', () => resolve(false));
    socket.bind({ address: a.address, port: 0, exclusive: true }, () => resolve(true));
  }).finally(() => socket.close());
}

/**
 * Where the host's address lists have this address: the interfaces Node lists, every IPv6
 * address the kernel lists (also on interfaces without carrier, which Node leaves out), every
 * IPv4 range its routing tables call local.
 */
export function listedHostAddress(a: Address): string | undefined {
  for (const [name, list] of Object.entries(networkInterfaces())) {
    for (const entry of list ?? []) {
      if (canonicalAddress(entry.address.replace(/%.*$/, ''))?.address === a.address)
        return `an address of this host (interface ${name})`;
    }
  }
  if (a.family === 6)
    return addressesOfIfInet6(readProc('/proc/net/if_inet6')).includes(a.address)
      ? 'an address of this host (on an interface without carrier or down)'
      : undefined;
  const local = new BlockList();
  for (const [address, prefix] of localRangesOfFibTrie(readProc('/proc/net/fib_trie')))
    local.addSubnet(address, prefix, 'ipv4');
  return local.check(a.address, 'ipv4') ? "an address this host's routing tables deliver locally" : undefined;
}

/**
 * Whether this host has the address now, and how: asked at every connect, nothing cached
 * (interfaces and addresses come and go while a proxy lives). The kernel's answer (a bind)
 * where it means something; where non-local binds are allowed it proves nothing, and the
 * host's address lists are read instead.
 */
export async function hostHas(a: Address): Promise<string | undefined> {
  const nonlocalBind = readProc(`/proc/sys/net/ipv${a.family}/ip_nonlocal_bind`).trim();
  if (nonlocalBind !== '0') return listedHostAddress(a);
  if (await kernelDeliversLocally(a)) return 'an address this host has (the kernel delivers it locally)';
  // An IPv6 bind also refuses an address not usable yet (tentative): erring on refusing, the
  // kernel's list of IPv6 addresses has it.
  if (a.family === 6 && addressesOfIfInet6(readProc('/proc/net/if_inet6')).includes(a.address))
    return 'an address of this host (not usable yet)';
  return undefined;
}
