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
