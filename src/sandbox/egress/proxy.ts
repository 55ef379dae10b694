/**
 * The egress proxy of one sandbox: a process on the engine's host, listening only on the
 * address the host has on that sandbox's internal network. HTTP is parsed by Node's own
 * server (llhttp), not by hand: HTTP by its absolute URL, HTTPS by `CONNECT name:port`. The
 * proxy resolves every name itself with its own resolvers (never /etc/hosts, never the
 * sandbox), checks the addresses, and connects to exactly the address it checked, so a name
 * that re-resolves elsewhere later (DNS rebinding) changes nothing.
 */
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, isIP, type Socket } from 'node:net';
import { Resolver } from 'node:dns/promises';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import {
  addressGuard,
  decideName,
  type AddressGuard,
  type Decision,
  type EgressPolicy,
} from '../../egress-policy.js';

export interface EgressLogEntry {
  time: string;
  /** `CONNECT`, an HTTP method, or `DNS` for a query the sandbox sent to its name server. */
  method: string;
  host: string;
  port: number;
  allowed: boolean;
  /** The catalog rule that decided, or the check that refused (`ip-literal`, `address`, ...). */
  rule: string;
  reason?: string;
  /** The address the proxy connected to. */
  address?: string;
  bytesOut: number;
  bytesIn: number;
}

export interface EgressProxyOptions {
  policy: EgressPolicy;
  /** The host's address on the sandbox's network: the only one the proxy listens on. */
  listenAddress: string;
  port: number;
  /** Connections from anywhere else are refused (another run's sandbox, the host). */
  clientSubnet: { address: string; prefix: number };
  /** Addresses that are the proxy's own (all of the host's): never a destination. */
  ownAddresses: string[];
  /** Also answer DNS on listenAddress:53 with REFUSED, to log what the sandbox tried to resolve. */
  dnsPort?: number;
  maxLogEntries?: number;
  /** Per-connection idle limit. */
  idleMs?: number;
}

const MAX_LOG = 10_000;

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

export class EgressProxy {
  private readonly server: Server;
  private dns: UdpSocket | undefined;
  private readonly resolver = new Resolver({ timeout: 3000, tries: 2 });
  private readonly guard: AddressGuard;
  private readonly entries: EgressLogEntry[] = [];
  private readonly listeners = new Set<(entry: EgressLogEntry) => void>();
  private readonly sockets = new Set<Socket>();
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
    return `http://${this.options.listenAddress}:${this.options.port}`;
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
    this.dns?.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private record(entry: Omit<EgressLogEntry, 'time'>): void {
    const full = { time: new Date().toISOString(), ...entry };
    if (this.entries.length < (this.options.maxLogEntries ?? MAX_LOG)) this.entries.push(full);
    else this.dropped++;
    for (const listener of this.listeners) listener(full);
  }

  /** The name's addresses as the proxy's resolvers say; refused when any of them is forbidden. */
  private async resolve(host: string): Promise<{ address: string } | { reason: string }> {
    const [v4, v6] = await Promise.all([
      this.resolver.resolve4(host).catch(() => [] as string[]),
      this.resolver.resolve6(host).catch(() => [] as string[]),
    ]);
    const addresses = [...v4, ...v6];
    if (addresses.length === 0) return { reason: `${host} does not resolve` };
    for (const address of addresses) {
      const problem = this.guard.problem(address);
      if (problem) return { reason: `${host} resolves to ${problem}` };
    }
    return { address: addresses[0]! };
  }

  private async admit(host: string, port: number): Promise<{ decision: Decision; address?: string }> {
    const decision = decideName(this.options.policy, host, port);
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
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const { decision, address } = await this.admit(target.host, target.port);
    if (!decision.allowed || !address) {
      const reason = decision.allowed ? 'no address' : decision.reason;
      this.record({ ...base, allowed: false, rule: decision.rule, reason, bytesOut: 0, bytesIn: 0 });
      client.end(denial(reason));
      return;
    }
    const upstream = connect({ host: address, port: target.port });
    let bytesOut = head.length;
    let bytesIn = 0;
    let opened = false;
    upstream.setTimeout(this.options.idleMs ?? 120_000, () => upstream.destroy());
    upstream.once('connect', () => {
      opened = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      client.on('data', (chunk: Buffer) => (bytesOut += chunk.length));
      upstream.on('data', (chunk: Buffer) => (bytesIn += chunk.length));
      client.pipe(upstream);
      upstream.pipe(client);
    });
    const done = once(() => {
      client.destroy();
      upstream.destroy();
      this.record({
        ...base,
        host: target.host.toLowerCase(),
        allowed: opened,
        rule: decision.rule,
        ...(opened ? {} : { reason: `cannot connect to ${address}:${target.port}` }),
        address,
        bytesOut,
        bytesIn,
      });
    });
    upstream.once('error', () => {
      if (!opened) client.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n');
      done();
    });
    upstream.once('close', done);
    client.once('error', done);
    client.once('close', done);
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
    // The Host header must name what the URL names: a server must not be told another name.
    const hostHeader = (req.headers.host ?? '').toLowerCase();
    const { decision, address } =
      hostHeader !== '' && hostHeader !== url.host.toLowerCase()
        ? {
            decision: {
              allowed: false as const,
              rule: 'host-header',
              reason: `Host ${hostHeader} differs from the URL's ${url.host}`,
            },
            address: undefined,
          }
        : await this.admit(host, port);
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
    for (const name of ['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive'])
      delete headers[name];
    let bytesOut = 0;
    let bytesIn = 0;
    const upstream = httpRequest({
      host: address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: { ...headers, host: url.host },
      setHost: false,
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

function denial(reason: string): string {
  const body = `sandbox-harness egress denied: ${reason}\n`;
  return `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Sandbox-Harness-Egress: denied\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

function once<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void {
  let called = false;
  return (...args: A) => {
    if (called) return;
    called = true;
    fn(...args);
  };
}
