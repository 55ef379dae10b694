/**
 * The images an engine stores: inspected, listed, removed, tagged, built from a context,
 * pulled, imported, and saved and loaded as tar streams (shipping between engines).
 */
import type Docker from 'dockerode';
import type { Readable } from 'node:stream';
import { HarnessError, ImageError, Interrupted } from '../../../errors.js';
import { imageRef } from '../../../object-names.js';
import { imageInPath } from './api-paths.js';
import { labelFilter } from './connection.js';
import { daemonMessage, isConnectionError, statusOf, translateDaemonError } from './daemon-errors.js';
import { followProgress } from './progress-stream.js';

export interface ImageSummary {
  id: string;
  tags: string[];
  labels: Record<string, string>;
  createdAt: Date;
  sizeBytes: number;
}

export interface ImageDetails {
  id: string;
  tags: string[];
  labels: Record<string, string>;
  user: string;
  env: string[];
  /** Folders the image declares as volumes (they would escape the writable layer and its budget). */
  volumes: string[];
  /** Bytes, as the engine reports the image's size. */
  sizeBytes?: number;
}

export interface BuildOptions {
  tag: string;
  dockerfile: string;
  buildArgs: Record<string, string>;
  labels: Record<string, string>;
  onLine?: ((line: string) => void) | undefined;
  /** Build-time network: allowed (unlike the sandboxes), so dependencies can be installed. */
  networkMode?: string | undefined;
  /** Ignore the layer cache (a forced rebuild must not just replay cached layers). */
  noCache?: boolean | undefined;
  /** Ctrl-C: the request to the daemon is cancelled, which stops the build. */
  signal?: AbortSignal | undefined;
}

export class EngineImages {
  constructor(
    private readonly docker: Docker,
    private readonly where: string | undefined,
  ) {}

  async inspect(ref: string): Promise<ImageDetails | undefined> {
    const image = this.docker.getImage(imageInPath(ref));
    try {
      const details = await image.inspect();
      return {
        id: details.Id,
        tags: details.RepoTags ?? [],
        labels: details.Config?.Labels ?? {},
        user: details.Config?.User ?? '',
        env: details.Config?.Env ?? [],
        volumes: Object.keys((details.Config?.Volumes as Record<string, unknown> | null | undefined) ?? {}),
        ...(typeof details.Size === 'number' ? { sizeBytes: details.Size } : {}),
      };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw translateDaemonError(error, `inspecting image ${ref}`, this.where);
    }
  }

  async list(labels: Record<string, string | true>): Promise<ImageSummary[]> {
    try {
      const list = await this.docker.listImages({ filters: { label: labelFilter(labels) } });
      return list.map((i) => ({
        id: i.Id,
        tags: i.RepoTags ?? [],
        labels: i.Labels ?? {},
        createdAt: new Date(i.Created * 1000),
        sizeBytes: i.Size,
      }));
    } catch (error) {
      throw translateDaemonError(error, 'listing images', this.where);
    }
  }

  async remove(ref: string): Promise<boolean> {
    const image = this.docker.getImage(imageInPath(ref));
    try {
      await image.remove({ force: false, noprune: false });
      return true;
    } catch (error) {
      const status = statusOf(error);
      // 409: still used by a (kept) container; leave it for a later gc.
      if (status === 404 || status === 409) return false;
      throw translateDaemonError(error, `removing image ${ref}`, this.where);
    }
  }

  async tag(ref: string, repo: string, tag: string): Promise<void> {
    const image = this.docker.getImage(imageInPath(ref));
    imageRef(`${repo}:${tag}`, 'image');
    try {
      await image.tag({ repo, tag });
    } catch (error) {
      throw translateDaemonError(error, `tagging ${ref} as ${repo}:${tag}`, this.where);
    }
  }

  /**
   * `docker save` of one or more images as one tar stream (shared layers once). The caller
   * must consume or destroy it. 404 (an image is missing) is an ImageError.
   */
  async save(refs: string[], options: { signal?: AbortSignal } = {}): Promise<Readable> {
    for (const ref of refs) imageRef(ref, 'image');
    try {
      // dockerode has `getImages` (GET /images/get?names=...); its type definitions do not.
      const docker = this.docker as unknown as {
        getImages(options: { names: string[]; abortSignal?: AbortSignal }): Promise<unknown>;
      };
      return (await docker.getImages({
        names: refs,
        ...(options.signal ? { abortSignal: options.signal } : {}),
      })) as unknown as Readable;
    } catch (error) {
      if (options.signal?.aborted) throw new Interrupted(`saving ${refs.join(', ')}: interrupted`);
      if (statusOf(error) === 404) {
        throw new ImageError(
          `cannot save ${refs.join(', ')} from ${this.where ?? 'the local engine'}: ${daemonMessage(error)}`,
          { cause: error },
        );
      }
      throw translateDaemonError(error, `saving ${refs.join(', ')}`, this.where);
    }
  }

  /**
   * `docker load` from a tar stream (as `save` makes it); resolves with the references the
   * engine reports loaded. A stream that breaks off fails the load: the engine keeps no
   * half-loaded image under a tag.
   */
  async load(tar: Readable, options: { signal?: AbortSignal } = {}): Promise<string[]> {
    const loaded: string[] = [];
    let response: Readable | undefined;
    try {
      response = (await this.docker.loadImage(tar, {
        quiet: true,
        ...(options.signal ? { abortSignal: options.signal } : {}),
      })) as unknown as Readable;
      await followProgress(response, {
        context: 'loading images',
        where: this.where,
        onLine: (line) => {
          const match = /^Loaded image(?: ID)?: (\S+)/.exec(line.trim());
          if (match?.[1]) loaded.push(match[1]);
        },
      });
    } catch (error) {
      if (options.signal?.aborted) throw new Interrupted('loading images: interrupted', { cause: error });
      if (response && error instanceof ImageError) {
        throw new ImageError(
          `loading images into ${this.where ?? 'the local engine'} failed: ${error.message}`,
          {
            cause: error,
          },
        );
      }
      throw translateDaemonError(error, 'loading images', this.where);
    }
    return loaded;
  }

  /** Pulls an image; rejects quickly with ImageError when no registry answers. */
  async pull(
    ref: string,
    onLine?: (line: string) => void,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    imageRef(ref, 'image');
    try {
      const stream = await this.docker.pull(ref, options.signal ? { abortSignal: options.signal } : {});
      await followProgress(stream as unknown as Readable, {
        context: `pulling ${ref}`,
        where: this.where,
        onLine,
      });
    } catch (error) {
      if (error instanceof HarnessError) throw error;
      if (isConnectionError(error)) throw translateDaemonError(error, `pulling ${ref}`, this.where);
      throw new ImageError(`cannot pull ${ref}: ${daemonMessage(error)}`, { cause: error });
    }
  }

  /** `docker import`: turns a root filesystem tarball into an image. */
  async import(tar: Readable, repo: string, tag: string, changes: string[] = []): Promise<void> {
    imageRef(`${repo}:${tag}`, 'image');
    try {
      const stream = await this.docker.importImage(tar, { repo, tag, changes });
      await followProgress(stream as unknown as Readable, {
        context: `importing ${repo}:${tag}`,
        where: this.where,
      });
    } catch (error) {
      if (error instanceof HarnessError) throw error;
      if (isConnectionError(error)) throw translateDaemonError(error, `importing ${repo}:${tag}`, this.where);
      throw new ImageError(`cannot import ${repo}:${tag}: ${daemonMessage(error)}`, { cause: error });
    }
  }

  /** Builds an image from a tar build context; every output line goes to `onLine`. */
  async build(context: Readable, options: BuildOptions): Promise<string> {
    imageRef(options.tag, 'image');
    // Ctrl-C cancels the request, which the daemon takes as the end of the build.
    const interrupted = (cause?: unknown) =>
      new Interrupted(`building ${options.tag}: interrupted`, cause === undefined ? {} : { cause });
    const stop = () => stream?.destroy(interrupted());
    let stream: Readable | undefined;
    options.signal?.addEventListener('abort', stop, { once: true });
    try {
      stream = (await this.docker.buildImage(context, {
        t: options.tag,
        dockerfile: options.dockerfile,
        buildargs: options.buildArgs,
        labels: options.labels,
        rm: true,
        forcerm: true,
        networkmode: options.networkMode,
        nocache: options.noCache === true,
        ...(options.signal ? { abortSignal: options.signal } : {}),
      })) as unknown as Readable;
      await followProgress(stream, {
        context: `building ${options.tag}`,
        where: this.where,
        onLine: options.onLine,
      });
    } catch (error) {
      if (options.signal?.aborted) throw interrupted(error);
      // Before a stream, the daemon refused the request; after, followProgress already said why.
      throw stream ? error : translateDaemonError(error, `building ${options.tag}`, this.where);
    } finally {
      options.signal?.removeEventListener('abort', stop);
    }
    const image = await this.inspect(options.tag);
    if (!image) throw new ImageError(`the build of ${options.tag} finished but the image is missing`);
    return image.id;
  }
}
