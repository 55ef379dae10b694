/**
 * The `slurm` backend as the CLI sees it (`--backend slurm`): its sandboxes, its pre-flight
 * check (the controller answers), `doctor` (controller, partitions, nodes, and a probe on every
 * node that a sandbox there has no network, no capabilities and no host mounts), and `gc` of
 * this tool's jobs and containers on the cluster.
 */
import { UsageError } from '../../errors.js';
import { imageRef } from '../../object-names.js';
import type { RepoImage, RepoImageRequest } from '../../image-context/request.js';
import type { DoctorReport, GcReport, GcScope, ImagePresence, SandboxProvider } from '../types.js';
import { collectSlurmGarbage, slurmDoctor } from './slurm-operator.js';
import { SlurmBackend, type SlurmBackendOptions } from './slurm-sandbox.js';

export function slurmProvider(
  options: SlurmBackendOptions = {},
): SandboxProvider & { backend: SlurmBackend } {
  const backend = new SlurmBackend(options);
  const client = backend.client;
  return {
    backend,
    endpoint: `slurm (${client.conf})`,
    async repoImage(request: RepoImageRequest): Promise<RepoImage> {
      if (request.prebuilt !== undefined) {
        // Every node must have it (loaded there, or pulled from the cluster's registry): the node
        // checks before it makes a container, and a missing one is an error naming the node.
        imageRef(request.prebuilt, "the catalog's sandbox.image");
        return { tag: request.prebuilt, imageId: request.prebuilt, reused: true, hostFiles: new Map() };
      }
      // Scanned here, built on each node that runs one of its sandboxes (node-images.ts).
      return backend.images.prepare(request);
    },
    async preflight(): Promise<void> {
      await client.ok('scontrol', ['ping']);
    },
    doctor: (): Promise<DoctorReport> => slurmDoctor(client),
    collectGarbage: (scope: GcScope): Promise<GcReport> => collectSlurmGarbage(client, scope),
    async ensureBaseImage(): Promise<ImagePresence> {
      throw new UsageError('the slurm backend does not ship base images to nodes', {
        hint: "Load the base image into every node's engine, or pull it from the cluster's registry.",
      });
    },
  };
}
