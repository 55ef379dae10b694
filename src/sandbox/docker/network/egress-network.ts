/**
 * Egress for one Docker sandbox, as a resource like its container: an `internal` network
 * (no route out) of its own, a hole in the host firewall for exactly its proxy, and the
 * proxy, listening only on the host's address on that network. All of it carries the run's
 * labels, so `gc` finds what a killed run left. The sandbox learns only the proxy's URL.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import { HarnessError } from '../../../errors.js';
import {
  BRIDGE_PREFIX,
  closeHole,
  firewallProblem,
  openHole,
  type FirewallHole,
} from '../../egress/firewall.js';
import type { EgressPolicy } from '../../../egress-policy.js';
import { EgressProxy, type EgressLogEntry } from '../../egress/proxy.js';
import { openPacketLog, type PacketLog } from '../../egress/packet-log.js';
import { NetworkConflict, type DockerEngine } from '../engine/index.js';
import { LABEL } from '../labels.js';

export const PROXY_PORT = 3128;
/** Where per-sandbox /29 subnets are taken from (not Docker's default pools, so those never run out). */
export const DEFAULT_EGRESS_POOL = '10.213.0.0/16';

export class EgressUnsupported extends HarnessError {
  constructor(message: string) {
    super('EGRESS_UNSUPPORTED', 'config', message, {
      hint: 'Egress is enforced by a proxy and a firewall on the engine host: it needs the local engine, root and iptables (`sandbox-harness doctor` says what is missing). Remove sandbox.egress to run with network none.',
    });
  }
}

export interface EgressHandle {
  networkId: string;
  networkName: string;
  proxyUrl: string;
  /** The sandbox's name server: the proxy's refusing, logging one. */
  dns: string[];
  /** What the sandbox gets: the proxy, and nothing else. */
  env: Record<string, string>;
  log(): EgressLogEntry[];
  onEntry(listener: (entry: EgressLogEntry) => void): () => void;
  /** Stops the proxy and closes the firewall hole; removes the network unless `keepNetwork`. */
  close(options?: { keepNetwork?: boolean }): Promise<void>;
}

function v4ToInt(address: string): number {
  return address.split('.').reduce((n, part) => (n << 8) + Number(part), 0) >>> 0;
}
function intToV4(n: number): string {
  return [24, 16, 8, 0].map((shift) => (n >>> shift) & 255).join('.');
}

/** Host routes and interface subnets as [network, mask]: a new subnet must not shadow any. */
async function hostRanges(): Promise<Array<[number, number]>> {
  const ranges: Array<[number, number]> = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.family !== 'IPv4') continue;
      const mask = v4ToInt(a.netmask);
      ranges.push([v4ToInt(a.address) & mask, mask]);
    }
  }
  const table = await readFile('/proc/net/route', 'utf8').catch(() => '');
  for (const line of table.split('\n').slice(1)) {
    const [, dest, , , , , , mask] = line.trim().split(/\s+/);
    if (!dest || !mask) continue;
    // Little-endian hex.
    const le = (hex: string) => Buffer.from(hex, 'hex').readUInt32LE(0) >>> 0;
    const m = le(mask);
    if (m === 0) continue; // the default route covers everything; it is not a conflict
    ranges.push([le(dest) & m, m]);
  }
  return ranges;
}

function overlaps(a: [number, number], b: [number, number]): boolean {
  const mask = (a[1] & b[1]) >>> 0;
  return (a[0] & mask) >>> 0 === (b[0] & mask) >>> 0;
}

function parsePool(text: string): { base: number; prefix: number } {
  const [address, bits] = text.split('/');
  const prefix = Number(bits);
  if (!address || !Number.isInteger(prefix) || prefix < 8 || prefix > 29) {
    throw new EgressUnsupported(
      `SANDBOX_HARNESS_EGRESS_POOL=${text}: expected an IPv4 range such as 10.213.0.0/16`,
    );
  }
  const mask = (~0 << (32 - prefix)) >>> 0;
  return { base: (v4ToInt(address) & mask) >>> 0, prefix };
}

/** Why egress cannot be enforced on this engine from this process, or undefined. */
export async function egressProblem(engine: DockerEngine): Promise<string | undefined> {
  if (!engine.isLocal())
    return 'the proxy and firewall run on the engine host; this engine is not on this machine';
  return firewallProblem();
}

export async function openEgress(
  engine: DockerEngine,
  policy: EgressPolicy,
  labels: Record<string, string>,
  name: string,
): Promise<EgressHandle> {
  const problem = await egressProblem(engine);
  if (problem) throw new EgressUnsupported(`sandbox.egress cannot be enforced: ${problem}`);
  const pool = parsePool(process.env.SANDBOX_HARNESS_EGRESS_POOL ?? DEFAULT_EGRESS_POOL);
  const taken = await hostRanges();
  const slots = 2 ** (29 - pool.prefix);
  const networkLabels = { ...labels, [LABEL.kind]: 'egress-network' };
  let made: { id: string; subnet: number; bridge: string } | undefined;
  for (let tries = 0; tries < 32 && !made; tries++) {
    const subnet = (pool.base + randomInt(slots) * 8) >>> 0;
    if (taken.some((range) => overlaps(range, [subnet, 0xfffffff8]))) continue;
    const bridge = `${BRIDGE_PREFIX}${randomBytes(6).toString('hex')}`;
    try {
      const id = await engine.networks.create({
        name: `${name}-${bridge}`,
        labels: networkLabels,
        subnet: `${intToV4(subnet)}/29`,
        gateway: intToV4(subnet + 1),
        bridgeName: bridge,
      });
      made = { id, subnet, bridge };
    } catch (error) {
      if (!(error instanceof NetworkConflict)) throw error;
    }
  }
  if (!made)
    throw new EgressUnsupported(
      `no free /29 left in ${process.env.SANDBOX_HARNESS_EGRESS_POOL ?? DEFAULT_EGRESS_POOL}`,
    );
  const gateway = intToV4(made.subnet + 1);
  const hole: FirewallHole = { bridge: made.bridge, address: gateway, tcpPort: PROXY_PORT, udpPort: 53 };
  const own = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address));
  const proxy = new EgressProxy({
    policy,
    listenAddress: gateway,
    port: PROXY_PORT,
    clientSubnet: { address: intToV4(made.subnet), prefix: 29 },
    ownAddresses: [...own, gateway],
    dnsPort: 53,
  });
  const networkId = made.id;
  let packets: PacketLog | undefined;
  try {
    await openHole(hole);
    packets = await openPacketLog(hole);
    await proxy.start();
  } catch (error) {
    await packets?.close().catch(() => undefined);
    await proxy.close().catch(() => undefined);
    await closeHole(hole).catch(() => undefined);
    await engine.networks.remove(networkId).catch(() => undefined);
    throw error;
  }
  const url = proxy.url;
  const log = packets!;
  let closed = false;
  return {
    networkId,
    networkName: `${name}-${made.bridge}`,
    proxyUrl: url,
    dns: [gateway],
    env: {
      HTTP_PROXY: url,
      HTTPS_PROXY: url,
      http_proxy: url,
      https_proxy: url,
      NO_PROXY: 'localhost,127.0.0.1,::1',
      no_proxy: 'localhost,127.0.0.1,::1',
    },
    // The proxy's requests and the packets that went past it, in the order they happened.
    log: () =>
      [...proxy.log(), ...log.entries()].sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0)),
    onEntry: (listener) => {
      const stops = [proxy.onEntry(listener), log.onEntry(listener)];
      return () => stops.forEach((stop) => stop());
    },
    async close(options = {}) {
      if (closed) return;
      closed = true;
      await proxy.close().catch(() => undefined);
      await log.close().catch(() => undefined);
      await closeHole(hole);
      if (!options.keepNetwork) await engine.networks.remove(networkId);
    },
  };
}
