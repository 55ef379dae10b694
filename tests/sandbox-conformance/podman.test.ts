/**
 * The sandbox contract on rootful Podman, behind the same Docker API client: its API service
 * (`podman system service`) on its own socket, the fixture image shipped into Podman's store
 * by save/load as the fleet ships images. Podman's storage driver is `overlay` (not
 * `overlay2`) with the same upper/merged folders, so the change list still comes from the
 * writable layer, which the layer-read check proves (no exec). Its disk budget is held by the
 * watchdog (no per-container quota without xfs pquota), as on Docker here. Podman's API takes
 * no runtime per container: the service runs all under its own (scripts/setup.sh starts it
 * with runc, because Podman's default here, crun 1.8, refuses this host's hybrid cgroups).
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { DockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { namesCheck } from '../../src/sandbox/docker/operator/names-check.js';
import { FORK_IMAGE_KIND, removeForkImage } from '../../src/sandbox/docker/fork-image.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { forkSandbox, type Fork } from '../../src/sandbox/fork/fork.js';
import { describeDockerConformance } from './docker-targets.js';
import { fixtureImage } from '../helpers/docker.js';
import { PODMAN_SOCKET, podmanEngine, shipToPodman, stopPodman } from '../helpers/podman.js';

describeDockerConformance({
  name: 'podman',
  layerReads: 'layers',
  // A focused subset: the file contract once, the way this engine is really used (changes and
  // exports from its layers); the channel and in-sandbox ways are the same code on any
  // Docker-API engine and run on Docker and under runsc. Podman's exec is several times
  // slower than dockerd's, and all three ways would add tens of minutes to CI.
  ways: ['layers'],
  prepare: async () => {
    const engine = await podmanEngine();
    const image = await fixtureImage('conformance');
    await shipToPodman(engine, [image]);
    return { engine, socketPath: PODMAN_SOCKET, image };
  },
  release: async () => stopPodman(),
});

describe('names in a Podman sandbox', () => {
  it("are the harness's: the service started as scripts/setup.sh starts it adds nothing of the host's /etc/hosts", async () => {
    const engine = await podmanEngine();
    const image = await fixtureImage('conformance');
    await shipToPodman(engine, [image]);
    const sandbox = await new DockerBackend(engine).create({ image, role: 'podman-names' });
    try {
      const hosts = (await sandbox.exec('cat /etc/hosts')).stdout;
      const resolv = (await sandbox.exec('cat /etc/resolv.conf')).stdout;
      const check = namesCheck({ hosts, resolv }, 'Podman');
      expect(check.ok, `${check.detail}\n${hosts}`).toBe(true);
      // The host's own entries would be here without base_hosts_file = "image".
      for (const line of (await readFile('/etc/hosts', 'utf8')).split('\n')) {
        const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
        if (!address) continue;
        for (const name of names.filter((n) => !['localhost', 'ip6-localhost', 'ip6-loopback'].includes(n)))
          expect(hosts).not.toMatch(new RegExp(`^${address.replace(/\./g, '\\.')}\\s.*\\b${name}\\b`, 'm'));
      }
    } finally {
      await sandbox.dispose({ keep: false });
    }
  }, 120_000);
});

describe('a fork on Podman', () => {
  it("is the engine's commit: a sandbox made from it sees the forked files, and the image goes when asked", async () => {
    const engine = await podmanEngine();
    const image = await fixtureImage('conformance');
    await shipToPodman(engine, [image]);
    const backend = new DockerBackend(engine);
    const runId = `podman-fork-${randomBytes(3).toString('hex')}`;
    const source = await backend.create({ image, runId, role: 'attempt-1' });
    let fork: Fork | undefined;
    try {
      await source.writeFiles([{ path: 'forked.txt', content: Buffer.from('from the fork\n') }]);
      fork = await forkSandbox(backend, source, { id: source.id, runId }, { owner: `${runId}-b` });
      expect(fork.inherited.map((c) => c.path)).toEqual(['forked.txt']);
      // What gc and the run's end go by: the owner run and the kind, not the source container's.
      const labels = (await engine.images.inspect(fork.image))?.labels ?? {};
      expect(labels).toMatchObject({
        [LABEL.run]: `${runId}-b`,
        [LABEL.kind]: FORK_IMAGE_KIND,
        [LABEL.marker]: '1',
      });
      const child = await backend.create({ image: fork.image, runId: `${runId}-b`, role: 'attempt-1' });
      try {
        const seen = await child.exec('cat forked.txt; id -u');
        expect(seen.stdout).toBe('from the fork\n1000\n');
      } finally {
        await child.dispose({ keep: false });
      }
    } finally {
      await source.dispose({ keep: false });
      if (fork) expect(await removeForkImage(engine, fork.image)).toBe(true);
    }
    expect(await engine.images.inspect(fork!.image)).toBeUndefined();
  }, 180_000);
});
