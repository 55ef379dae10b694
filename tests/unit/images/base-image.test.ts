/**
 * How `ensureBaseImage` chooses its path (reuse, pull + recipe, offline bootstrap + recipe),
 * against a fake engine. mmdebstrap itself is replaced; the real path is covered by the
 * integration tests, which bootstrap for real on a machine without a registry.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ImageError, SandboxUnavailable } from '../../../src/errors.js';

const bootstrapRootfs = vi.fn(
  async (_engine: unknown, spec: { repo: string; tag: string }) => `${spec.repo}:${spec.tag}`,
);
/** mmdebstrap "installed" by apt-get: slow, and never twice at once (dpkg's lock). */
const mmdebstrap = { running: 0, most: 0, calls: 0 };
const ensureMmdebstrap = vi.fn(async () => {
  mmdebstrap.calls++;
  mmdebstrap.running++;
  mmdebstrap.most = Math.max(mmdebstrap.most, mmdebstrap.running);
  await new Promise((r) => setTimeout(r, 300));
  mmdebstrap.running--;
  return '/usr/bin/mmdebstrap';
});
vi.mock('../../../src/sandbox/docker/images/rootfs-bootstrap.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../../src/sandbox/docker/images/rootfs-bootstrap.js')>()),
  bootstrapRootfs: (...args: [unknown, { repo: string; tag: string }]) => bootstrapRootfs(...args),
  ensureMmdebstrap: () => ensureMmdebstrap(),
}));

const { ensureBaseImage } = await import('../../../src/sandbox/docker/images/ensure-base.js');
const { fakeEngine } = await import('./fake-engine.js');

let cache: string;
const savedXdg = process.env.XDG_CACHE_HOME;

beforeEach(async () => {
  cache = await mkdtemp(join(tmpdir(), 'sh-base-image-'));
  process.env.XDG_CACHE_HOME = cache;
  bootstrapRootfs.mockClear();
});

afterEach(async () => {
  if (savedXdg === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedXdg;
  await rm(cache, { recursive: true, force: true });
});

describe('ensureBaseImage', () => {
  it('reuses an existing tag without pulling or building, and says nothing', async () => {
    const fake = fakeEngine();
    fake.images.set('sandbox-harness/base-node:20', {
      id: 'sha256:existing',
      tags: [],
      labels: {},
      user: '',
      env: [],
      volumes: [],
    });
    const lines: string[] = [];
    const result = await ensureBaseImage('node', { engine: fake.engine, onLine: (l) => lines.push(l) });
    expect(result).toEqual({
      kind: 'node',
      tag: 'sandbox-harness/base-node:20',
      imageId: 'sha256:existing',
      source: 'existing',
    });
    expect(fake.pulls).toEqual([]);
    expect(fake.builds).toEqual([]);
    expect(lines).toEqual([]);
  });

  it('pulls the registry image and builds the recipe on it when a registry answers', async () => {
    const fake = fakeEngine();
    const lines: string[] = [];
    const result = await ensureBaseImage('node', { engine: fake.engine, onLine: (l) => lines.push(l) });
    expect(result).toMatchObject({
      source: 'pulled',
      builtFrom: 'node:20-bookworm-slim',
      tag: 'sandbox-harness/base-node:20',
    });
    expect(fake.pulls).toEqual(['node:20-bookworm-slim']);
    expect(fake.builds).toHaveLength(1);
    expect(fake.builds[0]).toMatchObject({
      tag: 'sandbox-harness/base-node:20',
      buildArgs: { BASE: 'node:20-bookworm-slim' },
      labels: { 'sandbox-harness.origin': 'pulled' },
    });
    expect(bootstrapRootfs).not.toHaveBeenCalled();
    expect(lines.some((l) => l.includes('pulled node:20-bookworm-slim'))).toBe(true);
  });

  it('bootstraps offline from Debian packages when the registry cannot be reached', async () => {
    const fake = fakeEngine();
    fake.pull = async () => {
      throw new ImageError('cannot pull node:20-bookworm-slim: lookup registry-1.docker.io: no such host');
    };
    const lines: string[] = [];
    const result = await ensureBaseImage('node', { engine: fake.engine, onLine: (l) => lines.push(l) });
    expect(result).toMatchObject({ source: 'bootstrapped', builtFrom: 'sandbox-harness/rootfs-node:trixie' });
    expect(bootstrapRootfs).toHaveBeenCalledTimes(1);
    expect(bootstrapRootfs.mock.calls[0]?.[1]).toMatchObject({
      suite: 'trixie',
      repo: 'sandbox-harness/rootfs-node',
      tag: 'trixie',
      packages: expect.arrayContaining(['nodejs', 'git', 'passwd']),
    });
    expect(fake.builds[0]).toMatchObject({ buildArgs: { BASE: 'sandbox-harness/rootfs-node:trixie' } });
    expect(lines).toContain('sandbox-harness/base-node:20: bootstrapped offline from Debian trixie packages');
    expect(lines.some((l) => l.includes('no such host'))).toBe(true);
  });

  it('two bases bootstrapping at once install mmdebstrap one at a time (dpkg takes one apt-get)', async () => {
    Object.assign(mmdebstrap, { running: 0, most: 0, calls: 0 });
    const fake = fakeEngine();
    const [node, python] = await Promise.all([
      ensureBaseImage('node', { engine: fake.engine, offline: true }),
      ensureBaseImage('python', { engine: fake.engine, offline: true }),
    ]);
    expect([node.source, python.source]).toEqual(['bootstrapped', 'bootstrapped']);
    expect(mmdebstrap.calls).toBe(2);
    expect(mmdebstrap.most).toBe(1);
  });

  it('never tries the registry when offline', async () => {
    const fake = fakeEngine();
    const result = await ensureBaseImage('python', { engine: fake.engine, offline: true });
    expect(result).toMatchObject({ source: 'bootstrapped', tag: 'sandbox-harness/base-python:3' });
    expect(fake.pulls).toEqual([]);
    expect(bootstrapRootfs.mock.calls[0]?.[1]).toMatchObject({
      // pytest is the base's test runner: offline, only Debian can bring it.
      packages: expect.arrayContaining(['python3', 'python3-venv', 'python3-pytest']),
    });
  });

  it('gives up a pull that shows no progress and bootstraps instead', async () => {
    const fake = fakeEngine();
    fake.pull = () => new Promise<void>(() => undefined); // a black-holed registry
    const lines: string[] = [];
    const result = await ensureBaseImage('node', {
      engine: fake.engine,
      pullIdleTimeoutMs: 50,
      onLine: (l) => lines.push(l),
    });
    expect(result.source).toBe('bootstrapped');
    expect(lines.some((l) => /cannot pull node:20-bookworm-slim: no progress/.test(l))).toBe(true);
  });

  it('falls back to the bootstrap when the recipe cannot be built on the pulled image', async () => {
    const fake = fakeEngine();
    fake.failBuildOn = 'node:20-bookworm-slim';
    const result = await ensureBaseImage('node', { engine: fake.engine });
    expect(result.source).toBe('bootstrapped');
    expect(fake.builds.map((b) => b.buildArgs.BASE)).toEqual([
      'node:20-bookworm-slim',
      'sandbox-harness/rootfs-node:trixie',
    ]);
  });

  it('builds the recipe on a bootstrapped root filesystem without network; only the registry path may have it', async () => {
    const fake = fakeEngine();
    fake.failBuildOn = 'node:20-bookworm-slim';
    await ensureBaseImage('node', { engine: fake.engine });
    expect(fake.builds.map((b) => [b.buildArgs.BASE, b.networkMode])).toEqual([
      ['node:20-bookworm-slim', undefined],
      ['sandbox-harness/rootfs-node:trixie', 'none'],
    ]);
  });

  it('does not mistake an unreachable daemon for a missing registry', async () => {
    const fake = fakeEngine();
    fake.pull = async () => {
      throw new SandboxUnavailable(
        'pulling node:20-bookworm-slim: cannot reach the Docker daemon (ECONNREFUSED)',
      );
    };
    await expect(ensureBaseImage('node', { engine: fake.engine })).rejects.toBeInstanceOf(SandboxUnavailable);
    expect(bootstrapRootfs).not.toHaveBeenCalled();
  });

  it('rebuilds an existing image with force, without the layer cache', async () => {
    const fake = fakeEngine();
    fake.images.set('sandbox-harness/base-node:20', {
      id: 'sha256:old',
      tags: [],
      labels: {},
      user: '',
      env: [],
      volumes: [],
    });
    const result = await ensureBaseImage('node', { engine: fake.engine, force: true });
    expect(result.source).toBe('pulled');
    expect(result.imageId).not.toBe('sha256:old');
    expect(fake.builds[0]?.noCache).toBe(true);
  });
});
