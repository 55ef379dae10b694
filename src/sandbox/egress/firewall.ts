/**
 * The host's firewall for sandbox networks. A Docker `internal` network has no route out,
 * but the host itself is on it (the bridge's gateway address): every service the host runs
 * on 0.0.0.0 would be reachable from the sandbox. So every packet from an egress bridge
 * (`shx*`) to the host is dropped, except TCP to its own proxy's address and port and UDP to
 * its logging name server. One chain, one jump; a rule per live network, named by its bridge.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { SandboxUnavailable } from '../../errors.js';

const run = promisify(execFile);

export const CHAIN = 'SANDBOX-HARNESS-EGRESS';
/** Bridge names of egress networks start with this (Linux allows 15 characters). */
export const BRIDGE_PREFIX = 'shx';

export interface FirewallHole {
  bridge: string;
  address: string;
  tcpPort: number;
  udpPort?: number;
}

export async function tables(tool: 'iptables' | 'ip6tables', ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(tool, ['-w', '5', ...args], { timeout: 15_000 });
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; message: string; code?: string };
    throw new SandboxUnavailable(`${tool} ${args.join(' ')} failed: ${(e.stderr ?? e.message).trim()}`, {
      hint: 'Egress needs root and iptables on the engine host (`apt-get install iptables`); `sandbox-harness doctor` checks it.',
      cause: error,
    });
  }
}

async function has(tool: 'iptables' | 'ip6tables', ...rule: string[]): Promise<boolean> {
  return tables(tool, '-C', ...rule).then(
    () => true,
    () => false,
  );
}

let ready: Promise<void> | undefined;

/** The chain and its jump from INPUT, made once (idempotent across processes). */
export function ensureChain(): Promise<void> {
  ready ??= (async () => {
    for (const tool of ['iptables', 'ip6tables'] as const) {
      await tables(tool, '-N', CHAIN).catch(() => undefined);
      if (!(await has(tool, CHAIN, '-j', 'DROP'))) await tables(tool, '-A', CHAIN, '-j', 'DROP');
      const jump = ['INPUT', '-i', `${BRIDGE_PREFIX}+`, '-j', CHAIN];
      if (!(await has(tool, ...jump))) await tables(tool, '-I', ...jump);
    }
  })();
  ready.catch(() => (ready = undefined));
  return ready;
}

function holeRules(hole: FirewallHole): string[][] {
  const rules = [
    [
      CHAIN,
      '-i',
      hole.bridge,
      '-d',
      `${hole.address}/32`,
      '-p',
      'tcp',
      '--dport',
      String(hole.tcpPort),
      '-j',
      'ACCEPT',
    ],
  ];
  if (hole.udpPort !== undefined) {
    rules.push([
      CHAIN,
      '-i',
      hole.bridge,
      '-d',
      `${hole.address}/32`,
      '-p',
      'udp',
      '--dport',
      String(hole.udpPort),
      '-j',
      'ACCEPT',
    ]);
  }
  return rules;
}

export async function openHole(hole: FirewallHole): Promise<void> {
  await ensureChain();
  for (const rule of holeRules(hole)) {
    const [chain, ...rest] = rule;
    await tables('iptables', '-I', chain!, '1', ...rest);
  }
}

export async function closeHole(hole: FirewallHole): Promise<void> {
  for (const rule of holeRules(hole)) {
    while (await has('iptables', ...rule)) await tables('iptables', '-D', ...rule);
  }
}

/** Rules of bridges that no longer exist (a run killed before it closed its hole). */
export async function closeStaleHoles(liveBridges: ReadonlySet<string>): Promise<number> {
  let closed = 0;
  // The host chain, and the raw table's packet log chain (packet-log.ts).
  for (const [table, chain] of [
    ['filter', CHAIN],
    ['raw', `${CHAIN}-LOG`],
  ] as const) {
    const listing = await tables('iptables', '-t', table, '-S', chain).catch(() => '');
    for (const line of listing.split('\n')) {
      const spec = splitRule(line.trim());
      if (spec[0] !== '-A' || spec[1] !== chain) continue;
      const bridge = spec[spec.indexOf('-i') + 1];
      if (!spec.includes('-i') || !bridge?.startsWith(BRIDGE_PREFIX) || liveBridges.has(bridge)) continue;
      // `-S` prints each rule as the arguments that made it.
      await tables('iptables', '-t', table, '-D', ...spec.slice(1)).catch(() => undefined);
      closed++;
    }
  }
  return closed;
}

/** `-S` output into arguments: quoted values (a log prefix, a comment) are one argument. */
function splitRule(line: string): string[] {
  return [...line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

/** Whether this process can manage the firewall (root, iptables present). */
export async function firewallProblem(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'egress needs root on the engine host (it manages the host firewall)';
  for (const tool of ['iptables', 'ip6tables'] as const) {
    try {
      await run(tool, ['-w', '5', '-S', 'INPUT'], { timeout: 15_000 });
    } catch (error) {
      return `${tool} does not work here: ${(error as Error).message.split('\n')[0]}`;
    }
  }
  return undefined;
}
