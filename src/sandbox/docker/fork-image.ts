/**
 * A fork on Docker: the engine's commit of a sandbox's container (paused while it runs, so
 * the image is one moment of it), tagged `sandbox-harness-fork:<owner>-<random>` and labelled
 * as this tool's and as the owner run's, so `gc` finds it (see `operator/collect-garbage.ts`).
 * The commit costs what the container's writable layer holds, not the image under it.
 *
 * What the image carries besides the files: the container's environment (Docker merges it
 * into the image's config whatever the commit asks). A sandbox's environment is the catalog's
 * plus the harness's own, which every sandbox made from the fork sets again; a sandbox with
 * egress is refused, since its proxy settings would outlive its network.
 */
import { randomBytes } from 'node:crypto';
import { UsageError, abortError } from '../../errors.js';
import type { AttachRequest, ForkedImage } from '../types.js';
import type { ContainerDetails, DockerEngine } from './engine/index.js';
import { LABEL, containerLabels } from './labels.js';

export const FORK_IMAGE_REPO = 'sandbox-harness-fork';
export const FORK_IMAGE_KIND = 'fork';

/** A tag from the owner run's id: the tag grammar's characters only, bounded. */
function forkTag(owner: string): string {
  const safe = owner.replace(/[^A-Za-z0-9_.-]/g, '-').replace(/^[.-]+/, '');
  return `${safe.slice(0, 80) || 'run'}-${randomBytes(4).toString('hex')}`;
}

export async function forkImage(
  engine: DockerEngine,
  owned: (request: AttachRequest) => Promise<ContainerDetails | undefined>,
  request: AttachRequest,
  options: { owner: string; signal?: AbortSignal | undefined },
): Promise<ForkedImage> {
  const started = Date.now();
  const details = await owned(request);
  if (!details)
    throw new UsageError(`container ${request.id.slice(0, 12)} no longer exists; there is nothing to fork`);
  const network = details.hostConfig['NetworkMode'];
  if (network !== undefined && network !== 'none')
    throw new UsageError(
      `sandbox ${request.id.slice(0, 12)} has egress (network ${String(network)}); a sandbox with egress cannot be forked`,
      { hint: 'Fork only sandboxes without network: their proxy settings would go with the image.' },
    );
  if (options.signal?.aborted) throw abortError(options.signal);
  const tag = forkTag(options.owner);
  const imageId = await engine.containers.commit(details.id, {
    repo: FORK_IMAGE_REPO,
    tag,
    pause: details.running,
    labels: {
      // Every label of ours set again: Docker keeps the container's labels where the commit names none.
      ...containerLabels({ runId: options.owner, role: FORK_IMAGE_KIND }),
      [LABEL.kind]: FORK_IMAGE_KIND,
    },
  });
  return { image: `${FORK_IMAGE_REPO}:${tag}`, imageId, durationMs: Date.now() - started };
}

/** Removes a fork image; false while a container still uses it (gc removes it once none does). */
export async function removeForkImage(engine: DockerEngine, image: string): Promise<boolean> {
  const found = await engine.images.inspect(image);
  if (!found) return true;
  if (found.labels[LABEL.marker] !== '1' || found.labels[LABEL.kind] !== FORK_IMAGE_KIND)
    throw new UsageError(`image ${image} is not a fork this tool made; refusing to remove it`);
  return engine.images.remove(found.id);
}
