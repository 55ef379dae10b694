/**
 * What `buildRepoImage` asks the engine for, against a fake engine: no network unless the
 * catalog opts in (and the setting names the image), build arguments from the catalog only,
 * and a clear refusal before a default-recipe build that could only fail without network.
 * The real daemon's side is in tests/integration/build-isolation.test.ts.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BuildRefused, ImageError } from '../../../src/errors.js';
import { BUILD_NETWORK_LABEL, REPO_LABEL } from '../../../src/sandbox/docker/labels.js';
import { buildRepoImage, type BuildRepoImageOptions } from '../../../src/sandbox/docker/images/repo-image.js';
import { DEFAULT_BASE_IMAGE } from '../../../src/sandbox/docker/images/base-images.js';
import { canaryToken } from '../../helpers/fake-secrets.js';
import { rejection } from '../../helpers/rejection.js';
import { fakeEngine as fakeEngineWith, type FakeEngine } from './fake-engine.js';

const fakeEngine = () => fakeEngineWith([DEFAULT_BASE_IMAGE]);

let root: string;
let repo: string;
const savedXdg = process.env.XDG_CACHE_HOME;

async function put(rel: string, content = `content of ${rel}\n`): Promise<void> {
  await mkdir(dirname(join(repo, rel)), { recursive: true });
  await writeFile(join(repo, rel), content);
}

async function build(fake: FakeEngine, extra: Partial<BuildRepoImageOptions> = {}) {
  return buildRepoImage({ repoDir: repo, engine: fake.engine, ...extra });
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sh-repo-image-'));
  repo = join(root, 'repo');
  await mkdir(repo);
  process.env.XDG_CACHE_HOME = join(root, 'cache');
  await put('package.json', '{"name":"x"}\n');
  await put('src/index.js');
});

afterEach(async () => {
  if (savedXdg === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedXdg;
  await rm(root, { recursive: true, force: true });
});

describe('repo image builds: network', () => {
  it('builds with network mode none by default and says so in the result and a label', async () => {
    const fake = fakeEngine();
    const image = await build(fake);
    expect(fake.builds).toHaveLength(1);
    expect(fake.builds[0]?.networkMode).toBe('none');
    expect(fake.builds[0]?.labels[BUILD_NETWORK_LABEL]).toBe('none');
    expect(image.buildNetwork).toBe(false);
  });

  it('leaves the network to the daemon only when the catalog opts in, under another image name', async () => {
    const fake = fakeEngine();
    const offline = await build(fake);
    const online = await build(fake, { buildNetwork: true });
    expect(fake.builds[1]?.networkMode).toBeUndefined();
    expect(fake.builds[1]?.labels[BUILD_NETWORK_LABEL]).toBe('default');
    expect(online).toMatchObject({ buildNetwork: true, reused: false });
    expect(online.contentHash).not.toBe(offline.contentHash);
    // Reusing an image keeps saying how it was built.
    expect(await build(fake, { buildNetwork: true })).toMatchObject({ buildNetwork: true, reused: true });
    expect(fake.builds).toHaveLength(2);
  });

  it("a failed no-network build's hint says how to opt in", async () => {
    const fake = fakeEngine();
    fake.engine.images.build = async (context: Readable) => {
      for await (const _chunk of context) {
        // drain
      }
      throw new ImageError("The command '/bin/sh -c apt-get update' returned a non-zero code: 100");
    };
    await put('Dockerfile.sandbox', 'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN apt-get update\n');
    const error = await rejection(build(fake), ImageError);
    expect(error.hint).toMatch(/no network .*sandbox\.build: \{ network: true \}/);
  });
});

describe('repo image builds: build arguments', () => {
  it('passes the base image and the catalog arguments, nothing from the host environment', async () => {
    const canary = canaryToken();
    process.env.SANDBOX_HARNESS_TEST_CANARY = canary;
    try {
      const fake = fakeEngine();
      await build(fake, { buildArgs: { NODE_ENV: 'test' } });
      expect(fake.builds[0]?.buildArgs).toEqual({ BASE_IMAGE: DEFAULT_BASE_IMAGE, NODE_ENV: 'test' });
      expect(JSON.stringify(fake.builds[0])).not.toContain(canary);
    } finally {
      delete process.env.SANDBOX_HARNESS_TEST_CANARY;
    }
  });
});

const LOCK_WITH_A_PACKAGE =
  '{"lockfileVersion":3,"packages":{"":{"name":"x"},"node_modules/left-pad":{"version":"1.3.0"}}}\n';

describe('repo image builds: the default recipe without network', () => {
  it('refuses, before building, a repo with a lockfile but no node_modules, saying what to do', async () => {
    await put('package-lock.json', LOCK_WITH_A_PACKAGE);
    const fake = fakeEngine();
    const { message, hint } = await rejection(build(fake), BuildRefused);
    expect(message).toMatch(/would run `npm ci` .* has package-lock\.json but no node_modules .*no network/);
    expect(hint).toMatch(/Run `npm ci` in .* on the host/);
    expect(hint).toMatch(/sandbox\.build: \{ network: true \}/);
    expect(fake.builds).toEqual([]);
  });

  it('builds offline a repo whose lockfile names only itself (npm install with no dependencies)', async () => {
    const fake = fakeEngine();
    await put(
      'package-lock.json',
      '{"name":"x","lockfileVersion":3,"requires":true,"packages":{"":{"name":"x","version":"1.0.0"}}}\n',
    );
    await build(fake);
    await put('package-lock.json', '{"name":"x","version":"1.0.0","lockfileVersion":1}\n');
    await build(fake);
    expect(fake.builds.map((b) => b.networkMode)).toEqual(['none', 'none']);
    // v1, naming a dependency: refused as before.
    await put('package-lock.json', '{"lockfileVersion":1,"dependencies":{"left-pad":{"version":"1.3.0"}}}\n');
    await rejection(build(fake), BuildRefused);
  });

  it('refuses requirements.txt on the Python base with a hint naming the catalog key that leaves it out', async () => {
    await put('requirements.txt', 'black\nruff\n');
    const fake = fakeEngine();
    const python = { baseImage: 'sandbox-harness/base-python:3' };
    const { hint } = await rejection(build(fake, python), BuildRefused);
    expect(hint).toContain('`sandbox.build: { exclude: [requirements.txt] }`');
    // The key does what the hint says.
    await expect(build(fake, { ...python, excludes: ['requirements.txt'] })).resolves.toBeDefined();
  });

  it('builds when the dependencies come with the repo, or there is no lockfile, or with the opt-in', async () => {
    const fake = fakeEngine();
    await build(fake); // no lockfile
    await put('package-lock.json', '{"lockfileVersion":3}\n');
    await build(fake, { buildNetwork: true });
    await put('node_modules/dep/index.js');
    await build(fake);
    expect(fake.builds.map((b) => b.networkMode)).toEqual(['none', undefined, 'none']);
  });

  it('refuses a pnpm, yarn or bun repo without node_modules (the recipe installs with npm only), with or without network', async () => {
    await put('package.json', '{"name":"x","devDependencies":{"vitest":"^3.0.0"}}\n');
    for (const [lockfile, install] of [
      ['pnpm-lock.yaml', 'pnpm install'],
      ['yarn.lock', 'yarn install'],
      ['bun.lockb', 'bun install'],
    ]) {
      await put(lockfile!, 'lockfile\n');
      for (const buildNetwork of [false, true]) {
        const fake = fakeEngine();
        const { message, hint } = await rejection(build(fake, { buildNetwork }), BuildRefused);
        expect(message).toMatch(new RegExp(`has ${lockfile!.replace('.', '\\.')} but no node_modules`));
        expect(hint).toContain(`Run \`${install}\` in`);
        expect(fake.builds).toEqual([]);
      }
      await rm(join(repo, lockfile!));
    }
  });

  it('builds a pnpm repo that brought node_modules, or whose package.json has no dependencies', async () => {
    await put('pnpm-lock.yaml', 'lockfileVersion: 9.0\n');
    const fake = fakeEngine();
    await build(fake); // package.json without dependencies
    await put('package.json', '{"name":"x","dependencies":{"defu":"^6.0.0"}}\n');
    await put('node_modules/.pnpm/defu@6.1.4/node_modules/defu/index.js');
    await build(fake);
    expect(fake.builds).toHaveLength(2);
  });

  it("does not second-guess a repo's own Dockerfile.sandbox", async () => {
    await put('package-lock.json', '{"lockfileVersion":3}\n');
    await put('Dockerfile.sandbox', 'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY . /workspace\n');
    const fake = fakeEngine();
    await build(fake);
    expect(fake.builds[0]?.networkMode).toBe('none');
  });
});

describe('repo image builds: what the daemon would fetch', () => {
  it('refuses, without network, an ADD of a URL and an image the engine does not have, naming the line', async () => {
    const fake = fakeEngine();
    await put('Dockerfile.sandbox', 'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nADD https://example.test/x /x\n');
    const add = await rejection(build(fake), BuildRefused);
    expect(add.message).toMatch(
      /Dockerfile\.sandbox:3: ADD https:\/\/example\.test\/x \/x\n {2}ADD of .* downloaded by the Docker daemon/,
    );
    expect(add.hint).toMatch(/COPY it, or let image builds use the network/);

    await put('Dockerfile.sandbox', 'FROM node:22-not-here\nCOPY . /workspace\n');
    const pull = await rejection(build(fake), BuildRefused);
    expect(pull.message).toMatch(
      /Dockerfile\.sandbox:1: FROM node:22-not-here\n {2}the image node:22-not-here is not on this engine/,
    );
    expect(pull.hint).toMatch(/docker pull node:22-not-here/);
    expect(fake.builds).toEqual([]);
  });

  it('lets the daemon fetch with the opt-in, and builds on images it has without it', async () => {
    const fake = fakeEngine();
    await put('Dockerfile.sandbox', 'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nADD https://example.test/x /x\n');
    await build(fake, { buildNetwork: true });
    await put('Dockerfile.sandbox', 'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY . /workspace\n');
    await build(fake);
    expect(fake.builds.map((b) => b.networkMode)).toEqual([undefined, 'none']);
  });
});

describe('repo image names and labels', () => {
  it("is named after the service (the catalog's name), and its labels hold no host path", async () => {
    const fake = fakeEngine();
    const image = await build(fake, { name: 'shipping-service' });
    expect(image.tag).toMatch(/^sandbox-harness\/repo-shipping-service:[0-9a-f]{16}$/);
    const labels = fake.builds[0]!.labels;
    expect(labels[REPO_LABEL]).toBe('shipping-service');
    // Shared by every checkout with the same content and shipped to other engines: no path.
    for (const value of Object.values(labels)) expect(value).not.toContain(root);
  });

  it('without a service name it is named after the folder, still with no path in a label', async () => {
    const fake = fakeEngine();
    const image = await build(fake);
    expect(image.tag).toMatch(/^sandbox-harness\/repo-repo:/);
    expect(fake.builds[0]!.labels[REPO_LABEL]).toBe('repo');
  });
});
