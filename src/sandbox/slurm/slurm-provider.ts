/**
 * The `slurm` backend as the CLI sees it (`--backend slurm`): its sandboxes, its pre-flight
 * check (the controller answers), `doctor` (controller, partitions, nodes, and a probe on every
 * node that a sandbox there has no network, no capabilities and no host mounts), and `gc` of
 * this tool's jobs and containers on the cluster.
 */
import { UsageError } from '../../errors.js';
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
      if (!request.prebuilt) {
        throw new UsageError('the slurm backend runs prebuilt images only, for now', {
          hint: "Name an image every node has in the catalog's sandbox.image (build it on the nodes, or pull it from the cluster's registry).",
        });
      }
      return { tag: request.prebuilt, imageId: request.prebuilt, reused: true, hostFiles: new Map() };
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
