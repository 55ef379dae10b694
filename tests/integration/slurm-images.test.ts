/**
 * Repo images on the nodes of a real Slurm cluster (tests/helpers/slurm.ts): the host scans the
 * repo and names the image by its content hash, and the node that runs a sandbox builds it with
 * its own engine from the context the harness streams to it (no host path mounted), once per
 * node: the next sandbox there, even of another harness process, builds nothing.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BuildRefused, ImageError } from '../../src/errors.js';
import { SLURM_LABEL } from '../../src/sandbox/slurm/job-script.js';
import { slurmProvider } from '../../src/sandbox/slurm/slurm-provider.js';
import type { SlurmSandbox } from '../../src/sandbox/slurm/slurm-sandbox.js';
import { startSlurm, stopSlurm, type SlurmCluster } from '../helpers/slurm.js';

let cluster: SlurmCluster | undefined;
let repo = '';
const ready = (): SlurmCluster => {
  if (!cluster) throw new Error('the Slurm lab did not start');
  return cluster;
};

beforeAll(async () => {
  repo = await mkdtemp(join(tmpdir(), 'slurm-images-'));
  await writeFile(join(repo, 'hello.txt'), `made on the host ${Date.now()}\n`);
  // The node base only: no repo image is on any node before the test.
  cluster = await startSlurm({ nodes: 2 });
}, 300_000);

afterAll(async () => {
  if (cluster) await stopSlurm(cluster);
  if (repo) await rm(repo, { recursive: true, force: true });
});

/** The image on each node's engine, by node. */
async function imagesOnNodes(tag: string) {
  const found = new Map<string, { id: string; labels: Record<string, string> }>();
  for (const n of ready().nodes) {
    const image = await n.engine.engine.images.inspect(tag);
    if (image) found.set(n.name, { id: image.id, labels: image.labels });
  }
  return found;
}

describe('slurm: repo images built on the nodes', { timeout: 300_000 }, () => {
  it('a node builds the image from the sent context once; the next sandbox there (another process too) reuses it', async () => {
    const provider = slurmProvider({ conf: ready().confFile, timeLimitMinutes: 10, partition: 'solo' });
    const lines: string[] = [];
    const image = await provider.repoImage({
      repoDir: repo,
      name: 'slurm-images',
      onProgress: (l) => lines.push(l),
    });
    expect(image.tag).toMatch(/^sandbox-harness\/repo-slurm-images:[0-9a-f]{16}$/);
    expect(image.contentHash).toMatch(/^[0-9a-f]{64}$/);
    expect(image.hostFiles.get('hello.txt')).toBeDefined();
    // Nothing is built on the host's side of the call.
    expect(await imagesOnNodes(image.tag)).toEqual(new Map());

    const sandbox = (await provider.backend.create({
      image: image.tag,
      runId: 'slurm-images',
    })) as SlurmSandbox;
    let node = '';
    try {
      node = sandbox.address.node;
      expect((await sandbox.exec('cat /workspace/hello.txt')).stdout).toMatch(/^made on the host/);
    } finally {
      await sandbox.dispose();
    }
    expect(lines.some((l) => /^Step \d+\/\d+ : /.test(l))).toBe(true);
    const built = await imagesOnNodes(image.tag);
    expect([...built.keys()]).toEqual([node]);
    expect(built.get(node)?.labels).toMatchObject({
      [SLURM_LABEL.contentHash]: image.contentHash,
      [SLURM_LABEL.kind]: 'repo',
      [SLURM_LABEL.buildNetwork]: 'none',
    });
    expect(built.get(node)?.labels[SLURM_LABEL.baseId]).toMatch(/^sha256:/);

    // A second harness process (a new provider): same tag, nothing built on that node again.
    const again = slurmProvider({ conf: ready().confFile, timeLimitMinutes: 10, partition: 'solo' });
    const second = await again.repoImage({
      repoDir: repo,
      name: 'slurm-images',
      onProgress: (l) => lines.push(l),
    });
    expect(second.tag).toBe(image.tag);
    lines.length = 0;
    const other = await again.backend.create({ image: second.tag, runId: 'slurm-images' });
    await other.dispose();
    expect(lines).toEqual([]);
    expect((await imagesOnNodes(image.tag)).get(node)?.id).toBe(built.get(node)?.id);
  });

  it('the pristine tree of an image no node has yet: built on the node Slurm picks, then read', async () => {
    await writeFile(join(repo, 'second.txt'), 'two\n');
    const provider = slurmProvider({ conf: ready().confFile, timeLimitMinutes: 10 });
    const image = await provider.repoImage({ repoDir: repo, name: 'slurm-images-tree' });
    const tree = await provider.backend.workspaceTree(image.tag);
    expect(tree.get('second.txt')).toMatchObject({ type: 'file' });
    expect((await imagesOnNodes(image.tag)).size).toBe(1);
  });

  it('a base the node lacks is an image error naming the node; a remote ADD is refused before anything is sent', async () => {
    const provider = slurmProvider({ conf: ready().confFile, timeLimitMinutes: 10, partition: 'solo' });
    const image = await provider.repoImage({
      repoDir: repo,
      name: 'slurm-images-nobase',
      baseImage: 'sandbox-harness/no-such-base:1',
    });
    const made = provider.backend.create({ image: image.tag, runId: 'slurm-images' });
    await expect(made).rejects.toThrow(ImageError);
    await expect(made).rejects.toThrow(/base image sandbox-harness\/no-such-base:1 is not on node node2/);

    await writeFile(
      join(repo, 'Dockerfile.sandbox'),
      'FROM sandbox-harness/base-node:20\nADD https://example.com/x /x\n',
    );
    try {
      await expect(provider.repoImage({ repoDir: repo, name: 'slurm-images-add' })).rejects.toThrow(
        BuildRefused,
      );
    } finally {
      await rm(join(repo, 'Dockerfile.sandbox'));
    }
  });
});
