/**
 * The pristine tree remembered by image id on real Docker: a later process (a new backend)
 * reads it without a container, and a tag that moved to another image is never answered
 * with the old image's tree.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { DockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine, type DockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { buildRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { fileTreeCache } from '../../src/sandbox/tree-cache.js';
import { FIXTURES } from '../helpers/docker.js';

const TAG = `sandbox-harness-test/tree-cache:${process.pid}`;
let dir: string;
let images: { a: string; b: string };

/** An engine whose containers cannot be made: a tree read from it must come from the cache. */
function noContainers(engine: DockerEngine): DockerEngine {
  const containers = Object.create(engine.containers) as DockerEngine['containers'];
  containers.create = async () => {
    throw new Error('a container was made');
  };
  return Object.assign(Object.create(engine) as DockerEngine, { containers });
}

describe('the tree cache on Docker', () => {
  beforeAll(async () => {
    await ensureBaseImage('node', {});
    dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-tree-cache-'));
    const repo = join(dir, 'repo');
    await cp(join(FIXTURES, 'repos', 'gate'), repo, { recursive: true });
    const a = await buildRepoImage({ repoDir: repo });
    await writeFile(join(repo, 'added.txt'), 'only in the second image\n');
    const b = await buildRepoImage({ repoDir: repo });
    images = { a: a.tag, b: b.tag };
  }, 900_000);

  afterAll(async () => {
    execFileSync('docker', ['rmi', TAG], { stdio: 'ignore' });
    await rm(dir, { recursive: true, force: true });
  });

  it('a later backend reads a tree it read before without a container; a moved tag gets its new image', async () => {
    const cacheDir = join(dir, 'trees');
    const first = new DockerBackend(dockerEngine());
    first.treeCache = fileTreeCache(cacheDir);
    execFileSync('docker', ['tag', images.a, TAG]);
    const treeA = await first.workspaceTree(TAG);
    expect([...treeA.keys()]).not.toContain('added.txt');
    expect(await readdir(cacheDir)).toHaveLength(1);

    const later = new DockerBackend(noContainers(dockerEngine()));
    later.treeCache = fileTreeCache(cacheDir);
    expect(await later.workspaceTree(TAG)).toEqual(treeA);

    // The tag now names the other image: its tree is read (a container), never the old one's.
    execFileSync('docker', ['tag', images.b, TAG]);
    await expect(new DockerBackendWith(cacheDir, true).workspaceTree(TAG)).rejects.toThrow(
      'a container was made',
    );
    const treeB = await new DockerBackendWith(cacheDir, false).workspaceTree(TAG);
    expect([...treeB.keys()]).toContain('added.txt');
    expect(await readdir(cacheDir)).toHaveLength(2);
  }, 300_000);
});

class DockerBackendWith extends DockerBackend {
  constructor(cacheDir: string, blocked: boolean) {
    super(blocked ? noContainers(dockerEngine()) : dockerEngine());
    this.treeCache = fileTreeCache(cacheDir);
  }
}
