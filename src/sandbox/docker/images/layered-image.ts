/**
 * An image plus a layer of the harness's files (`image-context/image-layer.ts`), on Docker:
 * a container is created from the image and never started (nothing of the image runs, no
 * network is ever needed), the layer's tar is extracted into it by the engine, and its
 * writable layer is committed under a tag made of the image's id and the layer's key, so
 * every later run on that image reuses it. The engine refuses to write a folder where the
 * image has a link or a file (`noOverwriteDirNonDir`), and a folder the layer owns must not
 * be in the image at all: what the layer puts there is the only thing there.
 */
import { createHash } from 'node:crypto';
import { ConfigError, HarnessError, ImageError } from '../../../errors.js';
import { layerTar, type ImageLayer } from '../../../image-context/image-layer.js';
import { SANDBOX_GID, SANDBOX_UID, WORKSPACE, type LayeredImage } from '../../types.js';
import { hardenedContainer, IDLE_CONTAINER_LIMITS } from '../../container/container-spec.js';
import type { DockerEngine } from '../engine/index.js';
import { BUILT_FROM_LABEL, LABEL, containerLabels, containerName } from '../labels.js';

const LAYER_REPO = 'sandbox-harness/layered';
const LAYER_LABEL = 'sandbox-harness.layer';
/** Bump when what a layer image is made of changes (another way of writing it). */
const LAYER_FORMAT = 1;

export async function layeredImage(
  engine: DockerEngine,
  image: string,
  layer: ImageLayer,
  options: { signal?: AbortSignal } = {},
): Promise<LayeredImage> {
  const started = Date.now();
  const source = await engine.images.inspect(image);
  if (!source) throw new ImageError(`image ${image} does not exist`);
  const hash = createHash('sha256')
    .update(JSON.stringify([LAYER_FORMAT, source.id, layer.key, layer.owns]))
    .digest('hex')
    .slice(0, 16);
  const tag = `${LAYER_REPO}:${hash}`;
  const existing = await engine.images.inspect(tag);
  if (existing && existing.labels[LAYER_LABEL] === hash) {
    return { image: tag, reused: true, durationMs: Date.now() - started };
  }
  const id = await engine.containers.create(
    hardenedContainer({
      name: containerName(undefined, 'layer'),
      image,
      entrypoint: ['true'],
      cmd: [],
      // As the image's sandboxes are made (the commit keeps the container's settings); it never starts.
      user: `${SANDBOX_UID}:${SANDBOX_GID}`,
      workingDir: WORKSPACE,
      env: [],
      labels: containerLabels({ role: 'layer' }),
      ...IDLE_CONTAINER_LIMITS,
    }),
  );
  try {
    for (const owned of layer.owns) {
      const there = await engine.containers.getArchive(id, owned);
      if (there) {
        there.destroy();
        // The image's own (a repo's recipe): its fault, not the engine's, so never retried.
        throw new ConfigError(
          `image ${image} already has ${owned}, which the ${layer.description} layer owns; an image may not bring its own`,
        );
      }
    }
    options.signal?.throwIfAborted();
    const tar = await layerTar(layer);
    try {
      await engine.containers.putArchive(id, '/', tar);
    } catch (error) {
      tar.destroy();
      if (!(error instanceof HarnessError) || error.code !== 'SANDBOX_FILE') throw error;
      // The engine refused to write a folder over a link or a file of the image (see above).
      throw new ConfigError(
        `the ${layer.description} layer could not be written into image ${image}: ${(error as Error).message}`,
        [],
        { cause: error },
      );
    }
    options.signal?.throwIfAborted();
    await engine.containers.commit(id, {
      repo: LAYER_REPO,
      tag: hash,
      labels: {
        [LABEL.marker]: '1',
        // Removed with the repo images it sits on (`gc --all`).
        [LABEL.kind]: 'repo',
        [LAYER_LABEL]: hash,
        [BUILT_FROM_LABEL]: source.id,
      },
    });
    return { image: tag, reused: false, durationMs: Date.now() - started };
  } finally {
    await engine.containers.remove(id).catch(() => undefined);
  }
}
