/**
 * Egress by name for an image build (catalog `sandbox.egress.phases: [build]`). The legacy
 * builder runs each step in a container on the network the build names, so the steps join a
 * per-build internal network of their own (no route out, the host firewall's chain for it)
 * whose only way out is the same allowlist proxy a sandbox gets, announced through the
 * predefined proxy build arguments (which the builder keeps out of the image's history).
 * What cannot be confined is refused before anything is built, never widened to the
 * engine's network: the daemon's own downloads (`FROM` pulls, `ADD <url>`) are refused as
 * for a build without network, and a host whose name server is on loopback is refused (Docker's
 * embedded DNS would then ask it from the host's side, outside the build's network).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import type { EgressPolicy } from '../../../egress-policy.js';
import type { EgressLogEntry } from '../../egress/proxy.js';
import { egressProblem, EgressUnsupported, openEgress } from './egress-network.js';
import type { DockerEngine } from '../engine/index.js';
import { containerLabels } from '../labels.js';

/** What the content hash says of a build with egress: the same files with other names allowed may differ. */
export function buildEgressHashInput(policy: EgressPolicy): string {
  return `egress ${createHash('sha256').update(JSON.stringify(policy)).digest('hex')}`;
}

/** The name servers dockerd hands to a user-defined network's embedded DNS (systemd-resolved's upstreams if it runs). */
async function daemonResolvers(): Promise<string[]> {
  const read = (file: string) => readFile(file, 'utf8').catch(() => '');
  const servers = (text: string) =>
    text
      .split('\n')
      .map((line) => /^\s*nameserver\s+(\S+)/.exec(line)?.[1])
      .filter((s): s is string => s !== undefined);
  const own = servers(await read('/etc/resolv.conf'));
  if (own.length === 1 && own[0] === '127.0.0.53') {
    const upstream = servers(await read('/run/systemd/resolve/resolv.conf'));
    if (upstream.length > 0) return upstream;
  }
  return own;
}

function loopback(address: string): boolean {
  const bare = address.replace(/%.*$/, '');
  return isIP(bare) === 4 ? bare.startsWith('127.') : bare === '::1';
}

/** Refuses (with the reason) a build egress this engine cannot enforce; never falls back to more network. */
export async function assertBuildEgressEnforceable(engine: DockerEngine, network: boolean): Promise<void> {
  if (network) {
    throw new EgressUnsupported(
      'the image build was asked for both the whole network (sandbox.build.network) and egress by name (sandbox.egress phase build)',
    );
  }
  const problem = await egressProblem(engine);
  if (problem) throw new EgressUnsupported(`egress for the image build cannot be enforced: ${problem}`);
  const resolver = await buildResolverProblem();
  if (resolver) throw new EgressUnsupported(`egress for the image build cannot be enforced: ${resolver}`);
}

/** What keeps a build's steps from being confined on this host beyond a sandbox's needs, or undefined. */
export async function buildResolverProblem(): Promise<string | undefined> {
  const local = (await daemonResolvers()).filter(loopback);
  return local.length > 0
    ? `the host's name server ${local.join(', ')} is on loopback, and Docker's embedded DNS would ask it for the build's steps from the host's side, outside the build's network`
    : undefined;
}

export interface BuildNetwork {
  /** The build's `networkmode`: the internal network's name. */
  networkMode: string;
  /** Predefined proxy build arguments (kept out of the image's history and its content hash). */
  buildArgs: Record<string, string>;
}

/** Runs `build` on a fresh internal network whose only way out is an allowlist proxy; every request becomes a log line. */
export async function withBuildEgress<T>(
  engine: DockerEngine,
  policy: EgressPolicy,
  onEntry: (line: string, entry: EgressLogEntry) => void,
  build: (network: BuildNetwork) => Promise<T>,
): Promise<T> {
  const labels = containerLabels({ role: 'image-build' });
  const egress = await openEgress(engine, policy, labels, 'sandbox-harness-build');
  const stop = egress.onEntry((entry) => onEntry(formatBuildEgress(entry), entry));
  try {
    return await build({ networkMode: egress.networkName, buildArgs: egress.env });
  } finally {
    // A network left behind (a step container the daemon has not removed yet) carries the
    // labels of this process and is reaped by gc once the process is gone. Closing reads the
    // last packet lines and the account, which still go to the log.
    await egress.close().catch(() => undefined);
    stop();
  }
}

export function formatBuildEgress(entry: EgressLogEntry): string {
  const verdict = entry.allowed ? 'allowed' : 'denied';
  const detail = entry.allowed
    ? `${entry.rule}, ${entry.bytesOut} B out, ${entry.bytesIn} B in`
    : (entry.reason ?? entry.rule);
  return `# egress ${verdict} ${entry.method} ${entry.host}:${entry.port} ${detail}`;
}
