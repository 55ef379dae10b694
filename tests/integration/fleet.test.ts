/**
 * The fleet against real engines: two extra dockerd engines on this machine, each in its own
 * network namespace, reached over TCP with mutual TLS (tests/helpers/engines.ts), plus the
 * local engine. Images are made present by shipping (save/load stream through this process)
 * and by building on the target; `doctor --engines` checks them all; the test engines are
 * taken down without a trace, also after a crash. Everything started here is stopped here.
 */
import { hardenedContainer } from '../../src/sandbox/container/container-spec.js';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageError, SandboxUnavailable } from '../../src/errors.js';
import {
  ensureBaseImageOn,
  ensureImagesOn,
  ensureRepoImageOn,
  shipImages,
} from '../../src/sandbox/docker/images/image-shipping.js';
import { DockerEngine, dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { CONTENT_HASH_LABEL } from '../../src/sandbox/docker/labels.js';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { cleanEnv, runCli } from '../helpers/cli.js';
import {
  claimFolder,
  ENGINE_PREFIX,
  ENGINES_ROOT,
  ownerOf,
  reapEngines,
  startEngines,
  stopEngines,
  traces,
  type TestEngine,
} from '../helpers/engines.js';

const run = promisify(execFile);
const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'repos', 'tiny-node');

let engines: TestEngine[] = [];
let a: TestEngine;
let b: TestEngine;
let scratch: string;
let repoDir: string;
const localTags = new Set<string>();

beforeAll(async () => {
  await dockerEngine().ping(5000);
  await ensureBaseImage('node', { onLine: () => undefined });
  scratch = await mkdtemp(join(tmpdir(), 'sh-fleet-it-'));
  // A private copy: its image tag is unique, so the local clean-up removes only ours.
  repoDir = join(scratch, `fleet-it-${randomBytes(4).toString('hex')}`);
  await cp(FIXTURE, repoDir, { recursive: true });
  engines = await startEngines({ count: 2 });
  [a, b] = engines as [TestEngine, TestEngine];
}, 300_000);

afterAll(async () => {
  await stopEngines(engines);
  for (const tag of localTags) await dockerEngine().images.remove(tag);
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('test engines', () => {
  it('answer over TCP with mutual TLS only, each its own engine beside the local one', async () => {
    const [infoA, infoB, local] = await Promise.all([
      a.engine.info(),
      b.engine.info(),
      dockerEngine().info(),
    ]);
    // (Engine ids come from /etc/docker/key.json, which engines on one machine share.)
    expect([infoA.dockerRootDir, infoB.dockerRootDir]).toEqual([
      join(ENGINES_ROOT, a.name, 'data'),
      join(ENGINES_ROOT, b.name, 'data'),
    ]);
    expect(local.dockerRootDir).not.toContain(ENGINES_ROOT);

    // B's client certificate is from another CA: A refuses it. B's CA does not vouch for A's
    // server certificate either, and plain HTTP on the TLS port gets nowhere.
    const wrongClient = new DockerEngine({
      ...a.endpoint,
      tls: { ...a.tls, cert: b.tls.cert, key: b.tls.key },
    } as typeof a.endpoint);
    const wrongServer = new DockerEngine({
      ...a.endpoint,
      tls: { ...a.tls, ca: b.tls.ca },
    } as typeof a.endpoint);
    const plain = new DockerEngine({ transport: 'tcp', host: a.address, port: a.port });
    for (const client of [wrongClient, wrongServer, plain]) {
      await expect(client.ping(3000)).rejects.toBeInstanceOf(SandboxUnavailable);
    }
    await expect(a.engine.ping(3000)).resolves.toBeUndefined();
  });
});

describe('images on other engines', () => {
  it('ships the base image through this process, engine to engine, and does nothing the second time', async () => {
    const local = await dockerEngine().images.inspect(DEFAULT_BASE_IMAGE);
    expect(await a.engine.images.inspect(DEFAULT_BASE_IMAGE)).toBeUndefined();

    const first = await ensureBaseImageOn(a.engine, { source: dockerEngine() });
    expect(first).toMatchObject({ tag: DEFAULT_BASE_IMAGE, how: 'shipped', imageId: local?.id });
    expect(first.bytes).toBeGreaterThan(100 * 1024 * 1024);
    expect((await a.engine.images.inspect(DEFAULT_BASE_IMAGE))?.id).toBe(local?.id);

    const again = await ensureBaseImageOn(a.engine, { source: dockerEngine() });
    expect(again).toMatchObject({ how: 'present', imageId: local?.id });
    expect(again.bytes).toBeUndefined();

    // From one remote engine to another: neither talks to the other, the stream runs through here.
    const onB = await ensureBaseImageOn(b.engine, { source: a.engine });
    expect(onB).toMatchObject({ how: 'shipped', imageId: local?.id });
  }, 600_000);

  it('builds a repo image on another engine under the same content-hash tag as locally, once', async () => {
    const built = await ensureRepoImageOn(b.engine, {
      source: dockerEngine(),
      repo: { repoDir },
      method: 'build',
    });
    expect(built.how).toBe('built');
    const onLocal = await ensureRepoImageOn(dockerEngine(), {
      source: dockerEngine(),
      repo: { repoDir },
      method: 'build',
    });
    localTags.add(onLocal.tag);
    expect(built.tag).toBe(onLocal.tag);
    expect(built.image.contentHash).toBe(onLocal.image.contentHash);
    expect((await b.engine.images.inspect(built.tag))?.labels[CONTENT_HASH_LABEL]).toBe(
      built.image.contentHash,
    );

    const again = await ensureRepoImageOn(b.engine, {
      source: dockerEngine(),
      repo: { repoDir },
      method: 'build',
    });
    expect(again.how).toBe('present');
  }, 300_000);

  it('ships a repo image with its base tag, verified by image id, and leaves a matching one alone', async () => {
    const shipped = await ensureRepoImageOn(a.engine, {
      source: b.engine,
      repo: { repoDir },
      method: 'ship',
    });
    expect(shipped.how).toBe('shipped');
    const onA = await a.engine.images.inspect(shipped.tag);
    expect(onA?.id).toBe((await b.engine.images.inspect(shipped.tag))?.id);
    expect(onA?.labels[CONTENT_HASH_LABEL]).toBe(shipped.image.contentHash);

    const again = await ensureRepoImageOn(a.engine, { source: b.engine, repo: { repoDir }, method: 'ship' });
    expect(again.how).toBe('present');
    // What a trial on A needs, with the default methods: all there already, nothing moves.
    const both = await ensureImagesOn(a.engine, { source: dockerEngine(), repo: { repoDir } });
    expect([both.base.how, both.repo.how, both.repo.tag]).toEqual(['present', 'present', shipped.tag]);
  }, 600_000);

  it('loads nothing under a tag from a stream that breaks off', async () => {
    const scratchTag = `sandbox-harness/fleet-cut:${randomBytes(4).toString('hex')}`;
    await a.engine.images.tag(
      DEFAULT_BASE_IMAGE,
      scratchTag.split(':')[0] ?? '',
      scratchTag.split(':')[1] ?? '',
    );
    const full = await a.engine.images.save([scratchTag]);
    const head: Buffer[] = [];
    let size = 0;
    for await (const chunk of full) {
      head.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size > 8 * 1024 * 1024) break;
    }
    full.destroy();
    await a.engine.images.remove(scratchTag);

    await expect(b.engine.images.load(Readable.from(Buffer.concat(head)))).rejects.toBeInstanceOf(ImageError);
    expect(await b.engine.images.inspect(scratchTag)).toBeUndefined();
    // Shipping checks ids afterwards; an image missing at the source is refused before any stream.
    await expect(shipImages(a.engine, b.engine, [scratchTag])).rejects.toThrow(/not on tcp:\/\//);
  }, 120_000);
});

describe('doctor --engines', () => {
  it('checks every engine of an engines file (TLS files, a docker context) and says which one is broken', async () => {
    const dir = join(scratch, 'fleet-config');
    const dockerConfig = join(dir, 'docker-config');
    // A docker context made by the real docker CLI, in a private config folder.
    await run(
      'docker',
      [
        'context',
        'create',
        'fleet-b',
        '--docker',
        `host=${b.url},ca=${join(b.clientTlsDir, 'ca.pem')},cert=${join(b.clientTlsDir, 'cert.pem')},key=${join(b.clientTlsDir, 'key.pem')}`,
      ],
      { env: { ...process.env, DOCKER_CONFIG: dockerConfig } },
    );
    await cp(a.clientTlsDir, join(dir, 'certs-a'), { recursive: true });
    await writeFile(
      join(dir, 'engines.yaml'),
      [
        'engines:',
        '  - context: default',
        '  - name: engine-a',
        `    host: ${a.url}`,
        '    tls: { ca: certs-a/ca.pem, cert: certs-a/cert.pem, key: certs-a/key.pem }',
        '    capacity: 3',
        '  - context: fleet-b',
        '  - name: nobody-home',
        `    host: tcp://${a.address}:2399`,
        '    tls: { ca: certs-a/ca.pem, cert: certs-a/cert.pem, key: certs-a/key.pem }',
        '',
      ].join('\n'),
    );
    const result = await runCli(['doctor', '--engines', 'engines.yaml', '--json'], {
      cwd: dir,
      env: cleanEnv({ DOCKER_CONFIG: dockerConfig }),
    });
    expect(result.code).toBe(3);
    expect(result.stdout).not.toMatch(/PRIVATE KEY/);
    const report = JSON.parse(result.stdout) as {
      usable: boolean;
      engines: Array<{
        name: string;
        endpoint: string;
        origin: string;
        usable: boolean;
        capacity: number | null;
        checks: Array<{ name: string; ok: boolean; detail: string; fix?: string }>;
        engine?: { dockerRootDir: string; freeBytes?: number };
      }>;
    };
    expect(report.usable).toBe(false);
    expect(report.engines.map((e) => [e.name, e.endpoint, e.origin, e.usable])).toEqual([
      ['default', 'unix:///var/run/docker.sock', 'engines.yaml:2:5', true],
      ['engine-a', `${a.url} (TLS)`, 'engines.yaml:3:5', true],
      ['fleet-b', `${b.url} (TLS)`, 'engines.yaml:7:5', true],
      ['nobody-home', `tcp://${a.address}:2399 (TLS)`, 'engines.yaml:8:5', false],
    ]);
    const [, engineA, engineB, nobody] = report.engines;
    expect(engineA?.capacity).toBe(3);
    expect(engineB?.capacity).toBeGreaterThanOrEqual(1);
    for (const e of [engineA, engineB]) {
      const checks = new Map(e?.checks.map((c) => [c.name, c]));
      expect(checks.get('server-version')).toMatchObject({
        ok: true,
        detail: expect.stringContaining('API 1.41'),
      });
      expect(checks.get('sandbox-container')).toMatchObject({
        ok: true,
        detail: expect.stringContaining('--network none'),
      });
      expect(checks.get('disk')?.detail).toMatch(
        /GiB free of .* under \/var\/tmp\/sandbox-harness-test-engines\//,
      );
      expect(checks.has('offline-bootstrap')).toBe(false);
      expect(e?.engine?.freeBytes).toBeGreaterThan(0);
    }
    expect(nobody?.checks).toEqual([
      expect.objectContaining({
        name: 'daemon',
        ok: false,
        detail: expect.stringContaining(`tcp://${a.address}:2399 (TLS)`),
        fix: expect.stringContaining('runs and that this machine reaches it'),
      }),
    ]);
    // The hardened test containers are gone from every engine.
    for (const engine of [a.engine, b.engine]) {
      expect(await engine.containers.list({ 'sandbox-harness.role': 'doctor' })).toEqual([]);
    }
  }, 180_000);
});

describe('stopping test engines', () => {
  it('reaps an engine whose owner died after dockerd was killed with a container running, and nothing else', async () => {
    const container = await b.engine.containers.create(
      hardenedContainer({
        image: DEFAULT_BASE_IMAGE,
        entrypoint: ['sleep'],
        cmd: ['1000'],
        user: '1000:1000',
        workingDir: '/',
        env: [],
        labels: { 'sandbox-harness.role': 'fleet-test' },
        memoryBytes: 256 * 1024 * 1024,
        nanoCpus: 500_000_000,
        pids: 64,
        maxFileBytes: 1024 * 1024,
        tmpfsBytes: 1024 * 1024,
        nofile: 256,
      }),
    );
    await b.engine.containers.start(container);
    // B's owner becomes a process that has exited, and its dockerd dies without cleaning up.
    const owner = spawn('true');
    await new Promise((resolve) => owner.once('exit', resolve));
    await writeFile(
      join(b.dir, 'owner.json'),
      JSON.stringify({
        pid: owner.pid,
        startTicks: 'gone',
        createdAt: new Date().toISOString(),
        claim: b.claim,
      }),
    );
    process.kill(Number((await readFile(join(b.dir, 'docker.pid'), 'utf8')).trim()), 'SIGKILL');
    expect(await traces(b.name, b.claim)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^process \d+/)]),
    );

    const reaped = await reapEngines();
    expect(reaped).toContain(b.name);
    expect(reaped).not.toContain(a.name);
    // No process (the container's sleep, containerd, shims), namespace, veth, cgroup, mount or folder.
    expect(await traces(b.name, b.claim)).toEqual([]);
    await expect(a.engine.ping(3000)).resolves.toBeUndefined();
  }, 120_000);

  it('takes an engine down without a trace, and stopping it again is harmless', async () => {
    await stopEngines([a]);
    expect(await traces(a.name, a.claim)).toEqual([]);
    await expect(a.engine.ping(1000)).rejects.toBeInstanceOf(SandboxUnavailable);
    await stopEngines([a]);
    expect(await traces(a.name, a.claim)).toEqual([]);
    // The name is free now: another start takes it (a folder claimed here stands for one, or
    // another file's engine has it already). A late stop of the old one must leave it alone.
    const other = await claimFolder({
      root: ENGINES_ROOT,
      prefix: ENGINE_PREFIX,
      owner: await ownerOf(),
      max: a.slot,
      usable: (_slot, name) => name === a.name,
    }).catch(() => undefined);
    try {
      const before = await readFile(join(a.dir, 'owner.json'), 'utf8');
      await stopEngines([a]);
      expect(await readFile(join(a.dir, 'owner.json'), 'utf8')).toBe(before);
      expect(await traces(a.name, a.claim)).toEqual([]);
      expect(await traces(a.name)).not.toEqual([]);
    } finally {
      if (other) await rm(other.dir, { recursive: true, force: true });
    }
  }, 60_000);
});
