/**
 * The sandbox contract on a second, real dockerd with `"userns-remap": "default"`
 * (tests/helpers/userns.ts): its own network namespace, data root and containerd, shared with
 * the other files of the run that need one (started by the first, stopped at the run's end), the
 * fixture image shipped from the local engine by save/load. What
 * a user namespace changes is checked for what it is, not skipped: the sandbox user's
 * processes and the files of its writable layer belong to the remap user's subordinate ids on
 * the host, and the container's root is an unprivileged host id. The change list still comes
 * from the writable layer (a folder of this host, under the engine's per-remap data root),
 * which the layer-read check proves with no exec.
 */
import { describeDockerConformance } from './docker-targets.js';
import { fixtureImage } from '../helpers/docker.js';
import { sharedUsernsEngine } from '../helpers/userns.js';

let release: (() => Promise<void>) | undefined;

describeDockerConformance({
  name: 'docker userns-remap',
  layerReads: 'layers',
  // The file contract the way this engine is really used (changes and exports from its
  // layers on this host); the channel and in-sandbox ways are the same code on any Docker-API
  // engine and run against the local engine.
  ways: ['layers'],
  prepare: async () => {
    const image = await fixtureImage('conformance');
    const shared = await sharedUsernsEngine([image]);
    release = shared.release;
    const started = shared.userns;
    return {
      engine: started.engine.engine,
      socketPath: started.engine.socketPath,
      image,
      remap: started.remap,
    };
  },
  release: async () => {
    await release?.();
    release = undefined;
  },
});
