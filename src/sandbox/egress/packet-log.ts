/**
 * What never reaches the proxy: raw TCP, UDP and ICMP a sandbox sends past it. Such packets
 * have no way out anyway (an internal network, the host chain's DROP); this only makes them
 * visible. A rule per egress bridge in the `raw` table (before routing, so packets for the
 * host and packets to elsewhere alike) writes a kernel log line for each (rate-limited, so a
 * flood cannot fill the kernel log) and counts them all; the harness reads its bridges' lines
 * from /dev/kmsg without blocking and, when the sandbox goes, adds the count as an account of
 * what the rate limit left out. Traffic to the proxy's port and its name server is not
 * counted here: the proxy logs that itself.
 */
import { closeSync, constants, openSync, readFileSync, readSync } from 'node:fs';
import type { EgressLogEntry } from './proxy.js';
import { BRIDGE_PREFIX, tables } from './firewall.js';

export const PACKET_CHAIN = 'SANDBOX-HARNESS-EGRESS-LOG';
const PREFIX = 'sandbox-harness-egress: ';
/** Per bridge: a burst, then this many lines a second. */
const LOG_RATE = ['--limit', '10/sec', '--limit-burst', '30'];
const MAX_ENTRIES = 1000;

export interface PacketLogOptions {
  bridge: string;
  /** The proxy's address on the network (the gateway), its port and its name server's port. */
  address: string;
  tcpPort: number;
  udpPort?: number;
}

export interface PacketLog {
  /** Lines read so far (the kernel log is read on each call). */
  entries(): EgressLogEntry[];
  onEntry(listener: (entry: EgressLogEntry) => void): () => void;
  /** Reads what is left, adds the account of packets past the rate limit, removes the rules. */
  close(): Promise<void>;
}

function countComment(bridge: string): string {
  return `sandbox-harness count ${bridge}`;
}

function rules(o: PacketLogOptions): string[][] {
  const proxy = ['-i', o.bridge, '-d', `${o.address}/32`];
  return [
    [...proxy, '-p', 'tcp', '--dport', String(o.tcpPort), '-j', 'RETURN'],
    ...(o.udpPort !== undefined
      ? [[...proxy, '-p', 'udp', '--dport', String(o.udpPort), '-j', 'RETURN']]
      : []),
    ['-i', o.bridge, '-m', 'limit', ...LOG_RATE, '-j', 'LOG', '--log-prefix', PREFIX, '--log-level', '4'],
    ['-i', o.bridge, '-m', 'comment', '--comment', countComment(o.bridge), '-j', 'RETURN'],
  ];
}

let chainReady: Promise<void> | undefined;

function ensurePacketChain(): Promise<void> {
  chainReady ??= (async () => {
    await tables('iptables', '-t', 'raw', '-N', PACKET_CHAIN).catch(() => undefined);
    const jump = ['PREROUTING', '-i', `${BRIDGE_PREFIX}+`, '-j', PACKET_CHAIN];
    const present = await tables('iptables', '-t', 'raw', '-C', ...jump).then(
      () => true,
      () => false,
    );
    if (!present) await tables('iptables', '-t', 'raw', '-I', ...jump);
  })();
  chainReady.catch(() => (chainReady = undefined));
  return chainReady;
}

/** One kernel log reader per process, its lines handed to the bridge they came in on. */
class KernelLog {
  private fd: number | undefined | null;
  private readonly bridges = new Map<string, (line: string, atMs: number) => void>();
  private readonly buffer = Buffer.alloc(16 * 1024);

  subscribe(bridge: string, onLine: (line: string, atMs: number) => void): () => void {
    this.open();
    this.bridges.set(bridge, onLine);
    return () => {
      this.bridges.delete(bridge);
      if (this.bridges.size === 0 && typeof this.fd === 'number') {
        closeSync(this.fd);
        this.fd = undefined;
      }
    };
  }

  /** False where the kernel log cannot be read (no /dev/kmsg, not root): counts only. */
  get readable(): boolean {
    return typeof this.fd === 'number';
  }

  private open(): void {
    if (typeof this.fd === 'number' || this.fd === null) return;
    try {
      // Non-blocking: a read with nothing new returns EAGAIN instead of holding a thread.
      this.fd = openSync('/dev/kmsg', constants.O_RDONLY | constants.O_NONBLOCK);
    } catch {
      this.fd = null;
    }
  }

  /** Reads every record the kernel has now; each read of /dev/kmsg is one record. */
  drain(): void {
    if (typeof this.fd !== 'number') return;
    const bootMs = Date.now() - uptimeMs();
    for (let i = 0; i < 100_000; i++) {
      let n: number;
      try {
        n = readSync(this.fd, this.buffer, 0, this.buffer.length, null);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        // EPIPE: records were overwritten since the last read; the next read goes on.
        if (code === 'EPIPE') continue;
        return;
      }
      if (n <= 0) return;
      const record = this.buffer.toString('latin1', 0, n);
      const semi = record.indexOf(';');
      const text = record.slice(semi + 1).split('\n')[0] ?? '';
      if (!text.startsWith(PREFIX)) continue;
      const bridge = /\bIN=(\S+)/.exec(text)?.[1];
      const listener = bridge ? this.bridges.get(bridge) : undefined;
      if (!listener) continue;
      // `<level>,<seq>,<microseconds since boot>,...`
      const micros = Number(record.slice(0, semi).split(',')[2]);
      listener(text, Number.isFinite(micros) ? bootMs + micros / 1000 : Date.now());
    }
  }
}

function uptimeMs(): number {
  try {
    return Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000;
  } catch {
    return 0;
  }
}

const kernel = new KernelLog();

/** A kernel log line of ours as a log entry; undefined for one that is not a packet line. */
export function packetEntry(line: string, atMs: number): EgressLogEntry | undefined {
  const field = (name: string) => new RegExp(`\\b${name}=(\\S+)`).exec(line)?.[1];
  const proto = field('PROTO');
  const dst = field('DST');
  if (!proto || !dst) return undefined;
  const port = Number(field('DPT') ?? 0);
  const method = /^\d+$/.test(proto) ? `IP proto ${proto}` : proto.toUpperCase();
  return {
    time: new Date(atMs).toISOString(),
    method,
    host: dst,
    port: Number.isInteger(port) ? port : 0,
    allowed: false,
    rule: 'no-proxy',
    reason: `a ${method} packet to ${dst}${port ? `:${port}` : ''} that did not go through the proxy: dropped (the proxy is the only way out)`,
    address: dst,
    bytesOut: Number(field('LEN') ?? 0) || 0,
    bytesIn: 0,
  };
}

/** Packets and bytes the bridge's counting rule has seen. */
async function counted(bridge: string): Promise<{ packets: number; bytes: number }> {
  const listing = await tables('iptables', '-t', 'raw', '-L', PACKET_CHAIN, '-v', '-x', '-n').catch(() => '');
  const line = listing.split('\n').find((l) => l.includes(`/* ${countComment(bridge)} */`));
  const [packets, bytes] = (line ?? '').trim().split(/\s+/).map(Number);
  return { packets: packets || 0, bytes: bytes || 0 };
}

export async function openPacketLog(options: PacketLogOptions): Promise<PacketLog> {
  await ensurePacketChain();
  const made: string[][] = [];
  try {
    for (const rule of rules(options)) {
      await tables('iptables', '-t', 'raw', '-A', PACKET_CHAIN, ...rule);
      made.push(rule);
    }
  } catch (error) {
    for (const rule of made)
      await tables('iptables', '-t', 'raw', '-D', PACKET_CHAIN, ...rule).catch(() => '');
    throw error;
  }
  const entries: EgressLogEntry[] = [];
  const listeners = new Set<(entry: EgressLogEntry) => void>();
  // A connection attempt retried (SYN again after 1 s, 3 s) is one line.
  const seen = new Set<string>();
  let logged = 0;
  let closed = false;
  const unsubscribe = kernel.subscribe(options.bridge, (line, atMs) => {
    const entry = packetEntry(line, atMs);
    if (!entry) return;
    logged++;
    const key = `${entry.method} ${/\bSRC=(\S+)/.exec(line)?.[1]}:${/\bSPT=(\S+)/.exec(line)?.[1]} ${entry.host}:${entry.port}`;
    if (seen.has(key) || entries.length >= MAX_ENTRIES) return;
    seen.add(key);
    entries.push(entry);
    for (const listener of listeners) listener(entry);
  });
  // Lines reach listeners (the build log) while the sandbox lives, not only when asked for.
  const timer = setInterval(() => kernel.drain(), 500);
  timer.unref();
  return {
    entries() {
      if (!closed) kernel.drain();
      return [...entries];
    },
    onEntry(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      if (closed) return;
      kernel.drain();
      closed = true;
      clearInterval(timer);
      const total = await counted(options.bridge);
      const readable = kernel.readable;
      unsubscribe();
      for (const rule of rules(options))
        await tables('iptables', '-t', 'raw', '-D', PACKET_CHAIN, ...rule).catch(() => '');
      if (total.packets > logged) {
        const account: EgressLogEntry = {
          time: new Date().toISOString(),
          method: 'PACKETS',
          host: '*',
          port: 0,
          allowed: false,
          rule: 'no-proxy',
          reason: `${total.packets} packet(s), ${total.bytes} B, that did not go through the proxy were dropped; ${logged} of them have a line of their own${readable ? ' (the kernel log is rate-limited)' : ' (the kernel log cannot be read here)'}`,
          bytesOut: total.bytes,
          bytesIn: 0,
        };
        entries.push(account);
        for (const listener of listeners) listener(account);
      }
    },
  };
}
