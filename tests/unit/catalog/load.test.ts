import { createHash } from 'node:crypto';
import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CATALOG_ENV_VAR,
  CATALOG_SANDBOX_PATH,
  catalogForSandbox,
  catalogPathsInRepo,
  catalogSandboxEnv,
  catalogSandboxFile,
  loadCatalog,
  resourcesFromCatalog,
} from '../../../src/catalog/load.js';
import { DEFAULT_TIMEOUTS, memoryBytes } from '../../../src/catalog/sandbox-schema.js';
import { testLayers } from '../../../src/catalog/schema.js';

const fixture = path.resolve('tests/fixtures/catalogs/valid/catalog.yaml');

describe('loadCatalog on a valid catalog', () => {
  it('loads the example catalog with defaults filled in', async () => {
    const loaded = await loadCatalog(fixture);
    const { catalog } = loaded;
    expect(catalog.name).toBe('shipping-service');
    expect(catalog.rules.freeShippingThreshold).toEqual({
      value: 50,
      unit: 'EUR',
      source: 'pricing policy 2024-03',
      description: 'Orders at or above this subtotal ship for free.',
    });
    expect(catalog.agent.maxAttempts).toBe(4);
    expect(catalog.agent.maxTurns).toBe(30);
    expect(catalog.agent.ignoreChanges).toBeUndefined();
    expect(catalog.sandbox.timeouts).toEqual({ ...DEFAULT_TIMEOUTS, testSec: 300 });
    expect(catalog.sandbox.env).toEqual({ NODE_ENV: 'test', TZ: 'UTC' });
    expect(catalog.provider).toEqual({ name: 'anthropic' });
  });

  it('resolves the repo relative to the catalog file, not the working directory', async () => {
    const loaded = await loadCatalog('valid/catalog.yaml', { cwd: path.resolve('tests/fixtures/catalogs') });
    expect(loaded.file).toBe(fixture);
    expect(loaded.dir).toBe(path.dirname(fixture));
    expect(loaded.repoDir).toBe(path.resolve('tests/fixtures/catalogs/valid/repo'));
    expect(loaded.displayPath).toBe(path.join('valid', 'catalog.yaml'));
  });

  it('hashes the exact file bytes with sha256', async () => {
    const loaded = await loadCatalog(fixture);
    const bytes = await readFile(fixture);
    expect(loaded.hash).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(loaded.text).toBe(bytes.toString('utf8'));
  });

  it('fills in the whole sandbox section when it is absent', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'catalog-min-'));
    try {
      await mkdir(path.join(dir, 'svc'));
      await writeFile(
        path.join(dir, 'min.yaml'),
        'name: svc\nowner: me\nrepo: svc\nrules: {}\nagent:\n  editableFiles: ["src/**"]\n  testCommand: make test\n',
      );
      const { catalog } = await loadCatalog(path.join(dir, 'min.yaml'));
      expect(catalog.sandbox).toEqual({ timeouts: DEFAULT_TIMEOUTS });
      expect(catalog.agent).toEqual({
        editableFiles: ['src/**'],
        testCommand: 'make test',
        maxAttempts: 3,
        maxTurns: 30,
        heldOutTests: [],
        docs: ['docs/*.md'],
        skills: [],
        delegate: false,
        kind: 'builtin',
      });
      expect(resourcesFromCatalog(catalog)).toEqual({});
      expect(
        await catalogPathsInRepo({ file: path.join(dir, 'min.yaml'), repoDir: path.join(dir, 'svc') }),
      ).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('points the yaml-language-server $schema line at the committed JSON Schema', async () => {
    const text = await readFile(fixture, 'utf8');
    const match = /^# yaml-language-server: \$schema=(\S+)$/m.exec(text);
    expect(match?.[1]).toBeDefined();
    await expect(access(path.resolve(path.dirname(fixture), match?.[1] ?? ''))).resolves.toBeUndefined();
  });
});

describe('catalog helpers', () => {
  it('normalises a single test command to one layer named "test" and keeps layers in order', async () => {
    expect(testLayers({ agent: { testCommand: 'npm test' } })).toEqual([
      { name: 'test', command: 'npm test' },
    ]);
    const { catalog } = await loadCatalog(fixture);
    expect(testLayers(catalog)).toEqual([
      { name: 'unit', command: 'node --test test/' },
      { name: 'lint', command: 'node --check src/shipping.js' },
    ]);
  });

  it('converts memory sizes to bytes with binary units, as Docker does', () => {
    expect(memoryBytes('512m')).toBe(512 * 1024 * 1024);
    expect(memoryBytes('1g')).toBe(1024 ** 3);
    expect(memoryBytes('1.5GiB')).toBe(1.5 * 1024 ** 3);
    expect(memoryBytes('2048')).toBe(2048);
    expect(memoryBytes(4096)).toBe(4096);
    expect(() => memoryBytes('lots')).toThrow(RangeError);
  });

  it('turns catalog resources into sandbox resources', async () => {
    const { catalog } = await loadCatalog(fixture);
    expect(resourcesFromCatalog(catalog)).toEqual({ memoryBytes: 1024 ** 3, cpus: 1.5, pids: 256 });
  });

  it('gives sandboxes the validated catalog as JSON, read-only at a fixed path, without the host repo path', async () => {
    const loaded = await loadCatalog(fixture);
    const json = JSON.parse(catalogForSandbox(loaded)) as Record<string, unknown>;
    expect(json).not.toHaveProperty('repo');
    expect(json.rules).toEqual(loaded.catalog.rules);
    expect(json.agent).toEqual(loaded.catalog.agent);
    // Injected files are always root-owned and read-only (see the Docker backend).
    expect(catalogSandboxFile(loaded)).toEqual({
      path: '/etc/sandbox-harness/catalog.json',
      content: catalogForSandbox(loaded),
    });
    expect(catalogSandboxEnv()).toEqual({ SERVICE_CATALOG: CATALOG_SANDBOX_PATH });
    expect(CATALOG_ENV_VAR).toBe('SERVICE_CATALOG');
  });

  it('finds the catalog file inside the repo so the allowlist can refuse it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'catalog-in-repo-'));
    try {
      await mkdir(path.join(dir, 'catalog'));
      expect(await catalogPathsInRepo({ file: path.join(dir, 'catalog', 'svc.yaml'), repoDir: dir })).toEqual(
        ['catalog/svc.yaml'],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the service catalog in catalog/', () => {
  it('is the bundled example’s catalog, pointing at the example repo', async () => {
    const top = await loadCatalog(path.resolve('catalog/shipping-service.yaml'));
    const example = await loadCatalog(path.resolve('examples/shipping-service/shipping-service.yaml'));
    expect(top.repoDir).toBe(path.resolve('examples/shipping-service/repo'));
    expect(top.repoDir).toBe(example.repoDir);
    // Same rules, same agent and sandbox settings: the two cannot drift apart.
    expect(top.catalog).toEqual({ ...example.catalog, repo: top.catalog.repo });
  });
});
