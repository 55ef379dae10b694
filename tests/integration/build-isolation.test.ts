/**
 * Image builds against the real Docker engine: build steps have no network unless the
 * catalog opts in, a private key in the repo stops the build with file:line, and a canary
 * credential of the host (environment, files the repo must not ship) never reaches the
 * image, its config, its history, its layers or the build log.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BuildRefused } from '../../src/errors.js';
import { buildRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import { inImage, ScratchRepos } from '../helpers/docker.js';
import { canaryToken, TOKENS } from '../helpers/fake-secrets.js';
import { rejection } from '../helpers/rejection.js';

const run = promisify(execFile);
const repos = new ScratchRepos('build-iso');
const freshRepo = () => repos.fresh();
const build = (repoDir: string, extra?: Parameters<ScratchRepos['build']>[1]) => repos.build(repoDir, extra);

async function put(repo: string, rel: string, content: string): Promise<void> {
  await mkdir(dirname(join(repo, rel)), { recursive: true });
  await writeFile(join(repo, rel), content);
}

// Refusals of the repo's configuration (exit 2), not failures of the engine.
const failure = (promise: Promise<unknown>) => rejection(promise, BuildRefused);

/** Whether `needle` occurs anywhere in what `docker <args>` writes, without holding it all in memory. */
function dockerOutputContains(args: string[], needles: string[]): Promise<boolean[]> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const found = needles.map(() => false);
    const keep = Math.max(...needles.map((n) => n.length));
    let tail = Buffer.alloc(0);
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      const window = Buffer.concat([tail, chunk]);
      needles.forEach((n, i) => {
        if (!found[i] && window.includes(n)) found[i] = true;
      });
      tail = window.subarray(Math.max(0, window.length - keep));
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(found) : reject(new Error(`docker ${args.join(' ')}: exit ${code}: ${stderr}`)),
    );
  });
}

/**
 * The host's address on the default bridge: what a build step with network can reach.
 * (os.networkInterfaces() leaves out a bridge with no container on it.)
 */
async function bridgeAddress(): Promise<string> {
  const { stdout } = await run('ip', ['-4', '-o', 'addr', 'show', 'dev', 'docker0']);
  const address = /\binet (\d+\.\d+\.\d+\.\d+)\//.exec(stdout)?.[1];
  if (!address)
    throw new Error(`no IPv4 address on docker0 (is dockerd running with its default bridge?): ${stdout}`);
  return address;
}

beforeAll(() => repos.setUp(), 600_000);
afterAll(() => repos.cleanUp());

describe('build network', () => {
  let server: Server;
  let address: string;
  let port: number;
  let connections = 0;
  const greeting = `hello-${randomBytes(6).toString('hex')}`;

  beforeAll(async () => {
    address = await bridgeAddress();
    server = createServer((socket) => {
      connections++;
      socket.end(`${greeting}\n`);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, address, () => resolve());
    });
    const bound = server.address();
    port = typeof bound === 'object' && bound ? bound.port : 0;
  });

  afterAll(async () => {
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  /**
   * A recipe that records what its build step could do. The name lookup only runs where it
   * must fail: with network it would ask a real DNS server, and tests stay on this host.
   */
  async function probeRepo(): Promise<string> {
    const repo = await freshRepo();
    await put(
      repo,
      'probe.cjs',
      [
        "const s = require('net').connect({ host: process.env.PROBE_HOST, port: Number(process.env.PROBE_PORT) });",
        's.setTimeout(5000);',
        "s.on('data', (d) => { console.log('tcp=' + d.toString().trim()); process.exit(0); });",
        "s.on('error', (e) => { console.log('tcp-error=' + e.code); process.exit(0); });",
        "s.on('timeout', () => { console.log('tcp-error=timeout'); process.exit(0); });",
        '',
      ].join('\n'),
    );
    // A build step's own loopback works without network: a server on localhost answers.
    await put(
      repo,
      'loopback.cjs',
      [
        "const http = require('http');",
        'const one = (h) => new Promise((ok) => {',
        "  const s = http.createServer((q, r) => r.end('pong'));",
        "  s.on('error', (e) => ok(h + '=' + e.code));",
        '  s.listen(0, h, () => {',
        '    http',
        '      .get({ host: h, port: s.address().port }, (res) => {',
        "        let b = '';",
        "        res.on('data', (d) => (b += d));",
        "        res.on('end', () => { s.close(); ok(h + '=' + b); });",
        '      })',
        "      .on('error', (e) => { s.close(); ok(h + '=' + e.code); });",
        '  });',
        '});',
        "(async () => console.log('loopback ' + [await one('localhost'), await one('127.0.0.1')].join(' ')))();",
        '',
      ].join('\n'),
    );
    await put(
      repo,
      'Dockerfile.sandbox',
      [
        'ARG BASE_IMAGE',
        'FROM ${BASE_IMAGE}',
        'ARG PROBE_HOST',
        'ARG PROBE_PORT',
        'ARG PROBE_DNS',
        'COPY --chown=1000:1000 . /workspace',
        'USER sandbox',
        'WORKDIR /workspace',
        'RUN { echo "interfaces=$(ls /sys/class/net | sort | tr "\\n" " ")"; ' +
          'if [ "$PROBE_DNS" = 1 ]; then getent hosts deb.debian.org >/dev/null && echo dns=resolved || echo dns=failed; fi; ' +
          'PROBE_HOST=$PROBE_HOST PROBE_PORT=$PROBE_PORT node probe.cjs; node loopback.cjs; } > /home/sandbox/probe.txt; cat /home/sandbox/probe.txt',
        '',
      ].join('\n'),
    );
    return repo;
  }

  it('a build step cannot resolve a name or reach the host by default', async () => {
    const repo = await probeRepo();
    const { image } = await build(repo, {
      buildArgs: { PROBE_HOST: address, PROBE_PORT: String(port), PROBE_DNS: '1' },
    });
    expect(image.buildNetwork).toBe(false);
    const probe = await inImage(image.tag, 'cat /home/sandbox/probe.txt');
    expect(probe).toContain('interfaces=lo \n');
    expect(probe).toContain('dns=failed');
    expect(probe).toContain('loopback localhost=pong 127.0.0.1=pong');
    expect(probe).toMatch(/tcp-error=(ENETUNREACH|EHOSTUNREACH|timeout)/);
    expect(probe).not.toContain(greeting);
    const { stdout } = await run('docker', [
      'image',
      'inspect',
      image.tag,
      '--format',
      '{{index .Config.Labels "sandbox-harness.build-network"}}',
    ]);
    expect(stdout.trim()).toBe('none');
  });

  it('an ADD of a URL (which the daemon, not a build step, would download) is refused before building', async () => {
    const repo = await freshRepo();
    await put(
      repo,
      'Dockerfile.sandbox',
      `ARG BASE_IMAGE\nFROM \${BASE_IMAGE}\nADD http://${address}:${port}/payload /tmp/payload\n`,
    );
    const before = connections;
    const error = await failure(buildRepoImage({ repoDir: repo }));
    expect(error.message).toMatch(/Dockerfile\.sandbox:3: ADD http:.*downloaded by the Docker daemon/s);
    expect(connections).toBe(before);
  });

  it('with sandbox.build.network a build step reaches a host listener, on a real interface', async () => {
    const repo = await probeRepo();
    const { image } = await build(repo, {
      buildNetwork: true,
      buildArgs: { PROBE_HOST: address, PROBE_PORT: String(port), PROBE_DNS: '0' },
    });
    expect(image.buildNetwork).toBe(true);
    const probe = await inImage(image.tag, 'cat /home/sandbox/probe.txt');
    expect(probe).toMatch(/interfaces=.*eth0/);
    expect(probe).toContain(`tcp=${greeting}`);
  });
});

describe('the default recipe without network', () => {
  it('builds a repo that brings node_modules, without installing anything', async () => {
    const repo = await freshRepo();
    // A lockfile that names a dependency: `npm ci` would fetch it (one that names only the
    // package itself builds offline, see tests/unit/images/repo-image.test.ts).
    await put(
      repo,
      'package-lock.json',
      '{"name":"tiny-node","lockfileVersion":3,"packages":{"":{"name":"tiny-node"},"node_modules/left-pad":{"version":"1.3.0"}}}\n',
    );
    await put(repo, 'node_modules/left-pad/index.js', 'module.exports = (s) => s;\n');
    const { image, lines } = await build(repo);
    expect(image.buildNetwork).toBe(false);
    expect(lines.join('\n')).toContain('sandbox-harness: node_modules came with the repo; not installing');
    expect(await inImage(image.tag, 'cat /workspace/node_modules/left-pad/index.js')).toContain(
      'module.exports',
    );
  });

  it('refuses a lockfile without node_modules before building, saying what to do', async () => {
    const repo = await freshRepo();
    // A lockfile that names a dependency: `npm ci` would fetch it (one that names only the
    // package itself builds offline, see tests/unit/images/repo-image.test.ts).
    await put(
      repo,
      'package-lock.json',
      '{"name":"tiny-node","lockfileVersion":3,"packages":{"":{"name":"tiny-node"},"node_modules/left-pad":{"version":"1.3.0"}}}\n',
    );
    const error = await failure(buildRepoImage({ repoDir: repo }));
    expect(error.message).toMatch(/would run `npm ci`/);
    expect(error.hint).toMatch(/npm ci.* on the host/);
    expect(error.hint).toMatch(/sandbox\.build: \{ network: true \}/);
  });
});

describe('secrets in the repo', () => {
  it('a private key file under an innocent name stops the build with file:line, and nothing is built', async () => {
    const repo = await freshRepo();
    await put(repo, 'deploy/notes.txt', `deploy key below\n\n${TOKENS['a private key (PEM block)']}\n`);
    const lines: string[] = [];
    const error = await failure(buildRepoImage({ repoDir: repo, onProgress: (l) => lines.push(l) }));
    expect(error.message).toContain('deploy/notes.txt:3: a private key (PEM block)');
    expect(error.hint).toMatch(/\.dockerignore.*sandbox\.build\.exclude/s);
    expect(lines).toEqual([]);
    const { stdout } = await run('docker', [
      'images',
      '-q',
      '--filter',
      `label=sandbox-harness.repo=${repo}`,
    ]);
    expect(stdout.trim()).toBe('');
    // Excluded the way the hint says, the same repo builds.
    const { image } = await build(repo, { excludes: ['deploy/notes.txt'] });
    expect(await inImage(image.tag, 'ls /workspace/deploy 2>&1 || true')).not.toContain('notes.txt');
  });

  it('a canary credential of the host never reaches the image, its config, history, layers or the build log', async () => {
    const canary = canaryToken();
    const fileCanary = canaryToken();
    const visible = `visible-${randomBytes(8).toString('hex')}`;
    const repo = await freshRepo();
    await git(repo, 'init', '-q');
    await put(repo, '.gitignore', 'local/\n');
    // Files a repo must not ship: secret names in any case, and a git-ignored folder.
    await put(repo, '.ENV', `API_KEY=${fileCanary}\n`);
    await put(repo, 'keys/id_ed25519', `${fileCanary}\n`);
    await put(repo, 'infra/terraform.tfvars', `token = "${fileCanary}"\n`);
    await put(repo, 'config/Credentials.json', `{"key": "${fileCanary}"}\n`);
    await put(repo, 'local/scratch.txt', `${fileCanary}\n`);
    await put(repo, 'src/visible.txt', `${visible}\n`);
    await put(
      repo,
      'Dockerfile.sandbox',
      [
        'ARG BASE_IMAGE',
        'FROM ${BASE_IMAGE}',
        'ARG CATALOG_ARG',
        'COPY --chown=1000:1000 . /workspace',
        'RUN env | sort; echo "catalog arg: $CATALOG_ARG"',
        '',
      ].join('\n'),
    );
    const saved = { ...process.env };
    process.env.SANDBOX_HARNESS_TEST_CANARY = canary;
    process.env.ANTHROPIC_API_KEY = canary;
    process.env.AWS_SECRET_ACCESS_KEY = canary;
    let built;
    try {
      built = await build(repo, { buildArgs: { CATALOG_ARG: 'from-the-catalog' } });
    } finally {
      for (const key of ['SANDBOX_HARNESS_TEST_CANARY', 'ANTHROPIC_API_KEY', 'AWS_SECRET_ACCESS_KEY']) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
    }
    const { image, lines } = built;
    const log = await readFile(image.logFile ?? '', 'utf8');
    // Build arguments come from the catalog only, and the build log shows them.
    expect(log).toContain('catalog arg: from-the-catalog');
    expect(lines.join('\n')).toContain('CATALOG_ARG=from-the-catalog');
    const { stdout: history } = await run('docker', ['history', '--no-trunc', image.tag]);
    expect(history).toContain('CATALOG_ARG=from-the-catalog');
    const { stdout: config } = await run('docker', ['image', 'inspect', image.tag]);
    for (const secret of [canary, fileCanary]) {
      for (const [where, text] of Object.entries({ log, lines: lines.join('\n'), history, config })) {
        expect(text.includes(secret), `${where} holds a canary`).toBe(false);
      }
    }
    expect(log).not.toMatch(/SANDBOX_HARNESS_TEST_CANARY|ANTHROPIC_API_KEY|AWS_SECRET_ACCESS_KEY/);
    // Every byte of every layer; the visible marker shows the search does find what is there.
    const [sawVisible, sawCanary, sawFileCanary] = await dockerOutputContains(
      ['save', image.tag],
      [visible, canary, fileCanary],
    );
    expect(sawVisible).toBe(true);
    expect(sawCanary).toBe(false);
    expect(sawFileCanary).toBe(false);
  }, 300_000);
});

function git(cwd: string, ...args: string[]): Promise<unknown> {
  return run('git', args, { cwd });
}
