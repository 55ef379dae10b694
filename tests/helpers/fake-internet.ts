/**
 * A fake internet for egress tests: a network namespace of the test's own, reached from the
 * host over a veth pair on a private /24, with an HTTPS server (its own CA), plain HTTP,
 * raw TCP and UDP listeners, a byte sink, and dnsmasq answering for a few `*.fake.test`
 * names (some of them with IPv6 addresses no proxy may connect to, and two with addresses
 * the host only gets when a test gives them to it: `addHostAddress`). The egress proxy is
 * told to use this dnsmasq, so no test asks the host's resolver anything and no packet goes
 * anywhere but loopback and this namespace.
 *
 * Root only. `nsenter --net` (not `ip netns exec`, which remounts /sys).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { packTar } from '../../src/sandbox/tar.js';

const run = promisify(execFile);
const FIXTURES = new URL('../fixtures/egress/', import.meta.url).pathname;
const PREFIX = 'shinet';

export interface FakeInternet {
  name: string;
  /** The host's end of the veth (the proxy's own address in this range). */
  hostAddress: string;
  /** The servers' address inside the namespace (HTTPS, HTTP, TCP 7000, UDP 7001, DNS). */
  address: string;
  /** The /24 to name in `privateRanges`. */
  range: string;
  /** The name server to give the proxy. */
  resolver: string;
  caPem: string;
  /** Names and what they resolve to (IPv4). */
  names: Record<string, string>;
  /** Names with IPv6 addresses (AAAA), some also in `names`. */
  names6: Record<string, string>;
  /** Requests the servers saw, one `METHOD host path via <client port>` per line; `SINK ...` lines of the sink. */
  requests(): string[];
  /**
   * Gives the host the address `later.fake.test` (on the host's end of the veth, an interface
   * with carrier) or `dark.fake.test` (on a veth of the test's own whose peer is down, so
   * without carrier: an interface `os.networkInterfaces()` does not list, as docker0 once
   * its last container went, though the kernel delivers its addresses locally) resolves to.
   * Returns the address and a function that takes it away again.
   */
  addHostAddress(which: 'later' | 'dark'): Promise<{ address: string; remove(): Promise<void> }>;
  stop(): Promise<void>;
}

async function usedThirdOctets(): Promise<Set<string>> {
  const { stdout } = await run('ip', ['-4', '-o', 'addr', 'show']);
  const { stdout: routes } = await run('ip', ['-4', 'route', 'show', 'table', 'all']);
  return new Set([...`${stdout}\n${routes}`.matchAll(/10\.232\.(\d+)\./g)].map((m) => m[1]!));
}

async function certificates(dir: string, names: string[]): Promise<void> {
  const openssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  await openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'ca-key.pem');
  await openssl(
    'req',
    '-x509',
    '-new',
    '-key',
    'ca-key.pem',
    '-days',
    '2',
    '-subj',
    '/CN=fake internet test CA',
    '-out',
    'ca.pem',
  );
  await openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'server-key.pem');
  await openssl('req', '-new', '-key', 'server-key.pem', '-subj', '/CN=fake.test', '-out', 'server.csr');
  await writeFile(join(dir, 'ext.cnf'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`);
  await openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    'ext.cnf',
    '-out',
    'server.pem',
  );
}

/** A one-file npm package and the registry documents that serve it. */
async function registry(dir: string, host: string): Promise<Record<string, { path: string; type: string }>> {
  const pkg = { name: 'tiny-pkg', version: '1.0.0', main: 'index.js' };
  const tgz = gzipSync(
    await packTar([
      {
        name: 'package/package.json',
        type: 'file',
        content: Buffer.from(JSON.stringify(pkg)),
        mode: 0o644,
        owner: 'root',
      },
      {
        name: 'package/index.js',
        type: 'file',
        content: Buffer.from("module.exports = 'tiny from the fake registry';\n"),
        mode: 0o644,
        owner: 'root',
      },
    ]),
  );
  await writeFile(join(dir, 'tiny-pkg-1.0.0.tgz'), tgz);
  const tarball = `https://${host}/tiny-pkg/-/tiny-pkg-1.0.0.tgz`;
  const doc = {
    name: 'tiny-pkg',
    'dist-tags': { latest: '1.0.0' },
    versions: {
      '1.0.0': {
        ...pkg,
        dist: {
          tarball,
          shasum: createHash('sha1').update(tgz).digest('hex'),
          integrity: `sha512-${createHash('sha512').update(tgz).digest('base64')}`,
        },
      },
    },
  };
  await writeFile(join(dir, 'tiny-pkg.json'), JSON.stringify(doc));
  return {
    [`${host} /tiny-pkg`]: { path: 'tiny-pkg.json', type: 'application/json' },
    [`${host} /tiny-pkg/-/tiny-pkg-1.0.0.tgz`]: {
      path: 'tiny-pkg-1.0.0.tgz',
      type: 'application/octet-stream',
    },
  };
}

function waitFor(child: ChildProcess, text: string, what: string, timeoutMs = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${seen}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes(text)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}): ${seen}`));
    });
  });
}

export async function startFakeInternet(): Promise<FakeInternet> {
  const used = await usedThirdOctets();
  const octet = [...Array(200).keys()].map((i) => String(i + 20)).find((o) => !used.has(o));
  if (!octet) throw new Error('no free 10.232.x.0/24 for the fake internet');
  const name = `${PREFIX}${randomBytes(3).toString('hex')}`;
  const hostAddress = `10.232.${octet}.1`;
  const address = `10.232.${octet}.2`;
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-fake-internet-'));
  const children: ChildProcess[] = [];
  const seen: string[] = [];
  const names: Record<string, string> = {
    'allowed.fake.test': address,
    'other.fake.test': address,
    'registry.fake.test': address,
    'open.zone.fake.test': address,
    'secret.zone.fake.test': address,
    'loop.fake.test': '127.0.0.1',
    'self.fake.test': hostAddress,
    'mixed.fake.test': address,
    'later.fake.test': `10.232.${octet}.3`,
    'dark.fake.test': `10.232.${octet}.4`,
  };
  const names6: Record<string, string> = {
    'v6loop.fake.test': '::1',
    'v6link.fake.test': 'fe80::1',
    'v6mapped.fake.test': '::ffff:127.0.0.1',
    'v6compat.fake.test': '::127.0.0.1',
    'mixed.fake.test': '::1',
  };
  const dark = `${name}d`;
  const stop = async () => {
    for (const child of children) child.kill('SIGKILL');
    await run('ip', ['netns', 'delete', name]).catch(() => undefined);
    for (const link of [`${name}h`, dark])
      if (existsSync(`/sys/class/net/${link}`))
        await run('ip', ['link', 'delete', link]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  const addHostAddress = async (which: 'later' | 'dark') => {
    const added = names[`${which}.fake.test`]!;
    if (which === 'dark' && !existsSync(`/sys/class/net/${dark}`)) {
      // Up, but its peer is not: no carrier.
      await run('ip', ['link', 'add', dark, 'type', 'veth', 'peer', 'name', `${name}e`]);
      await run('ip', ['link', 'set', dark, 'up']);
    }
    const device = which === 'dark' ? dark : `${name}h`;
    await run('ip', ['addr', 'add', `${added}/32`, 'dev', device]);
    return {
      address: added,
      remove: async () => {
        await run('ip', ['addr', 'del', `${added}/32`, 'dev', device]).catch(() => undefined);
      },
    };
  };
  try {
    await run('ip', ['netns', 'add', name]);
    await run('ip', ['link', 'add', `${name}h`, 'type', 'veth', 'peer', 'name', `${name}n`]);
    await run('ip', ['link', 'set', `${name}n`, 'netns', name]);
    await run('ip', ['addr', 'add', `${hostAddress}/24`, 'dev', `${name}h`]);
    await run('ip', ['link', 'set', `${name}h`, 'up']);
    await run('ip', ['-n', name, 'addr', 'add', `${address}/24`, 'dev', `${name}n`]);
    await run('ip', ['-n', name, 'link', 'set', `${name}n`, 'up']);
    await run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    await certificates(dir, Object.keys(names));
    await writeFile(join(dir, 'routes.json'), JSON.stringify(await registry(dir, 'registry.fake.test')));
    const netns = `--net=/run/netns/${name}`;
    const server = spawn('nsenter', [netns, process.execPath, join(FIXTURES, 'server.mjs'), address, dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(server);
    // Lines, not chunks: a line may arrive in two.
    let partial = '';
    server.stdout.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      seen.push(...lines.filter((l) => l && l !== 'ready'));
    });
    await waitFor(server, 'ready', 'the fake internet servers');
    const dnsmasq = spawn(
      'nsenter',
      [
        netns,
        'dnsmasq',
        '--keep-in-foreground',
        '--conf-file=/dev/null',
        '--no-resolv',
        '--no-hosts',
        '--no-poll',
        '--bind-interfaces',
        `--listen-address=${address}`,
        '--except-interface=lo',
        '--user=root',
        '--pid-file=',
        '--log-facility=-',
        '--log-queries',
        ...Object.entries(names).map(([n, a]) => `--address=/${n}/${a}`),
        ...Object.entries(names6).map(([n, a]) => `--address=/${n}/${a}`),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(dnsmasq);
    await waitFor(dnsmasq, 'started', 'dnsmasq');
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    name,
    hostAddress,
    address,
    range: `10.232.${octet}.0/24`,
    resolver: address,
    caPem: await readFile(join(dir, 'ca.pem'), 'utf8').catch(() => ''),
    names,
    names6,
    requests: () => [...seen],
    addHostAddress,
    stop,
  };
}
