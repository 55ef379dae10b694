/**
 * The catalog's `sandbox.build` section: the network opt-in and the extra build-context
 * excludes, with file:line:col errors for what cannot be meant.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../src/catalog/load.js';
import { ConfigError } from '../../../src/errors.js';
import { rejection } from '../../helpers/rejection.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'catalog-build-'));
  await mkdir(path.join(dir, 'repo'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

// Line 10 is `sandbox:`; the section's own lines start at 11.
const catalog = (sandbox: string) => `name: svc
owner: team
repo: repo
rules: {}
agent:
  editableFiles:
    - src/**/*.js
  testCommand: npm test

sandbox:
${sandbox}
`;

async function load(sandbox: string) {
  await writeFile(path.join(dir, 'catalog.yaml'), catalog(sandbox));
  return loadCatalog('catalog.yaml', { cwd: dir });
}

async function problems(sandbox: string): Promise<string[]> {
  return (await rejection(load(sandbox), ConfigError)).problems;
}

describe('catalog sandbox.build', () => {
  it('is optional: builds have no network and no extra excludes unless it says so', async () => {
    expect((await load('  timeouts: {commandSec: 10}')).catalog.sandbox.build).toBeUndefined();
    expect((await load('  build: {}')).catalog.sandbox.build).toEqual({ network: false, exclude: [] });
  });

  it('reads the network opt-in and .dockerignore-syntax excludes', async () => {
    const loaded = await load(
      '  build:\n    network: true\n    exclude:\n      - fixtures/keys/**\n      - "!fixtures/keys/public.pem"',
    );
    expect(loaded.catalog.sandbox.build).toEqual({
      network: true,
      exclude: ['fixtures/keys/**', '!fixtures/keys/public.pem'],
    });
  });

  it('refuses a network value that is not a boolean, an unknown key, and bad patterns, at their lines', async () => {
    expect(await problems('  build:\n    network: "yes"')).toEqual([
      'catalog.yaml:12:14 sandbox.build.network: expected true or false, got "yes"',
    ]);
    expect(await problems('  build:\n    networks: true')).toEqual([
      'catalog.yaml:12:5 sandbox.build.networks: unknown key (did you mean "network"?); known keys here: network, exclude',
    ]);
    expect(
      await problems('  build:\n    exclude:\n      - ""\n      - ../outside\n      - "a\\\\b"'),
    ).toEqual([
      'catalog.yaml:13:9 sandbox.build.exclude[0]: pattern "" an empty pattern excludes nothing',
      'catalog.yaml:14:9 sandbox.build.exclude[1]: pattern "../outside" must not contain ".." (the build context is the repo)',
      'catalog.yaml:15:9 sandbox.build.exclude[2]: pattern "a\\\\b" use forward slashes; a backslash is not a path separator here',
    ]);
  });

  it('refuses sandbox.build together with a prebuilt sandbox.image', async () => {
    expect(await problems('  image: node:20\n  build: {network: true}')).toEqual([
      'catalog.yaml:12:10 sandbox.build: sandbox.build only applies when the harness builds the image; remove it or remove sandbox.image',
    ]);
  });
});
