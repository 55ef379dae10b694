/**
 * Containers of one engine: made from the one hardened spec (the create body is rendered by
 * `create-body.ts`, nowhere else), started, stopped, inspected, listed, read and written as
 * archives, committed. Our own small types in and out; daemon failures in our error family.
 */
import type Docker from 'dockerode';
import type { Readable } from 'node:stream';
import { ConfigError, HarnessError, ImageError, SandboxDead } from '../../../errors.js';
import { imageRef, parseObjectName } from '../../../object-names.js';
import type { ContainerSpec } from '../../container/container-spec.js';
import { loopbackNameEntries, SANDBOX_HOSTNAME } from '../../container/loopback-names.js';
import { packTar } from '../../tar.js';
import { labelFilter } from './connection.js';
import { containerInPath, imageInPath } from './api-paths.js';
import { createBody } from './create-body.js';
import {
  containerFailure,
  daemonMessage,
  statusOf,
  StorageQuotaUnsupported,
  translateDaemonError,
} from './daemon-errors.js';

export interface ContainerSummary {
  id: string;
  name: string;
  image: string;
  state: string;
  labels: Record<string, string>;
  createdAt: Date;
}

export interface ContainerDetails {
  id: string;
  name: string;
  image: string;
  imageId: string;
  running: boolean;
  status: string;
  exitCode: number;
  oomKilled: boolean;
  startedAt: string;
  finishedAt: string;
  env: string[];
  labels: Record<string, string>;
  hostConfig: Record<string, unknown>;
  /** The storage driver and, for overlay2, where the container's layers are on the engine's host. */
  graphDriver: { name: string; upperDir?: string; mergedDir?: string };
}

export interface RawChange {
  path: string;
  kind: 'modified' | 'added' | 'deleted';
}

/** The same two files for every container: packed once. */
let loopbackTar: Promise<Buffer> | undefined;

export class EngineContainers {
  constructor(
    private readonly docker: Docker,
    private readonly where: string | undefined,
  ) {}

  /** dockerode's handle of a container; the id is checked and escaped before it goes into a path. */
  private handle(id: string): Docker.Container {
    return this.docker.getContainer(containerInPath(id));
  }

  /** A container of the one hardened spec (`hardenedContainer`), its files placed; not started. */
  async create(spec: ContainerSpec): Promise<string> {
    const id = await this.createBare(spec);
    await this.placeFiles(id, spec);
    return id;
  }

  /**
   * `localhost` and the sandbox's own name for every container this code makes, and the
   * caller's files, before it starts (see loopback-names.ts for why the engine's own hosts
   * file is not used). A container that cannot get them is removed: none runs without them.
   */
  private async placeFiles(id: string, spec: ContainerSpec): Promise<void> {
    try {
      const own = spec.files.length > 0 || spec.hostname !== SANDBOX_HOSTNAME;
      loopbackTar ??= packTar(loopbackNameEntries());
      const tar = own
        ? await packTar([...loopbackNameEntries(spec.hostname), ...spec.files])
        : await loopbackTar;
      await this.putArchive(id, '/', tar);
    } catch (error) {
      await this.remove(id).catch(() => undefined);
      if (error instanceof HarnessError && error.code === 'SANDBOX_FILE') {
        const names = ['/etc/hosts', '/etc/resolv.conf', ...spec.files.map((f) => `/${f.name}`)];
        throw new ImageError(
          `image ${spec.image}: cannot place ${names.join(', ')} (${error.message}); does the image have a folder or a file where one of them goes?`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  private async createBare(spec: ContainerSpec): Promise<string> {
    imageRef(spec.image, 'image');
    if (spec.name !== undefined) parseObjectName(spec.name, 'container name');
    try {
      const container = await this.docker.createContainer(createBody(spec));
      return container.id;
    } catch (error) {
      if (spec.diskBytes && /storage-?opt|quota|xfs/i.test(daemonMessage(error))) {
        throw new StorageQuotaUnsupported(daemonMessage(error));
      }
      if (
        spec.runtime &&
        /unknown or invalid runtime|runtime .*not (found|available)/i.test(daemonMessage(error))
      ) {
        throw new ConfigError(
          `runtime "${spec.runtime}" is not available on ${this.where ?? 'the local engine'}: ${daemonMessage(error)}`,
          [],
          {
            hint: 'sandbox-harness doctor lists the runtimes the engine has (and how to add gVisor).',
            cause: error,
          },
        );
      }
      if (statusOf(error) === 404) {
        throw new ImageError(`image ${spec.image} does not exist`, {
          hint: "Build it first (`sandbox-harness images bootstrap` for the base image) or check the catalog's sandbox.image.",
          cause: error,
        });
      }
      throw translateDaemonError(error, `creating a container from ${spec.image}`, this.where);
    }
  }

  async start(id: string): Promise<void> {
    const container = this.handle(id);
    try {
      await container.start();
    } catch (error) {
      if (statusOf(error) === 304) return;
      throw containerFailure(error, id, 'starting', this.where);
    }
  }

  async stop(id: string, timeoutSec = 2): Promise<void> {
    const container = this.handle(id);
    try {
      await container.stop({ t: timeoutSec });
    } catch (error) {
      const status = statusOf(error);
      if (status === 304 || status === 404) return;
      throw translateDaemonError(error, `stopping container ${id.slice(0, 12)}`, this.where);
    }
  }

  async remove(id: string): Promise<void> {
    const container = this.handle(id);
    try {
      await container.remove({ force: true, v: true });
    } catch (error) {
      const status = statusOf(error);
      if (status === 404) return;
      // 409: removal already in progress.
      if (status === 409 && /already in progress/i.test(daemonMessage(error))) return;
      throw translateDaemonError(error, `removing container ${id.slice(0, 12)}`, this.where);
    }
  }

  /** Stops a container at once (SIGKILL to everything in it) and starts it again. */
  async restart(id: string): Promise<void> {
    const container = this.handle(id);
    try {
      await container.restart({ t: 0 });
    } catch (error) {
      throw containerFailure(error, id, 'restarting', this.where);
    }
  }

  /** Bytes in the container's writable layer, as the engine counts them. */
  async diskUsage(id: string): Promise<number> {
    const container = this.handle(id);
    try {
      // The typings omit `size`; the Engine API takes it and then reports SizeRw.
      const options = { size: true } as Docker.ContainerInspectOptions;
      const c = (await container.inspect(options)) as { SizeRw?: number };
      return c.SizeRw ?? 0;
    } catch (error) {
      throw containerFailure(error, id, 'measuring the disk use of', this.where);
    }
  }

  async rename(id: string, name: string): Promise<void> {
    const container = this.handle(id);
    parseObjectName(name, 'container name');
    try {
      await container.rename({ name });
    } catch (error) {
      throw containerFailure(error, id, 'renaming', this.where);
    }
  }

  async inspect(id: string): Promise<ContainerDetails | undefined> {
    const container = this.handle(id);
    try {
      const c = await container.inspect();
      return {
        id: c.Id,
        name: c.Name.replace(/^\//, ''),
        image: c.Config.Image,
        imageId: c.Image,
        running: c.State.Running,
        status: c.State.Status,
        exitCode: c.State.ExitCode,
        oomKilled: c.State.OOMKilled,
        startedAt: c.State.StartedAt,
        finishedAt: c.State.FinishedAt,
        env: c.Config.Env ?? [],
        labels: c.Config.Labels ?? {},
        hostConfig: c.HostConfig as unknown as Record<string, unknown>,
        graphDriver: graphDriverOf(c.GraphDriver),
      };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw translateDaemonError(error, `inspecting container ${id.slice(0, 12)}`, this.where);
    }
  }

  async list(labels: Record<string, string | true>): Promise<ContainerSummary[]> {
    try {
      const list = await this.docker.listContainers({ all: true, filters: { label: labelFilter(labels) } });
      return list.map((c) => ({
        id: c.Id,
        name: (c.Names[0] ?? '').replace(/^\//, ''),
        image: c.Image,
        state: c.State,
        labels: c.Labels ?? {},
        createdAt: new Date(c.Created * 1000),
      }));
    } catch (error) {
      throw translateDaemonError(error, 'listing containers', this.where);
    }
  }

  async changes(id: string): Promise<RawChange[]> {
    const container = this.handle(id);
    try {
      const changes = (await container.changes()) as Array<{ Path: string; Kind: number }> | null | undefined;
      return (changes ?? []).map((c) => ({
        path: c.Path,
        kind: c.Kind === 1 ? 'added' : c.Kind === 2 ? 'deleted' : 'modified',
      }));
    } catch (error) {
      throw containerFailure(error, id, 'reading the changes of', this.where);
    }
  }

  /** Returns the tar stream of `path`, or undefined when it does not exist. */
  async getArchive(id: string, path: string): Promise<Readable | undefined> {
    const container = this.handle(id);
    try {
      return (await container.getArchive({ path })) as unknown as Readable;
    } catch (error) {
      if (statusOf(error) === 404) {
        const details = await this.inspect(id);
        if (!details) throw new SandboxDead(`sandbox ${id.slice(0, 12)} no longer exists`, { cause: error });
        return undefined;
      }
      throw containerFailure(error, id, 'reading files from', this.where);
    }
  }

  /** Extracts a tar archive (bytes, or a stream) into `path`; returns false when `path` does not exist in the container. */
  async putArchive(id: string, path: string, tar: Buffer | Readable): Promise<boolean> {
    const container = this.handle(id);
    try {
      await container.putArchive(tar, { path, noOverwriteDirNonDir: '1' });
      return true;
    } catch (error) {
      if (statusOf(error) === 404) {
        const details = await this.inspect(id);
        if (!details) throw new SandboxDead(`sandbox ${id.slice(0, 12)} no longer exists`, { cause: error });
        return false;
      }
      if (statusOf(error) === 403 || statusOf(error) === 400) {
        throw new HarnessError(
          'SANDBOX_FILE',
          'usage',
          `cannot write into ${path}: ${daemonMessage(error)}`,
          {
            cause: error,
          },
        );
      }
      throw containerFailure(error, id, 'writing files into', this.where);
    }
  }

  /** What a (finished) container wrote to stdout, at most `maxBytes`. Hostile data, like all output. */
  async output(id: string, maxBytes = 64 * 1024): Promise<string> {
    const container = this.handle(id);
    let raw: Buffer;
    try {
      raw = (await container.logs({ stdout: true, stderr: false, follow: false })) as unknown as Buffer;
    } catch (error) {
      throw containerFailure(error, id, 'reading the output of', this.where);
    }
    // Without a TTY the log is framed: 8-byte headers (stream, 3 zero bytes, length).
    const parts: Buffer[] = [];
    let size = 0;
    for (let offset = 0; offset + 8 <= raw.length && size < maxBytes;) {
      const length = raw.readUInt32BE(offset + 4);
      const chunk = raw.subarray(offset + 8, Math.min(offset + 8 + length, raw.length));
      if (raw[offset] === 1) {
        parts.push(chunk.subarray(0, maxBytes - size));
        size += chunk.length;
      }
      offset += 8 + length;
    }
    return Buffer.concat(parts).toString('utf8');
  }

  /**
   * `docker commit` of a container (stopped, or paused with `pause`): its writable layer on top of its image, as
   * `repo:tag` with the given labels (the image's own config otherwise). Returns the image id.
   */
  async commit(
    id: string,
    options: { repo: string; tag: string; labels: Record<string, string>; pause?: boolean | undefined },
  ): Promise<string> {
    const container = this.handle(id);
    imageRef(`${options.repo}:${options.tag}`, 'image');
    try {
      const inspected = await container.inspect();
      const source = await this.docker.getImage(imageInPath(inspected.Image)).inspect();
      const result = (await container.commit({
        repo: options.repo,
        tag: options.tag,
        // A running container (a fork) is paused while its layer is read, so the image is one moment.
        pause: options.pause ?? false,
        // The labels as instructions too: Podman's API takes no config in the body (the image
        // kept the container's labels, and gc and the fork's removal did not know it as ours).
        changes: Object.entries(options.labels).map(
          ([name, value]) => `LABEL ${JSON.stringify(name)}=${JSON.stringify(value)}`,
        ),
        // The new image's config: the container's, with its image's entry point and command back.
        _body: {
          Entrypoint: source.Config?.Entrypoint ?? [],
          Cmd: source.Config?.Cmd ?? [],
          Labels: { ...source.Config?.Labels, ...options.labels },
        },
      })) as { Id?: string };
      if (!result.Id) throw new Error('the engine returned no image id');
      return result.Id;
    } catch (error) {
      throw translateDaemonError(error, `committing container ${id.slice(0, 12)}`, this.where);
    }
  }
}

/** dockerode types GraphDriver.Data for devicemapper only; overlay2 names its folders there. */
function graphDriverOf(raw: { Name?: string; Data?: unknown } | undefined): ContainerDetails['graphDriver'] {
  const data = (raw?.Data ?? {}) as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  const upperDir = text(data.UpperDir);
  const mergedDir = text(data.MergedDir);
  return {
    name: raw?.Name ?? '',
    ...(upperDir ? { upperDir } : {}),
    ...(mergedDir ? { mergedDir } : {}),
  };
}
