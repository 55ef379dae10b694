/**
 * Which destinations a sandbox with egress may reach: a pure function of the policy, the
 * name asked for, its port and the addresses the proxy resolved it to. Nothing here trusts
 * the sandbox: names are the proxy's view, addresses are the proxy's own resolution.
 *
 * Neutral, at the bottom of the house (data and pure functions, no engine): the catalog
 * checks its host patterns with it, an image request carries it for the build phase, and
 * the egress proxy in `sandbox/egress/` applies it.
 */
import { BlockList, isIP } from 'node:net';

/** One host pattern: an exact name or `*.suffix` (any name below the suffix, not the suffix). */
export interface HostRule {
  host: string;
  /** Ports this rule covers; default 443 and 80. */
  ports: number[];
  /** Names (same pattern syntax) a deny rule does not cover. */
  except?: string[];
}

export interface EgressPolicy {
  allow: HostRule[];
  /** Checked first: a matching deny rule (unless one of its exceptions matches) wins over any allow. */
  deny: HostRule[];
  /**
   * Private, loopback or link-local ranges (CIDR) a name may resolve to. Empty by default:
   * an allowed name that resolves to such an address is refused (DNS rebinding).
   */
  privateRanges: string[];
  /** Name servers the proxy asks (`ip` or `ip:port`); default the host's own. */
  resolvers: string[];
}

export const DEFAULT_PORTS = [443, 80];

export type Decision = { allowed: true; rule: string } | { allowed: false; rule: string; reason: string };

/** Lower case, no trailing dot; undefined for something that is not a DNS name. */
export function normaliseHost(raw: string): string | undefined {
  const host = raw.trim().toLowerCase().replace(/\.$/, '');
  if (host.length === 0 || host.length > 253) return undefined;
  if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(host)) return undefined;
  if (host.split('.').some((label) => label.length > 63 || label.startsWith('-'))) return undefined;
  return host;
}

export function hostMatches(pattern: string, host: string): boolean {
  if (pattern.startsWith('*.')) {
    const suffix = pattern.slice(1);
    return host.endsWith(suffix) && host.length > suffix.length;
  }
  return pattern === host;
}

function describe(rule: HostRule, kind: 'allow' | 'deny'): string {
  return `${kind} ${rule.host}:${rule.ports.join(',')}`;
}

/** Whether `host:port` may be asked for at all (before any name is resolved). */
export function decideName(policy: EgressPolicy, rawHost: string, port: number): Decision {
  const bare = rawHost.replace(/^\[(.*)\]$/, '$1');
  if (isIP(bare) !== 0) {
    return {
      allowed: false,
      rule: 'ip-literal',
      reason: `${rawHost} is an IP address; egress is allowed by host name only`,
    };
  }
  const host = normaliseHost(rawHost);
  if (!host)
    return { allowed: false, rule: 'invalid-host', reason: `${JSON.stringify(rawHost)} is not a host name` };
  for (const rule of policy.deny) {
    if (!hostMatches(rule.host, host) || !rule.ports.includes(port)) continue;
    if ((rule.except ?? []).some((pattern) => hostMatches(pattern, host))) continue;
    return {
      allowed: false,
      rule: describe(rule, 'deny'),
      reason: `${host}:${port} is denied by the catalog (${describe(rule, 'deny')})`,
    };
  }
  const byName = policy.allow.filter((rule) => hostMatches(rule.host, host));
  const rule = byName.find((r) => r.ports.includes(port));
  if (rule) return { allowed: true, rule: describe(rule, 'allow') };
  if (byName.length > 0) {
    return {
      allowed: false,
      rule: 'port',
      reason: `${host} is allowed on port ${[...new Set(byName.flatMap((r) => r.ports))].join(', ')} only, not ${port}`,
    };
  }
  return {
    allowed: false,
    rule: 'not-allowed',
    reason: `${host} is not in the catalog's sandbox.egress.allow`,
  };
}

/** Ranges no name may resolve to unless the catalog names the range. */
const FORBIDDEN_V4 = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const;
const FORBIDDEN_V6 = [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['2001:db8::', 32],
] as const;

/** `::ffff:1.2.3.4` is 1.2.3.4: a mapped address must not slip past the IPv4 ranges. */
export function unmapAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

function cidrList(ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const range of ranges) {
    const [address, bits] = range.split('/');
    const family = isIP(address ?? '') === 6 ? 'ipv6' : 'ipv4';
    list.addSubnet(address!, Number(bits ?? (family === 'ipv6' ? 128 : 32)), family);
  }
  return list;
}

export interface AddressGuard {
  /** Why the proxy must not connect to this address, or undefined. */
  problem(address: string): string | undefined;
}

/**
 * Checks resolved addresses: never the proxy's own addresses (any of the host's), never a
 * private, loopback, link-local or reserved one unless the catalog names its range.
 */
export function addressGuard(
  policy: Pick<EgressPolicy, 'privateRanges'>,
  ownAddresses: readonly string[],
): AddressGuard {
  const forbidden = new BlockList();
  for (const [a, b] of FORBIDDEN_V4) forbidden.addSubnet(a, b, 'ipv4');
  for (const [a, b] of FORBIDDEN_V6) forbidden.addSubnet(a, b, 'ipv6');
  const allowed = cidrList(policy.privateRanges);
  const own = new Set(ownAddresses.map((a) => unmapAddress(a.toLowerCase())));
  return {
    problem(raw) {
      const address = unmapAddress(raw.toLowerCase());
      const family = isIP(address) === 6 ? 'ipv6' : isIP(address) === 4 ? 'ipv4' : undefined;
      if (!family) return `${raw} is not an address`;
      if (own.has(address)) return `${address} is the proxy's own address`;
      if (forbidden.check(address, family) && !allowed.check(address, family)) {
        return `${address} is a private, loopback or reserved address the catalog does not name in sandbox.egress.privateRanges`;
      }
      return undefined;
    },
  };
}

/** `host`, `host:port`, `*.suffix:port` -> a rule; undefined with a reason when it is not one. */
export function parseHostPattern(text: string): { host: string; port?: number | undefined } | string {
  const match = /^(\*\.)?([^:*]+?)(?::(\d{1,5}))?$/.exec(text.trim());
  if (!match)
    return 'expected a host name such as "registry.npmjs.org", "*.example.com" or "mirror.corp:8443"';
  const name = normaliseHost(match[2]!);
  if (!name || isIP(match[2]!) !== 0) {
    return isIP(match[2]!) !== 0
      ? 'an IP address cannot be allowed by name; name the host, and its range in privateRanges if it is private'
      : `${JSON.stringify(match[2])} is not a host name`;
  }
  const port = match[3] === undefined ? undefined : Number(match[3]);
  if (port !== undefined && (port < 1 || port > 65535)) return `port ${port} is out of range`;
  return { host: `${match[1] ?? ''}${name}`, port };
}
