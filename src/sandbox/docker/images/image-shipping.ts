/**
 * Images present on every engine that runs a trial. The base image and a repo image get to
 * a target engine either by shipping (`docker save` on an engine that has them, streamed
 * through this process into `docker load` on the target, no temporary file) or by building
 * them there from the same context. Content-addressed names make both idempotent: an engine
 * whose tag already carries the same image id (base) or content-hash label (repo) is left
 * alone.
 *
 * Which way is faster is measured by `bench/fleet-bench.mjs` on a fresh engine; the
 * defaults below follow those numbers (see bench/README.md, "Fleet").
 */
import { Transform } from 'node:stream';
import { ImageError } from '../../../errors.js';
import type { ImagePresence, PresenceMethod } from '../../types.js';

export type { ImagePresence, PresenceMethod } from '../../types.js';
import { dockerEngine, type DockerEngine } from '../engine/index.js';
import { BASE_IMAGES, DEFAULT_BASE_IMAGE } from './base-images.js';
import { buildRepoImage, type BuildRepoImageOptions, type BuiltRepoImage } from './repo-image.js';
import { CONTENT_HASH_LABEL } from '../labels.js';
import { ensureBaseImage } from './ensure-base.js';

/**
 * Shipping a base image (~480 MB) beats making it again on the engine by far (an offline
 * bootstrap downloads and unpacks Debian packages); a repo image is cheaper to build on an
 * engine that has the base than to ship, because `docker save` always sends the base
 * layers along. Measured in bench/README.md ("Fleet: images on a fresh engine").
 */
export const DEFAULT_PRESENCE: Readonly<{ base: PresenceMethod; repo: PresenceMethod }> = {
  base: 'ship',
  repo: 'build',
};

export interface ShipOptions {
  signal?: AbortSignal | undefined;
  /** Called with the bytes streamed so far, at most every few MB. */
  onProgress?: ((bytes: number) => void) | undefined;
}

/**
 * `docker save` on `source` piped into `docker load` on `target`, through this process
 * (engines never talk to each other). Afterwards every reference must name the same image
 * id on the target as on the source: the id is the digest of the image's config, which
 * names every layer's digest, so a stream that was cut or altered cannot pass.
 */
const shipping = new Map<string, Promise<{ bytes: number; durationMs: number }>>();

export function shipImages(
  source: DockerEngine,
  target: DockerEngine,
  refs: string[],
  options: ShipOptions = {},
): Promise<{ bytes: number; durationMs: number }> {
  // Trials starting together on one engine need the same images: one stream, not one each.
  const key = `${source.where ?? ''}|${target.where ?? ''}|${[...refs].sort().join(',')}`;
  let pending = shipping.get(key);
  if (!pending) {
    pending = shipOnce(source, target, refs, options).finally(() => shipping.delete(key));
    shipping.set(key, pending);
  }
  return pending;
}

async function shipOnce(
  source: DockerEngine,
  target: DockerEngine,
  refs: string[],
  options: ShipOptions,
): Promise<{ bytes: number; durationMs: number }> {
  const started = Date.now();
  const expected = new Map<string, string>();
  for (const ref of refs) {
    const image = await source.images.inspect(ref);
    if (!image)
      throw new ImageError(`cannot ship ${ref}: it is not on ${source.where ?? 'the local engine'}`);
    expected.set(ref, image.id);
  }
  let bytes = 0;
  let reported = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (options.onProgress && bytes - reported >= 16 * 1024 * 1024) {
        reported = bytes;
        options.onProgress(bytes);
      }
      done(null, chunk);
    },
  });
  const tar = await source.images.save(refs, options.signal ? { signal: options.signal } : {});
  tar.on('error', (error) => counter.destroy(error));
  tar.pipe(counter);
  try {
    await target.images.load(counter, options.signal ? { signal: options.signal } : {});
  } finally {
    tar.destroy();
    counter.destroy();
  }
  for (const [ref, id] of expected) {
    const loaded = await target.images.inspect(ref);
    if (loaded?.id !== id) {
      throw new ImageError(
        `shipping ${ref} to ${target.where ?? 'the local engine'} failed: expected image ${id.slice(7, 19)} there, found ${loaded ? loaded.id.slice(7, 19) : 'nothing'}`,
      );
    }
  }
  options.onProgress?.(bytes);
  return { bytes, durationMs: Date.now() - started };
}

export interface EnsureBaseOnOptions {
  /**
   * An engine that has (or, for the harness's own base images, can make) the image; needed to
   * ship. Default: the local engine.
   */
  source?: DockerEngine | undefined;
  /** Default: the harness's node base image. */
  image?: string | undefined;
  method?: PresenceMethod | undefined;
  signal?: AbortSignal | undefined;
  onLine?: ((line: string) => void) | undefined;
}

/**
 * A base image on `target`. Present with the source's image id: nothing to do. `ship`:
 * from the source (where the harness's own base images are made first if missing).
 * `build`: made on the target the way `images ensure` makes it (registry, else offline
 * bootstrap); that gives another image id, so repo images get other tags there.
 */
export async function ensureBaseImageOn(
  target: DockerEngine,
  options: EnsureBaseOnOptions,
): Promise<ImagePresence> {
  const started = Date.now();
  const source = options.source ?? dockerEngine();
  const tag = options.image ?? DEFAULT_BASE_IMAGE;
  const ours = Object.values(BASE_IMAGES).find((b) => b.tag === tag);
  const method = options.method ?? DEFAULT_PRESENCE.base;
  const onLine = options.onLine ?? (() => undefined);
  const existing = await target.images.inspect(tag);
  const done = (how: ImagePresence['how'], imageId: string, bytes?: number): ImagePresence => ({
    tag,
    imageId,
    how,
    durationMs: Date.now() - started,
    ...(bytes === undefined ? {} : { bytes }),
  });
  if (method === 'build') {
    if (existing) return done('present', existing.id);
    if (!ours) {
      throw new ImageError(
        `cannot build ${tag} on ${target.where ?? 'the local engine'}: it is not one of the harness's base images`,
        {
          hint: 'Ship it from an engine that has it (the default), or make it available on that engine yourself.',
        },
      );
    }
    const made = await ensureBaseImage(ours.kind, { engine: target, onLine, signal: options.signal });
    return done('built', made.imageId);
  }
  const sourceId = ours
    ? (await ensureBaseImage(ours.kind, { engine: source, onLine, signal: options.signal })).imageId
    : (await source.images.inspect(tag))?.id;
  if (!sourceId) {
    // Not one of ours and not here to ship: one the user put on that engine is theirs to vouch for.
    if (existing) return done('present', existing.id);
    throw new ImageError(`cannot ship ${tag}: it is not on ${source.where ?? 'the local engine'}`, {
      details: { notOnSource: true },
    });
  }
  if (existing?.id === sourceId) return done('present', existing.id);
  onLine(`shipping ${tag} to ${target.where ?? 'the local engine'}`);
  const shipped = await shipImages(source, target, [tag], { signal: options.signal });
  return done('shipped', sourceId, shipped.bytes);
}

export interface EnsureRepoOnOptions {
  source: DockerEngine;
  /** The repo image as `buildRepoImage` takes it (its `engine` is ignored). */
  repo: Omit<BuildRepoImageOptions, 'engine'>;
  method?: PresenceMethod | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * A repo's sandbox image on `target`, under the same content-hash tag it has on the source
 * when both have the same base image (ensure that first: `ensureBaseImageOn`). `ship`
 * builds or reuses it on the source and streams it over; `build` builds it on the target
 * from the same context (which reuses it when the tag with that content hash is there).
 */
export async function ensureRepoImageOn(
  target: DockerEngine,
  options: EnsureRepoOnOptions,
): Promise<ImagePresence & { image: BuiltRepoImage }> {
  const started = Date.now();
  const method = options.method ?? DEFAULT_PRESENCE.repo;
  const repo = { ...options.repo, ...(options.signal ? { signal: options.signal } : {}) };
  if (method === 'build') {
    const image = await buildRepoImage({ ...repo, engine: target });
    return {
      tag: image.tag,
      imageId: image.imageId,
      how: image.reused ? 'present' : 'built',
      durationMs: Date.now() - started,
      image,
    };
  }
  const image = await buildRepoImage({ ...repo, engine: options.source });
  const existing = await target.images.inspect(image.tag);
  if (existing && existing.labels[CONTENT_HASH_LABEL] === image.contentHash) {
    return {
      tag: image.tag,
      imageId: existing.id,
      how: 'present',
      durationMs: Date.now() - started,
      image: { ...image, imageId: existing.id, reused: true },
    };
  }
  // The base tag travels along (its layers are in the stream anyway), so a later build on
  // the target finds the same base and computes the same content hash.
  const baseImage = options.repo.baseImage ?? DEFAULT_BASE_IMAGE;
  const shipped = await shipImages(
    options.source,
    target,
    [image.tag, baseImage],
    options.signal ? { signal: options.signal } : {},
  );
  return {
    tag: image.tag,
    imageId: image.imageId,
    how: 'shipped',
    durationMs: Date.now() - started,
    bytes: shipped.bytes,
    image,
  };
}

export interface EnsureImagesOnOptions {
  source: DockerEngine;
  repo: Omit<BuildRepoImageOptions, 'engine'>;
  methods?: Partial<{ base: PresenceMethod | undefined; repo: PresenceMethod }>;
  signal?: AbortSignal | undefined;
  onLine?: ((line: string) => void) | undefined;
}

/** Base image, then repo image, on `target`: what a trial on that engine needs. */
export async function ensureImagesOn(
  target: DockerEngine,
  options: EnsureImagesOnOptions,
): Promise<{ base: ImagePresence; repo: ImagePresence & { image: BuiltRepoImage } }> {
  const base = await ensureBaseImageOn(target, {
    source: options.source,
    image: options.repo.baseImage ?? DEFAULT_BASE_IMAGE,
    method: options.methods?.base ?? DEFAULT_PRESENCE.base,
    signal: options.signal,
    onLine: options.onLine,
  });
  const repo = await ensureRepoImageOn(target, {
    source: options.source,
    repo: options.repo,
    method: options.methods?.repo ?? DEFAULT_PRESENCE.repo,
    signal: options.signal,
  });
  return { base, repo };
}
