/**
 * Egress by name on real Docker, against a fake internet (tests/helpers/fake-internet.ts):
 * the sandbox sits on an internal network whose only way out is its proxy on the host, and
 * the proxy resolves names with the test's dnsmasq only. Every way around the proxy fails,
 * and everything that reaches the proxy or its name server leaves a log line. A name is
 * judged at every layer that carries one (CONNECT line, TLS server name, every Host header)
 * and every address against what the host has at that moment.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { connect as connectSocket } from 'node:net';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixDeps } from '../../src/fix/deps.js';
import { runFix } from '../../src/fix/run-fix.js';
import { sandboxProvider } from '../../src/sandbox/backend-registry.js';
import { runCli } from '../helpers/cli.js';
import { scripted, text, toolUse } from '../unit/agent/helpers.js';
import { promisify } from 'node:util';
import { collectGarbage, reapOrphans } from '../../src/sandbox/docker/operator/collect-garbage.js';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { BUILD_NETWORK_LABEL } from '../../src/sandbox/docker/labels.js';
import { buildRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import type { EgressPolicy } from '../../src/egress-policy.js';
import { EgressProxy, type EgressLogEntry } from '../../src/sandbox/egress/proxy.js';
import { canonicalAddress, listedHostAddress } from '../../src/sandbox/egress/addresses.js';
import type { Sandbox } from '../../src/sandbox/types.js';
import { requireDocker } from '../helpers/docker.js';
import { startFakeInternet, type FakeInternet } from '../helpers/fake-internet.js';
import { clientHello } from '../helpers/tls-hello.js';

const IMAGE = 'sandbox-harness/base-node:20';
const PROBE = '/opt/egress-test/probe.mjs';
const CA = '/opt/egress-test/ca.pem';
const RUN_ID = `egress-test-${process.pid}`;

let net: FakeInternet;
let sandbox: Sandbox;
const made: Sandbox[] = [];

function policy(internet: FakeInternet): EgressPolicy {
  return {
    allow: [
      { host: 'allowed.fake.test', ports: [443, 80] },
      { host: 'loop.fake.test', ports: [443] },
      { host: 'self.fake.test', ports: [443] },
      { host: '*.zone.fake.test', ports: [443] },
      { host: 'registry.fake.test', ports: [80] },
      { host: 'later.fake.test', ports: [80] },
      { host: 'dark.fake.test', ports: [80] },
    ],
    deny: [{ host: '*.zone.fake.test', ports: [443], except: ['open.zone.fake.test'] }],
    privateRanges: [internet.range],
    resolvers: [internet.resolver],
  };
}

async function make(egress: EgressPolicy | undefined, role = 'egress'): Promise<Sandbox> {
  const s = await dockerBackend().create({
    image: IMAGE,
    runId: RUN_ID,
    role,
    env: { NODE_EXTRA_CA_CERTS: CA },
    files: [
      {
        path: PROBE,
        content: await readFile(new URL('../fixtures/egress/probe.mjs', import.meta.url), 'utf8'),
      },
      { path: CA, content: net.caPem },
    ],
    ...(egress ? { egress } : {}),
  });
  made.push(s);
  return s;
}

async function probe(
  s: Sandbox,
  ...args: string[]
): Promise<{ ok: boolean; status?: number; body?: string; error?: string }> {
  const result = await s.exec(`node ${PROBE} ${args.join(' ')}`, { timeoutMs: 20_000 });
  const line = result.stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line) as { ok: boolean };
  } catch {
    throw new Error(`probe ${args.join(' ')}: ${result.stdout} ${result.stderr}`);
  }
}

function lastEntry(s: Sandbox, host: string): EgressLogEntry | undefined {
  return (s.egressLog?.() ?? []).filter((e) => e.host === host).pop();
}

beforeAll(async () => {
  await requireDocker();
  net = await startFakeInternet();
  sandbox = await make(policy(net));
}, 120_000);

afterAll(async () => {
  await Promise.all(made.map((s) => s.dispose().catch(() => undefined)));
  await net?.stop();
});

describe('egress through the proxy, on a fake internet', () => {
  it('the sandbox learns the proxy URL and nothing else', async () => {
    const env = (await sandbox.exec('env', { timeoutMs: 10_000 })).stdout;
    const proxy = /^HTTPS_PROXY=(.*)$/m.exec(env)?.[1];
    expect(proxy).toMatch(/^http:\/\/10\.213\.\d+\.\d+:3128$/);
    expect(env).toMatch(/^NO_PROXY=/m);
    const resolv = (await sandbox.exec('cat /etc/resolv.conf', { timeoutMs: 10_000 })).stdout;
    expect(resolv).not.toContain(net.resolver);
  });

  it('an allowed name over HTTPS works and is logged with its rule and bytes', async () => {
    const result = await probe(sandbox, 'https', 'allowed.fake.test');
    expect(result.ok, JSON.stringify(result)).toBe(true);
    expect(result.body).toContain('hello from allowed.fake.test');
    // A tunnel is logged when it closes, which the proxy may see a moment after the client ended.
    await until(() => lastEntry(sandbox, 'allowed.fake.test') !== undefined, 10_000);
    const entry = lastEntry(sandbox, 'allowed.fake.test');
    expect(entry).toMatchObject({
      method: 'CONNECT',
      port: 443,
      allowed: true,
      rule: 'allow allowed.fake.test:443,80',
      address: net.address,
    });
    expect(entry!.bytesIn).toBeGreaterThan(0);
    expect(entry!.bytesOut).toBeGreaterThan(0);
  });

  it('plain HTTP to an allowed name works by its URL', async () => {
    const result = await probe(sandbox, 'http', 'http://allowed.fake.test/hello');
    expect(result.ok, JSON.stringify(result)).toBe(true);
    expect(lastEntry(sandbox, 'allowed.fake.test')).toMatchObject({ method: 'GET', port: 80, allowed: true });
  });

  const refusals: Array<[string, string[], string, RegExp]> = [
    ['a name not allowed', ['https', 'other.fake.test'], 'other.fake.test', /not in the catalog/],
    ['an IP literal', ['https', '__ADDRESS__'], '__ADDRESS__', /IP address/],
    ['a name that resolves to 127.0.0.1', ['https', 'loop.fake.test'], 'loop.fake.test', /127\.0\.0\.1/],
    [
      "a name that resolves to the proxy's own address",
      ['https', 'self.fake.test'],
      'self.fake.test',
      /proxy's own address/,
    ],
    [
      'another port of an allowed name',
      ['https', 'allowed.fake.test', '8443'],
      'allowed.fake.test',
      /port 443, 80 only, not 8443/,
    ],
    [
      'a name the deny rule covers despite the allow',
      ['https', 'secret.zone.fake.test'],
      'secret.zone.fake.test',
      /denied by the catalog/,
    ],
  ];
  for (const [what, args, host, reason] of refusals) {
    it(`${what} is refused with a log line`, async () => {
      const real = (s: string) => s.replace('__ADDRESS__', net.address);
      const result = await probe(sandbox, ...args.map(real));
      expect(result.ok).toBe(false);
      expect(result.status).toBe(403);
      expect(result.body).toMatch(reason);
      const entry = lastEntry(sandbox, real(host));
      expect(entry).toMatchObject({ allowed: false });
      expect(entry!.reason).toMatch(reason);
    });
  }

  it("the deny rule's exception still gets through", async () => {
    const result = await probe(sandbox, 'https', 'open.zone.fake.test');
    expect(result.ok, JSON.stringify(result)).toBe(true);
    expect(lastEntry(sandbox, 'open.zone.fake.test')).toMatchObject({
      allowed: true,
      rule: 'allow *.zone.fake.test:443',
    });
  });

  it('raw TCP and UDP to the server, and DNS from the sandbox, all fail', async () => {
    expect((await probe(sandbox, 'tcp', net.address, '7000')).ok).toBe(false);
    expect((await probe(sandbox, 'tcp', net.address, '443')).ok).toBe(false);
    expect((await probe(sandbox, 'udp', net.address, '7001')).ok).toBe(false);
    expect((await probe(sandbox, 'dns', 'allowed.fake.test')).ok).toBe(false);
    // The sandbox's only name server is the proxy's, which refuses and logs.
    expect(lastEntry(sandbox, 'allowed.fake.test')).toMatchObject({ method: 'DNS', allowed: false });
    // Nothing of these reached the servers: only what the proxy allowed did.
    expect(net.requests().every((r) => /allowed\.fake\.test|open\.zone\.fake\.test/.test(r))).toBe(true);
  });

  it('raw TCP and UDP that never reach the proxy each leave a log line, read from the kernel log', async () => {
    expect((await probe(sandbox, 'tcp', net.address, '7010')).ok).toBe(false);
    expect((await probe(sandbox, 'udp', net.address, '7011')).ok).toBe(false);
    const bypass = (method: string, port: number) =>
      (sandbox.egressLog?.() ?? []).filter(
        (e) => e.method === method && e.host === net.address && e.port === port && !e.allowed,
      );
    // A connection attempt the kernel retried is still one line.
    expect(bypass('TCP', 7010)).toHaveLength(1);
    expect(bypass('TCP', 7010)[0]).toMatchObject({ rule: 'no-proxy', address: net.address });
    expect(bypass('TCP', 7010)[0]!.reason).toMatch(/TCP packet to .*:7010 that did not go through the proxy/);
    expect(bypass('UDP', 7011)).toHaveLength(1);
  });

  it('a flood past the proxy is counted in full when the sandbox goes, past what the rate limit logs', async () => {
    const flood = await make(policy(net), 'flood');
    const send = `const s=require('dgram').createSocket('udp4');let i=0;const go=()=>{if(i++<300)s.send('x',7012,'${net.address}',go);else s.close()};go()`;
    expect((await flood.exec(`node -e "${send}"`, { timeoutMs: 30_000 })).exitCode).toBe(0);
    const [network] = await dockerEngine().networks.list({ [LABEL.run]: RUN_ID, [LABEL.role]: 'flood' });
    expect(await rawRules()).toContain(network!.bridgeName);
    await flood.dispose();
    const log = flood.egressLog!();
    expect(log.filter((e) => e.method === 'UDP' && e.port === 7012)).toHaveLength(1);
    const account = log.find((e) => e.method === 'PACKETS');
    expect(account, JSON.stringify(log.slice(-3))).toBeDefined();
    expect(Number(/^(\d+) packet/.exec(account!.reason ?? '')?.[1])).toBeGreaterThanOrEqual(300);
    // Its rules went with it.
    expect(await rawRules()).not.toContain(network!.bridgeName);
  });

  it('the host is not reachable from the sandbox, not even on the gateway address', async () => {
    const proxy = /HTTPS_PROXY=http:\/\/([\d.]+):/.exec(
      (await sandbox.exec('env', { timeoutMs: 10_000 })).stdout,
    )?.[1];
    expect(proxy).toBeDefined();
    // Docker's own embedded DNS, sshd, a dev server: anything on the host but the proxy port.
    for (const port of ['22', '80', '2375', '53'])
      expect((await probe(sandbox, 'tcp', proxy!, port)).ok).toBe(false);
    expect((await probe(sandbox, 'tcp', net.hostAddress, '3128')).ok).toBe(false);
  });

  it('npm install of a package from a registry stand-in works with egress to it only', async () => {
    const npm = await make(
      { ...policy(net), allow: [{ host: 'registry.fake.test', ports: [443] }] },
      'egress-npm',
    );
    const result = await npm.exec(
      'cd /tmp && mkdir app && cd app && echo {} > package.json && npm install --no-audit --no-fund --registry https://registry.fake.test/ tiny-pkg && node -e "console.log(require(\'tiny-pkg\'))"',
      { timeoutMs: 120_000 },
    );
    expect(result.exitCode, result.stderr + result.stdout).toBe(0);
    expect(result.stdout).toContain('tiny from the fake registry');
    expect(npm.egressLog!().some((e) => e.host === 'registry.fake.test' && e.allowed)).toBe(true);
    expect(npm.egressLog!().every((e) => e.host === 'registry.fake.test')).toBe(true);
  }, 180_000);

  it('a sandbox without egress has no network at all', async () => {
    const plain = await make(undefined, 'plain');
    expect(plain.egressLog).toBeDefined();
    expect(plain.egressLog!()).toEqual([]);
    const details = await dockerEngine().containers.inspect(plain.id);
    expect(details?.hostConfig.NetworkMode).toBe('none');
    expect((await probe(plain, 'tcp', net.address, '443')).ok).toBe(false);
  });

  it('disposing removes the network and its proxy; nothing labelled for the run is left', async () => {
    const short = await make(policy(net), 'short');
    const networks = await dockerEngine().networks.list({ [LABEL.run]: RUN_ID });
    expect(networks.length).toBeGreaterThanOrEqual(2);
    await short.dispose();
    const after = await dockerEngine().networks.list({ [LABEL.run]: RUN_ID });
    expect(after.length).toBe(networks.length - 1);
  });
});

/** Answers of `probe raw`: each step's bytes written once the step before was answered. */
async function raw(
  s: Sandbox,
  ...steps: Array<string | Buffer>
): Promise<{ replies: Buffer[]; closed: boolean }> {
  const args = steps.map((step) => Buffer.from(step).toString('base64'));
  const result = await s.exec(`node ${PROBE} raw ${args.join(' ')}`, { timeoutMs: 20_000 });
  const line = result.stdout.trim().split('\n').pop() ?? '';
  const parsed = JSON.parse(line) as { replies: string[]; closed: boolean };
  return { replies: parsed.replies.map((r) => Buffer.from(r, 'base64')), closed: parsed.closed };
}

const connectTo = (target: string) => `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`;
const get = (url: string, ...hosts: string[]) =>
  `GET ${url} HTTP/1.1\r\n${hosts.map((h) => `Host: ${h}\r\n`).join('')}\r\n`;
const alert = (code: number) => Buffer.from([21, 3, 3, 0, 2, 2, code]);
const statusOf = (reply: Buffer | undefined) =>
  Number(/^HTTP\/1\.1 (\d{3})/.exec(reply?.toString() ?? '')?.[1]);
const isRetryRequest = (reply: Buffer | undefined) =>
  reply !== undefined &&
  reply[0] === 22 &&
  reply.includes(Buffer.from('cf21ad74e59a6111be1d8c021e65b891', 'hex'));
/** The client port the fake internet saw a request on (`METHOD host path via port`). */
const via = (lines: string[], pattern: RegExp) => lines.find((l) => pattern.test(l))?.split(' via ')[1];

describe('egress by name at every layer', () => {
  it('a tunnel whose TLS server name is another host than its CONNECT name (domain fronting) is refused before the server hears of it', async () => {
    const before = net.requests().length;
    const fronted = await probe(sandbox, 'https', 'allowed.fake.test', '443', 'other.fake.test');
    expect(fronted.ok).toBe(false);
    expect(fronted.body ?? '').not.toContain('hello from other.fake.test');
    expect(fronted.error).toMatch(/unrecognized name/i);
    const entry = lastEntry(sandbox, 'allowed.fake.test');
    expect(entry).toMatchObject({ method: 'CONNECT', allowed: false, rule: 'tls-sni', address: net.address });
    expect(entry!.reason).toMatch(/names other\.fake\.test \(SNI\), not allowed\.fake\.test/);
    expect(net.requests().slice(before)).toEqual([]);
    // The same name on the CONNECT line, in the hello and in Host still goes through.
    const same = await probe(sandbox, 'https', 'allowed.fake.test', '443', 'ALLOWED.fake.test');
    expect(same.ok, JSON.stringify(same)).toBe(true);
  });

  it('a ClientHello without a server name, or with an encrypted one (ECH), is refused with a TLS alert', async () => {
    const cases: Array<[Buffer, string]> = [
      [clientHello({ serverName: null }), 'tls-no-sni'],
      [clientHello({ serverName: 'allowed.fake.test', ech: true }), 'tls-ech'],
    ];
    for (const [hello, rule] of cases) {
      const { replies, closed } = await raw(sandbox, connectTo('allowed.fake.test:443'), hello);
      expect(statusOf(replies[0])).toBe(200);
      expect(replies[1], rule).toEqual(alert(49));
      expect(closed).toBe(true);
      expect(lastEntry(sandbox, 'allowed.fake.test')).toMatchObject({ allowed: false, rule });
    }
  });

  it('after a HelloRetryRequest, a second ClientHello naming another host is refused; one naming the same host goes on', async () => {
    // The first hello has no key share, so the real server asks for a retry.
    const retried = (second: string) =>
      raw(
        sandbox,
        connectTo('allowed.fake.test:443'),
        clientHello({ serverName: 'allowed.fake.test', emptyKeyShare: true }),
        clientHello({ serverName: second }),
      );
    const swapped = await retried('other.fake.test');
    expect(isRetryRequest(swapped.replies[1])).toBe(true);
    // ...and the second hello, naming another host, never reached it.
    expect(swapped.replies[2]).toEqual(alert(112));
    expect(swapped.closed).toBe(true);
    const entry = lastEntry(sandbox, 'allowed.fake.test');
    expect(entry).toMatchObject({ allowed: false, rule: 'tls-sni' });
    expect(entry!.reason).toMatch(/second ClientHello .*names other\.fake\.test/);
    const kept = await retried('allowed.fake.test');
    expect(isRetryRequest(kept.replies[1])).toBe(true);
    // A ServerHello (handshake record, message type 2), not an alert.
    expect([kept.replies[2]?.[0], kept.replies[2]?.[5]]).toEqual([22, 2]);
  });

  it('a tunnel that carries plain HTTP is refused with a 403 inside it; no request of it reaches a server', async () => {
    const before = net.requests().length;
    const { replies, closed } = await raw(
      sandbox,
      connectTo('allowed.fake.test:80'),
      get('/first', 'allowed.fake.test'),
      get('/second', 'other.fake.test'),
    );
    expect(statusOf(replies[0])).toBe(200);
    expect(statusOf(replies[1])).toBe(403);
    expect(replies[1]!.toString()).toMatch(/plain HTTP.*absolute URL/);
    expect(closed).toBe(true);
    expect(replies).toHaveLength(2);
    expect(lastEntry(sandbox, 'allowed.fake.test')).toMatchObject({ allowed: false, rule: 'tunnel-not-tls' });
    expect(net.requests().slice(before)).toEqual([]);
  });

  it('plain HTTP: every request of a kept-alive connection is judged, and each allowed name has upstream connections of its own', async () => {
    const before = net.requests().length;
    const { replies, closed } = await raw(
      sandbox,
      get('http://allowed.fake.test/one', 'allowed.fake.test'),
      get('http://registry.fake.test/two', 'registry.fake.test'),
      get('http://allowed.fake.test/three', 'other.fake.test'),
      get('http://allowed.fake.test/four', 'allowed.fake.test'),
    );
    expect(replies.map(statusOf)).toEqual([200, 200, 403]);
    expect(replies[1]!.toString()).toContain('hello from registry.fake.test');
    expect(closed).toBe(true);
    const seen = net.requests().slice(before);
    const one = via(seen, /^GET allowed\.fake\.test \/one /);
    const two = via(seen, /^GET registry\.fake\.test \/two /);
    expect(one).toBeDefined();
    expect(two).toBeDefined();
    // A request for another name never rides on the first name's upstream connection.
    expect(two).not.toBe(one);
    expect(seen.filter((l) => /\/three|\/four|other\.fake\.test/.test(l))).toEqual([]);
    expect(lastEntry(sandbox, 'allowed.fake.test')).toMatchObject({ allowed: false, rule: 'host-header' });
  });

  it('plain HTTP: the Host header names what the URI names (one Host header; its name and port)', async () => {
    const before = net.requests().length;
    const agree = await raw(
      sandbox,
      get('http://allowed.fake.test/a', 'ALLOWED.fake.test.:80'),
      get('http://allowed.fake.test/b', 'allowed.fake.test', 'other.fake.test'),
    );
    expect(agree.replies.map(statusOf)).toEqual([200, 403]);
    expect(agree.replies[1]!.toString()).toMatch(/2 Host headers/);
    const differ = await raw(sandbox, get('http://allowed.fake.test/c', 'other.fake.test'));
    expect(differ.replies.map(statusOf)).toEqual([403]);
    expect(differ.replies[0]!.toString()).toMatch(
      /Host other\.fake\.test differs from the URL's allowed\.fake\.test/,
    );
    const elsewhere = await raw(sandbox, get('http://allowed.fake.test/d', 'allowed.fake.test:8080'));
    expect(elsewhere.replies.map(statusOf)).toEqual([403]);
    const seen = net.requests().slice(before);
    expect(seen.filter((l) => / \/a via /.test(l))).toHaveLength(1);
    expect(seen.filter((l) => / \/[bcd] via /.test(l))).toEqual([]);
  });

  it("an allowed name that resolves to an address the host got after the proxy started is refused (with carrier or without, when Node's interface list leaves it out)", async () => {
    for (const which of ['later', 'dark'] as const) {
      const added = await net.addHostAddress(which);
      const listed = Object.values(networkInterfaces()).some((list) =>
        (list ?? []).some((a) => a.address === added.address),
      );
      expect(listed, `${which}: in os.networkInterfaces()`).toBe(which === 'later');
      // Where a bind proves nothing (non-local binds allowed), the kernel's lists have it too.
      expect(listedHostAddress(canonicalAddress(added.address)!)).toMatch(/this host/);
      // A service of the host's, listening on that address.
      const hits: string[] = [];
      const service = createServer((req, res) => {
        hits.push(req.url ?? '');
        res.end('a service of the host\n');
      });
      try {
        await new Promise<void>((resolve) => service.listen(80, added.address, resolve));
        const result = await probe(sandbox, 'http', `http://${which}.fake.test/secret`);
        expect(result.status, JSON.stringify(result)).toBe(403);
        expect(result.body).toMatch(
          new RegExp(`${added.address.replace(/\./g, '\\.')}, the proxy's own address`),
        );
        expect(lastEntry(sandbox, `${which}.fake.test`)).toMatchObject({ allowed: false, rule: 'address' });
        expect(hits).toEqual([]);
      } finally {
        await new Promise((resolve) => service.close(resolve));
        await added.remove();
      }
    }
  });
});

describe('the proxy itself, on the fake internet', () => {
  let proxy: EgressProxy;
  const HANDSHAKE_MS = 1500;

  beforeAll(async () => {
    proxy = new EgressProxy({
      policy: {
        allow: [
          { host: 'allowed.fake.test', ports: [443, 7002] },
          { host: '*.fake.test', ports: [443] },
        ],
        deny: [],
        // Every range named: what is never reachable stays so whatever the catalog says.
        privateRanges: ['0.0.0.0/0', '::/0'],
        resolvers: [net.resolver],
      },
      listenAddress: '127.0.0.1',
      port: 0,
      clientSubnet: { address: '127.0.0.0', prefix: 8 },
      ownAddresses: [],
      handshakeMs: HANDSHAKE_MS,
    });
    await proxy.start();
  });

  afterAll(async () => {
    await proxy?.close();
  });

  /** A raw connection to the proxy; `send` writes and waits for the answer (or quiet). */
  async function session(): Promise<{
    send(bytes: string | Buffer, quietMs?: number): Promise<Buffer>;
    closed(): boolean;
    end(): void;
  }> {
    const { port } = new URL(proxy.url);
    const socket = connectSocket(Number(port), '127.0.0.1');
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    let pending: Buffer[] = [];
    let closed = false;
    socket.on('data', (chunk: Buffer) => pending.push(chunk));
    socket.on('close', () => (closed = true));
    socket.on('error', () => undefined);
    return {
      async send(bytes, quietMs = 300) {
        pending = [];
        if (bytes.length > 0) socket.write(bytes);
        await new Promise((resolve) => setTimeout(resolve, quietMs));
        return Buffer.concat(pending);
      },
      closed: () => closed,
      end: () => socket.destroy(),
    };
  }

  const entryOf = (host: string) =>
    proxy
      .log()
      .filter((e) => e.host === host)
      .pop();

  it('never connects to loopback, link-local, or their IPv6 and IPv4-mapped forms, even where privateRanges names every range', async () => {
    const cases: Array<[string, RegExp]> = [
      ['loop.fake.test', /127\.0\.0\.1 is a loopback address/],
      ['v6loop.fake.test', /::1 is a loopback address/],
      ['v6link.fake.test', /fe80::1 is a link-local address/],
      ['v6mapped.fake.test', /127\.0\.0\.1 is a loopback address/],
      ['v6compat.fake.test', /IPv4-compatible/],
      // One good address and one forbidden: every address a name resolves to is checked.
      ['mixed.fake.test', /::1 is a loopback address/],
    ];
    for (const [name, reason] of cases) {
      const s = await session();
      const answer = await s.send(connectTo(`${name}:443`));
      s.end();
      expect(statusOf(answer), name).toBe(403);
      expect(answer.toString(), name).toMatch(reason);
      expect(entryOf(name), name).toMatchObject({ allowed: false, rule: 'address' });
    }
  });

  it('no byte reaches the server before the ClientHello is judged, and none of a refused one', async () => {
    const hello = clientHello({ serverName: 'allowed.fake.test' });
    const sink = () => net.requests().filter((l) => l.startsWith('SINK '));
    const before = sink().length;
    const s = await session();
    expect(statusOf(await s.send(connectTo('allowed.fake.test:7002')))).toBe(200);
    await s.send(hello.subarray(0, 40));
    expect(
      sink()
        .slice(before)
        .filter((l) => /bytes/.test(l)),
    ).toEqual([]);
    await s.send(hello.subarray(40));
    const bytes = sink()
      .slice(before)
      .map((l) => Number(/^SINK (\d+) bytes/.exec(l)?.[1] ?? 0))
      .reduce((a, b) => a + b, 0);
    expect(bytes).toBe(hello.length);
    s.end();
    const refusedBefore = sink().length;
    const r = await session();
    await r.send(connectTo('allowed.fake.test:7002'));
    expect(await r.send(clientHello({ serverName: 'other.fake.test' }, 64))).toEqual(alert(112));
    r.end();
    expect(
      sink()
        .slice(refusedBefore)
        .filter((l) => /bytes/.test(l)),
    ).toEqual([]);
  });

  it('a tunnel whose client sends no TLS hello is closed at the deadline, with the reason in the log', async () => {
    const s = await session();
    expect(statusOf(await s.send(connectTo('allowed.fake.test:443')))).toBe(200);
    await s.send('', HANDSHAKE_MS + 500);
    expect(s.closed()).toBe(true);
    const entry = entryOf('allowed.fake.test');
    expect(entry).toMatchObject({ allowed: false, rule: 'tls-handshake' });
    expect(entry!.reason).toMatch(/client sent nothing within 1\.5 s/);
  });
});

describe('egress clean-up', () => {
  it('gc reaps the network and firewall hole of a run killed with SIGKILL', async () => {
    const runId = `egress-kill-${process.pid}`;
    // A child process makes an egress sandbox and is killed before it can clean up.
    const script = `
      import { dockerBackend } from './src/sandbox/docker/docker-sandbox.ts';
      const s = await dockerBackend().create({ image: '${IMAGE}', runId: '${runId}', role: 'attempt-1',
        egress: { allow: [], deny: [], privateRanges: [], resolvers: ['${net.resolver}'] } });
      process.stdout.write('made ' + s.id + '\\n');
      setInterval(() => undefined, 1000);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: new URL('../..', import.meta.url).pathname,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    await until(() => out.includes('made '), 60_000);
    expect(out).toContain('made ');
    const [network] = await dockerEngine().networks.list({ [LABEL.run]: runId });
    expect(network).toBeDefined();
    expect(await firewallRules()).toContain(network!.bridgeName);
    expect(await rawRules()).toContain(network!.bridgeName);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // The next harness process's reaper (the first create, or `gc`) removes all of it.
    await reapOrphans(dockerEngine());
    expect(await dockerEngine().containers.list({ [LABEL.run]: runId })).toEqual([]);
    expect(await dockerEngine().networks.list({ [LABEL.run]: runId })).toEqual([]);
    expect(await firewallRules()).not.toContain(network!.bridgeName);
    expect(await rawRules()).not.toContain(network!.bridgeName);
  }, 120_000);

  it('many sandboxes in a row do not use up the engine address pools', async () => {
    // 40 networks at once would exhaust dockerd's default pools (31 /16s and /20s);
    // egress subnets come from the harness's own range.
    const boxes = await Promise.all(
      Array.from({ length: 40 }, async (_, i) =>
        dockerBackend().create({ image: IMAGE, runId: RUN_ID, role: `pool-${i}`, egress: policy(net) }),
      ),
    );
    made.push(...boxes);
    const networks = await dockerEngine().networks.list({ [LABEL.run]: RUN_ID });
    expect(networks.length).toBeGreaterThanOrEqual(40);
    await Promise.all(boxes.map((b) => b.dispose()));
    const after = await dockerEngine().networks.list({ [LABEL.run]: RUN_ID });
    expect(after.length).toBe(networks.length - 40);
  }, 300_000);
});

async function rawRules(): Promise<string> {
  const { stdout } = await promisify(execFile)('iptables', ['-w', '5', '-t', 'raw', '-S']);
  return stdout;
}

async function firewallRules(): Promise<string> {
  const { stdout } = await promisify(execFile)('iptables', ['-w', '5', '-S', 'SANDBOX-HARNESS-EGRESS']);
  return stdout;
}

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition() && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
}

describe('egress in a fix run', () => {
  it("the agent's sandbox has egress, the baseline's and the verification's none; a denial reaches the model; the record, inspect and logs show the log", async () => {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-egress-fix-'));
    try {
      const repo = join(root, 'repo');
      await mkdir(join(repo, 'src'), { recursive: true });
      await writeFile(join(repo, 'package.json'), '{"name":"egress-fix","version":"1.0.0","private":true}\n');
      await writeFile(join(repo, 'src', 'value.js'), "module.exports = 'broken';\n");
      await writeFile(join(repo, 'test-ca.crt'), net.caPem);
      await writeFile(
        join(repo, 'probe.mjs'),
        await readFile(new URL('../fixtures/egress/probe.mjs', import.meta.url), 'utf8'),
      );
      // Passes only with the fix AND without any network: a verdict must not depend on it.
      await writeFile(
        join(repo, 'test.js'),
        [
          "if (require('./src/value.js') !== 'fixed') { console.error('not fixed'); process.exit(1); }",
          "if (process.env.HTTPS_PROXY || process.env.HTTP_PROXY) { console.error('the tests have a proxy'); process.exit(2); }",
          `const s = require('net').connect(443, '${net.address}');`,
          's.setTimeout(2000, () => process.exit(0));',
          "s.on('connect', () => { console.error('the tests reached the network'); process.exit(3); });",
          "s.on('error', () => process.exit(0));",
          '',
        ].join('\n'),
      );
      const catalog = join(root, 'catalog.yaml');
      await writeFile(
        catalog,
        [
          'name: egress-fix',
          'owner: tests',
          'repo: repo',
          'rules: {}',
          'agent:',
          '  editableFiles: ["src/**"]',
          '  testCommand: node test.js',
          '  maxAttempts: 1',
          '  maxTurns: 6',
          'sandbox:',
          '  env: { NODE_EXTRA_CA_CERTS: /workspace/test-ca.crt }',
          '  timeouts: { commandSec: 60, testSec: 60 }',
          '  egress:',
          '    allow: [allowed.fake.test]',
          `    privateRanges: ["${net.range}"]`,
          `    resolvers: ["${net.resolver}"]`,
          '',
        ].join('\n'),
      );
      const provider = scripted([
        { content: [toolUse('a', 'run_command', { command: 'node probe.mjs https allowed.fake.test' })] },
        { content: [toolUse('b', 'run_command', { command: 'node probe.mjs https other.fake.test' })] },
        {
          content: [
            toolUse('c', 'write_file', { path: 'src/value.js', content: "module.exports = 'fixed';\n" }),
          ],
        },
        { content: [text('done')] },
      ]);
      const result = await runFix(
        {
          ticket: 'Fix the value.',
          catalogFile: catalog,
          keep: 'always',
          apply: false,
          force: false,
          rebuild: false,
          cwd: root,
          env: {},
          signal: new AbortController().signal,
          readStdin: async () => '',
          provider: 'replay',
        },
        fixDeps(await sandboxProvider(), { createProvider: async () => provider }),
      );
      try {
        expect(result.outcome, result.record.message).toBe('ready-for-review');
        expect(result.record.baseline?.failing).toBe(true);
        // The model saw its own command's output and the proxy's reason.
        expect(JSON.stringify(provider.requests[1]?.messages.at(-1))).toContain(
          'hello from allowed.fake.test',
        );
        const denial = JSON.stringify(provider.requests[2]?.messages.at(-1));
        expect(denial).toContain('egress denied');
        expect(denial).toContain("other.fake.test is not in the catalog's sandbox.egress.allow");
        // Kept sandboxes: the attempt's on its egress network, the verification's on none.
        const attempt = result.record.containers.find((c) => c.role === 'attempt-1')!;
        const verify = result.record.containers.find((c) => c.role === 'verify-1')!;
        expect((await dockerEngine().containers.inspect(attempt.id))?.hostConfig.NetworkMode).toMatch(
          /^sandbox-harness-/,
        );
        expect((await dockerEngine().containers.inspect(verify.id))?.hostConfig.NetworkMode).toBe('none');
        expect(attempt.egress).toEqual({ allowed: 1, denied: 1, file: 'egress/attempt-1.jsonl' });
        expect(verify.egress).toBeUndefined();
        const runs = join(repo, '.sandbox-harness', 'runs');
        const logs = await runCli(['logs', result.runId, '--runs-dir', runs]);
        expect(logs.stdout).toMatch(
          /\[egress attempt-1\] allowed CONNECT allowed\.fake\.test:443 +allow allowed\.fake\.test:443,80, \d+ B out, \d+ B in/,
        );
        expect(logs.stdout).toMatch(
          /\[egress attempt-1\] denied {2}CONNECT other\.fake\.test:443 +other\.fake\.test is not in/,
        );
        const inspect = await runCli(['inspect', result.runId, '--runs-dir', runs]);
        expect(inspect.stdout).toMatch(/egress \(proxy logs.*\n +attempt-1 +1 allowed, 1 denied/);
      } finally {
        const report = await collectGarbage(dockerEngine(), { runId: result.runId });
        expect(report.networks?.length).toBe(1);
        expect(await dockerEngine().networks.list({ [LABEL.run]: result.runId })).toEqual([]);
      }
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }, 300_000);
});

describe('egress in an image build', () => {
  it("npm install in the recipe reaches the registry stand-in through the build's own proxy, and nothing else", async () => {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-egress-build-'));
    const lines: string[] = [];
    let tag: string | undefined;
    try {
      const repo = join(root, 'repo');
      await mkdir(repo);
      await writeFile(
        join(repo, 'package.json'),
        '{"name":"egress-build","version":"1.0.0","private":true}\n',
      );
      await writeFile(join(repo, 'test-ca.crt'), net.caPem);
      await writeFile(
        join(repo, 'probe.mjs'),
        await readFile(new URL('../fixtures/egress/probe.mjs', import.meta.url), 'utf8'),
      );
      await writeFile(
        join(repo, 'Dockerfile.sandbox'),
        [
          `ARG BASE_IMAGE=${IMAGE}`,
          'FROM ${BASE_IMAGE}',
          'COPY --chown=1000:1000 . /workspace',
          'USER sandbox',
          'WORKDIR /workspace',
          'RUN NODE_EXTRA_CA_CERTS=/workspace/test-ca.crt npm install --no-audit --no-fund --registry https://registry.fake.test/ tiny-pkg && node -e "console.log(require(\'tiny-pkg\'))"',
          // Every other way out, from a build step: printed, never failing the build. (Not DNS: the
          // builder's steps ask Docker's embedded DNS, which would send the host's resolver a packet.)
          `RUN for a in "https other.fake.test" "https allowed.fake.test" "tcp ${net.address} 7000" "udp ${net.address} 7001"; do echo "probe $a: $(NODE_EXTRA_CA_CERTS=/workspace/test-ca.crt node probe.mjs $a)"; done`,
          '',
        ].join('\n'),
      );
      const before = net.requests().length;
      const image = await buildRepoImage({
        repoDir: repo,
        buildEgress: { ...policy(net), allow: [{ host: 'registry.fake.test', ports: [443] }] },
        rebuild: true,
        onProgress: (line) => lines.push(line),
      });
      tag = image.tag;
      const output = lines.join('\n');
      expect(output).toContain('tiny from the fake registry');
      expect(output).toMatch(
        /# egress allowed CONNECT registry\.fake\.test:443 allow registry\.fake\.test:443/,
      );
      expect(output).toMatch(
        /# egress denied CONNECT other\.fake\.test:443 other\.fake\.test is not in the catalog's sandbox\.egress\.allow/,
      );
      expect(output).toMatch(/# egress denied CONNECT allowed\.fake\.test:443/);
      for (const probe of [
        'https other.fake.test',
        'https allowed.fake.test',
        `tcp ${net.address} 7000`,
        `udp ${net.address} 7001`,
      ])
        expect(output).toContain(`probe ${probe}: {"ok":false`);
      // Raw packets past the proxy, from the kernel log, are lines of the build's log too.
      expect(output).toContain(`# egress denied TCP ${net.address}:7000 a TCP packet`);
      expect(output).toContain(`# egress denied UDP ${net.address}:7001 a UDP packet`);
      // The steps had the proxy; nothing of it stays in the image.
      const details = await dockerEngine().images.inspect(image.tag);
      expect(details?.labels[BUILD_NETWORK_LABEL]).toBe('egress');
      const box = await dockerBackend().create({ image: image.tag, runId: RUN_ID, role: 'built' });
      made.push(box);
      expect((await box.exec('env', { timeoutMs: 10_000 })).stdout).not.toMatch(/_proxy=/i);
      expect(await readFile(image.logFile!, 'utf8')).toMatch(
        /# egress allowed CONNECT registry\.fake\.test:443/,
      );
      // The build's network and its firewall hole are gone with the build.
      const left = (await dockerEngine().networks.list({ [LABEL.role]: 'image-build' })).filter(
        (n) => n.labels[LABEL.ownerPid] === String(process.pid),
      );
      expect(left).toEqual([]);
      const seen = net.requests().slice(before);
      expect(seen.length).toBeGreaterThan(0);
      expect(
        seen.every((r) => /registry\.fake\.test/.test(r)),
        seen.join('\n'),
      ).toBe(true);
    } finally {
      if (tag)
        await dockerEngine()
          .images.remove(tag)
          .catch(() => undefined);
      await rm(root, { recursive: true, force: true });
    }
  }, 300_000);
});
