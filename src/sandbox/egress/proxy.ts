/**
 * The egress proxy of one sandbox: a process on the engine's host, listening only on the
 * address the host has on that sandbox's internal network. HTTP is parsed by Node's own
 * server (llhttp), not by hand: HTTP by its absolute URL, HTTPS by `CONNECT name:port`.
 *
 * A name is checked at every layer that carries one: the CONNECT line, then the TLS
 * ClientHello inside the tunnel (tunnel-guard.ts: its server name must be the CONNECT name;
 * anything but TLS is refused); for plain HTTP, every request's absolute URI and Host header,
 * and each allowed name has upstream connections of its own. The proxy resolves every name
 * itself with its own resolvers (never /etc/hosts, never the sandbox), checks every address
 * against what is never reachable and against this host's addresses as they are at that
 * moment (addresses.ts), and connects to exactly the address it checked, so a name that
 * re-resolves elsewhere later (DNS rebinding) changes nothing.
 */
import {
  Agent,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, isIP, type LookupFunction, type Socket } from 'node:net';
import { Resolver } from 'node:dns/promises';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import {
  addressGuard,
  decideName,
  type AddressGuard,
  type Decision,
  type EgressPolicy,
} from '../../egress-policy.js';
import { canonicalAddress, hostHas, neverReachable } from './addresses.js';
import { comparableName, parseHostHeader } from './names.js';
import { httpDenial, TunnelGuard, type TunnelStep } from './tunnel-guard.js';

export interface EgressLogEntry {
  time: string;
  /** `CONNECT`, an HTTP method, or `DNS` for a query the sandbox sent to its name server. */
  method: string;
  host: string;
  port: number;
  allowed: boolean;
  /** The catalog rule that decided, or the check that refused (`ip-literal`, `address`, ...). */
  rule: string;
  reason?: string | undefined;
  /** The address the proxy connected to. */
  address?: string;
  bytesOut: number;
  bytesIn: number;
}

export interface EgressProxyOptions {
  policy: EgressPolicy;
  /** The host's address on the sandbox's network: the only one the proxy listens on. */
  listenAddress: string;
  /** 0: any free port (`url` says which). */
  port: number;
  /** Connections from anywhere else are refused (another run's sandbox, the host). */
  clientSubnet: { address: string; prefix: number };
  /**
   * Addresses that are the proxy's own, never a destination. The host's addresses are added
   * at every connect (they change while the proxy lives), so these need not list them.
   */
  ownAddresses: string[];
  /** Also answer DNS on listenAddress:53 with REFUSED, to log what the sandbox tried to resolve. */
  dnsPort?: number;
  maxLogEntries?: number;
  /** Per-connection idle limit. */
  idleMs?: number;
  /** From a tunnel's `200` to a judged TLS handshake (the client's hello, the server's answer). */
  handshakeMs?: number;
}

const MAX_LOG = 10_000;
const HANDSHAKE_MS = 15_000;
/** Upstream connection pools kept for plain HTTP (one per allowed name and port). */
const MAX_AGENTS = 64;

function v4ToInt(address: string): number {
  return address.split('.').reduce((n, part) => (n << 8) + Number(part), 0) >>> 0;
}

function inSubnet(address: string, subnet: { address: string; prefix: number }): boolean {
  const a = address.replace(/^::ffff:/i, '');
  if (isIP(a) !== 4) return false;
  const mask = subnet.prefix === 0 ? 0 : (~0 << (32 - subnet.prefix)) >>> 0;
  return (v4ToInt(a) & mask) === (v4ToInt(subnet.address) & mask);
}

/** `host:port` of a CONNECT target; IPv6 literals in brackets. */
function splitTarget(target: string): { host: string; port: number } | undefined {
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(target);
  if (!match) return undefined;
  const port = Number(match[2]);
  return port >= 1 && port <= 65535 ? { host: match[1]!, port } : undefined;
}

/** A lookup that can only answer the address already checked: nothing resolves a name twice. */
function pinned(address: string): LookupFunction {
  const family = isIP(address);
  return (_host, options, callback) => {
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
}

/** Headers that are the connection's, not the request's (RFC 9110 7.6.1); `upgrade` would turn it into an unjudged tunnel. */
const HOP_BY_HOP = [
  'proxy-connection',
  'proxy-authorization',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
];

type Admission = { decision: Decision; address?: string };

export class EgressProxy {
  private readonly server: Server;
  private dns: UdpSocket | undefined;
  private readonly resolver = new Resolver({ timeout: 3000, tries: 2 });
  private readonly guard: AddressGuard;
  private readonly entries: EgressLogEntry[] = [];
  private readonly listeners = new Set<(entry: EgressLogEntry) => void>();
  private readonly sockets = new Set<Socket>();
  private readonly agents = new Map<string, Agent>();
  private dropped = 0;

  constructor(private readonly options: EgressProxyOptions) {
    if (options.policy.resolvers.length > 0) this.resolver.setServers(options.policy.resolvers);
    this.guard = addressGuard(options.policy, options.ownAddresses);
    this.server = createServer({ requestTimeout: 60_000, headersTimeout: 15_000 });
    this.server.on('connection', (socket: Socket) => {
      if (!inSubnet(socket.remoteAddress ?? '', options.clientSubnet)) {
        socket.destroy();
        return;
      }
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      socket.setTimeout(options.idleMs ?? 120_000, () => socket.destroy());
    });
    this.server.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      // Nothing is read (and so lost) until the tunnel's guard listens.
      socket.pause();
      void this.tunnel(req, socket, head);
    });
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      void this.forward(req, res);
    });
    this.server.on('clientError', (_error, socket: Socket) => socket.destroy());
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(
        { host: this.options.listenAddress, port: this.options.port, exclusive: true },
        () => {
          this.server.off('error', reject);
          resolve();
        },
      );
    });
    if (this.options.dnsPort !== undefined) await this.startDns(this.options.dnsPort).catch(() => undefined);
  }

  get url(): string {
    const bound = this.server.address();
    const port = bound && typeof bound === 'object' ? bound.port : this.options.port;
    return `http://${this.options.listenAddress}:${port}`;
  }

  log(): EgressLogEntry[] {
    return [...this.entries];
  }

  /** Entries past the log's cap that were not kept. */
  droppedEntries(): number {
    return this.dropped;
  }

  onEntry(listener: (entry: EgressLogEntry) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
    this.dns?.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private record(entry: Omit<EgressLogEntry, 'time'>): void {
    const full = { time: new Date().toISOString(), ...entry };
    if (this.entries.length < (this.options.maxLogEntries ?? MAX_LOG)) this.entries.push(full);
    else this.dropped++;
    for (const listener of this.listeners) listener(full);
  }

  /** Why the proxy must not connect to this address now, or undefined. */
  private async addressProblem(raw: string): Promise<string | undefined> {
    const address = canonicalAddress(raw);
    if (!address) return `${raw}, which is not an address the proxy connects to`;
    const never = neverReachable(address);
    if (never) return never;
    const own = await hostHas(address);
    if (own) return `${address.address}, the proxy's own address: ${own}`;
    return this.guard.problem(address.address);
  }

  /**
   * The name's addresses as the proxy's resolvers say, asked once; refused when any of them is
   * forbidden. The address returned is the one checked, in its checked spelling.
   */
  private async resolve(host: string): Promise<{ address: string } | { reason: string }> {
    const [v4, v6] = await Promise.all([
      this.resolver.resolve4(host).catch(() => [] as string[]),
      this.resolver.resolve6(host).catch(() => [] as string[]),
    ]);
    const addresses = [...v4, ...v6];
    if (addresses.length === 0) return { reason: `${host} does not resolve` };
    for (const address of addresses) {
      const problem = await this.addressProblem(address);
      if (problem) return { reason: `${host} resolves to ${problem}` };
    }
    return { address: canonicalAddress(addresses[0]!)!.address };
  }

  private async admitAddress(host: string, decision: Decision): Promise<Admission> {
    if (!decision.allowed) return { decision };
    const resolved = await this.resolve(host);
    if ('reason' in resolved)
      return { decision: { allowed: false, rule: 'address', reason: resolved.reason } };
    return { decision, address: resolved.address };
  }

  private async tunnel(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    const target = splitTarget(req.url ?? '');
    const base = { method: 'CONNECT', host: target?.host ?? String(req.url ?? ''), port: target?.port ?? 0 };
    if (!target) {
      this.record({
        ...base,
        allowed: false,
        rule: 'invalid-target',
        reason: 'CONNECT needs host:port',
        bytesOut: 0,
        bytesIn: 0,
      });
      client.resume();
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const { decision, address } = await this.admitAddress(
      target.host,
      decideName(this.options.policy, target.host, target.port),
    );
    if (!decision.allowed || !address) {
      const reason = decision.allowed ? 'no address' : decision.reason;
      this.record({ ...base, allowed: false, rule: decision.rule, reason, bytesOut: 0, bytesIn: 0 });
      client.resume();
      client.end(httpDenial(reason));
      return;
    }
    // An admitted name normalises (decideName refused it otherwise).
    const name = comparableName(target.host)!;
    const guard = new TunnelGuard(name, `${name}:${target.port}`);
    const upstream = connect({ host: address, port: target.port, lookup: pinned(address) });
    const handshakeMs = this.options.handshakeMs ?? HANDSHAKE_MS;
    let opened = false;
    let refused: { rule: string; reason: string } | undefined;
    let deadline: NodeJS.Timeout | undefined;
    upstream.setTimeout(this.options.idleMs ?? 120_000, () => upstream.destroy());

    const done = once(() => {
      clearTimeout(deadline);
      upstream.destroy();
      // A refused client is closed once its answer is written (below), not cut off here.
      if (!refused) client.destroy();
      this.record({
        ...base,
        host: name,
        allowed: opened && !refused,
        rule: refused?.rule ?? decision.rule,
        ...(refused
          ? { reason: refused.reason }
          : opened
            ? {}
            : { reason: `cannot connect to ${address}:${target.port}` }),
        address,
        bytesOut: upstream.bytesWritten,
        bytesIn: upstream.bytesRead,
      });
    });
    const write = (from: Socket, to: Socket, bytes: Buffer) => {
      if (!to.write(bytes)) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    };
    const onClient = (chunk: Buffer) => apply(guard.fromClient(chunk));
    const onServer = (chunk: Buffer) => apply(guard.fromServer(chunk));
    const apply = (step: TunnelStep) => {
      if (refused) return;
      if (step.refuse) {
        refused = { rule: step.rule, reason: step.reason };
        client.off('data', onClient);
        upstream.off('data', onServer);
        upstream.destroy();
        client.end(step.answer ?? Buffer.alloc(0));
        // The client closes once it has read the answer; one that does not is not waited for.
        setTimeout(() => client.destroy(), 2000).unref();
        done();
        return;
      }
      for (const bytes of step.toServer) write(client, upstream, bytes);
      for (const bytes of step.toClient) write(upstream, client, bytes);
      if (!step.open) return;
      // Judged: from here on the bytes are piped, with no per-byte work of the proxy's.
      clearTimeout(deadline);
      client.off('data', onClient);
      upstream.off('data', onServer);
      client.pipe(upstream);
      upstream.pipe(client);
    };
    upstream.once('connect', () => {
      opened = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      client.on('data', onClient);
      upstream.on('data', onServer);
      deadline = setTimeout(() => apply(guard.expire(handshakeMs)), handshakeMs);
      if (head.length > 0) onClient(head);
      client.resume();
    });
    upstream.once('error', () => {
      if (!opened) client.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n');
      done();
    });
    upstream.once('close', done);
    client.once('error', done);
    client.once('close', done);
  }

  /** Why a plain HTTP request's Host header does not name what its URI names, or undefined. */
  private hostHeaderProblem(req: IncomingMessage, url: URL, port: number): string | undefined {
    const values: string[] = [];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
      if (req.rawHeaders[i]!.toLowerCase() === 'host') values.push(req.rawHeaders[i + 1]!);
    // Header values are the client's: quoted and cut short in a reason.
    const shown = (value: string) => JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}...` : value);
    if (values.length === 0) return undefined; // HTTP/1.0: the URI alone names the host
    if (values.length > 1)
      return `the request has ${values.length} Host headers (${values.slice(0, 4).map(shown).join(', ')})`;
    const header = parseHostHeader(values[0]!);
    if (!header) return `Host ${shown(values[0]!)} is not a host name`;
    if (header.name !== comparableName(url.hostname) || (header.port ?? 80) !== port)
      return `Host ${header.name}${header.port ? `:${header.port}` : ''} differs from the URL's ${url.host}`;
    return undefined;
  }

  /** Upstream connections of one allowed name: a request for another name never rides on them. */
  private agentFor(name: string, port: number): Agent {
    const key = `${name}:${port}`;
    let agent = this.agents.get(key);
    if (!agent) {
      // Past the cap the oldest pool is forgotten, not destroyed: its requests in flight finish,
      // and its idle connections close at the agent's timeout.
      if (this.agents.size >= MAX_AGENTS) this.agents.delete(this.agents.keys().next().value as string);
      agent = new Agent({ keepAlive: true, maxSockets: 16, maxFreeSockets: 4, timeout: 5000 });
      this.agents.set(key, agent);
    }
    return agent;
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL | undefined;
    try {
      url = new URL(req.url ?? '');
    } catch {
      url = undefined;
    }
    if (!url || url.protocol !== 'http:') {
      const reason = 'only absolute http:// URLs (and CONNECT for https) go through the proxy';
      this.record({
        method: req.method ?? '',
        host: '',
        port: 0,
        allowed: false,
        rule: 'invalid-request',
        reason,
        bytesOut: 0,
        bytesIn: 0,
      });
      res.writeHead(400, { 'content-type': 'text/plain', connection: 'close' }).end(`${reason}\n`);
      return;
    }
    const host = url.hostname;
    const port = url.port === '' ? 80 : Number(url.port);
    const base = { method: req.method ?? '', host, port };
    // Every request of a kept-alive connection is judged on its own: the name in its URI,
    // and a Host header (one at most) that names the same.
    const byName = decideName(this.options.policy, host, port);
    const headerProblem = byName.allowed ? this.hostHeaderProblem(req, url, port) : undefined;
    const { decision, address } = headerProblem
      ? {
          decision: { allowed: false as const, rule: 'host-header', reason: headerProblem },
          address: undefined,
        }
      : await this.admitAddress(host, byName);
    if (!decision.allowed || !address) {
      const reason = decision.allowed ? 'no address' : decision.reason;
      this.record({ ...base, allowed: false, rule: decision.rule, reason, bytesOut: 0, bytesIn: 0 });
      res
        .writeHead(403, {
          'content-type': 'text/plain',
          'x-sandbox-harness-egress': 'denied',
          connection: 'close',
        })
        .end(`sandbox-harness egress denied: ${reason}\n`);
      return;
    }
    const headers = { ...req.headers };
    const listed = String(req.headers.connection ?? '')
      .split(',')
      .map((token) => token.trim().toLowerCase())
      .filter((token) => token !== '' && !['host', 'content-length', 'transfer-encoding'].includes(token));
    for (const header of [...HOP_BY_HOP, ...listed]) delete headers[header];
    let bytesOut = 0;
    let bytesIn = 0;
    const upstream = httpRequest({
      host: address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: { ...headers, host: url.host },
      setHost: false,
      agent: this.agentFor(comparableName(host)!, port),
      lookup: pinned(address),
    });
    upstream.setTimeout(this.options.idleMs ?? 120_000, () => upstream.destroy(new Error('timed out')));
    const done = once((error?: Error) => {
      this.record({
        ...base,
        allowed: !error,
        rule: decision.rule,
        ...(error ? { reason: error.message } : {}),
        address,
        bytesOut,
        bytesIn,
      });
    });
    upstream.once('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.on('data', (chunk: Buffer) => (bytesIn += chunk.length));
      answer.pipe(res);
      answer.once('end', () => done());
      answer.once('error', (error) => done(error));
    });
    upstream.once('error', (error) => {
      if (!res.headersSent) res.writeHead(502, { connection: 'close' }).end();
      else res.destroy();
      done(error);
    });
    req.on('data', (chunk: Buffer) => (bytesOut += chunk.length));
    req.pipe(upstream);
  }

  /**
   * The sandbox has no name server: its resolver points here, and every query is refused
   * and logged, so a tool that tried DNS leaves a trace (the name comes from the query).
   */
  private async startDns(port: number): Promise<void> {
    const socket = createSocket('udp4');
    socket.on('message', (message, remote) => {
      if (!inSubnet(remote.address, this.options.clientSubnet)) return;
      const name = queryName(message) ?? '?';
      this.record({
        method: 'DNS',
        host: name,
        port: 53,
        allowed: false,
        rule: 'dns',
        reason: 'the sandbox has no DNS; only the proxy resolves names',
        bytesOut: message.length,
        bytesIn: 0,
      });
      if (message.length >= 12) {
        // Same id, QR=1, RCODE=5 (REFUSED), no records.
        const answer = Buffer.alloc(12);
        message.copy(answer, 0, 0, 2);
        answer[2] = 0x80 | (message[2]! & 0x01);
        answer[3] = 0x05;
        socket.send(answer, remote.port, remote.address);
      }
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(port, this.options.listenAddress, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    this.dns = socket;
  }
}

/** The first question's name of a DNS query, read defensively (bounded, no compression). */
export function queryName(message: Buffer): string | undefined {
  if (message.length < 13) return undefined;
  const labels: string[] = [];
  let offset = 12;
  while (offset < message.length && labels.length < 128) {
    const length = message[offset]!;
    if (length === 0) return labels.join('.');
    if (length > 63 || offset + 1 + length > message.length) return undefined;
    labels.push(
      message
        .subarray(offset + 1, offset + 1 + length)
        .toString('latin1')
        .replace(/[^\x21-\x7e]/g, '?'),
    );
    offset += 1 + length;
  }
  return undefined;
}

function once<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void {
  let called = false;
  return (...args: A) => {
    if (called) return;
    called = true;
    fn(...args);
  };
}
