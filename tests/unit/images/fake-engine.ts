/**
 * A Docker engine for unit tests of the image code: images in a map, pulls and builds
 * recorded (each build drains its tar, as the daemon does, so the context is produced in
 * full), and hooks to make a pull or a build fail.
 */
import type { Readable } from 'node:stream';
import { ImageError } from '../../../src/errors.js';
import type { BuildOptions, DockerEngine, ImageDetails } from '../../../src/sandbox/docker/engine/index.js';

export interface FakeEngine {
  images: Map<string, ImageDetails>;
  pulls: string[];
  builds: BuildOptions[];
  pull: (ref: string, onLine?: (line: string) => void, options?: { signal?: AbortSignal }) => Promise<void>;
  /** A build whose BASE build argument is this fails as a recipe would without network. */
  failBuildOn?: string;
  engine: DockerEngine;
}

export function imageDetails(tag: string, id: string, labels: Record<string, string> = {}): ImageDetails {
  return { id, tags: [tag], labels, user: 'sandbox', env: [], volumes: [] };
}

export function fakeEngine(present: string[] = []): FakeEngine {
  const fake: FakeEngine = {
    images: new Map(present.map((tag, i) => [tag, imageDetails(tag, `sha256:present-${i}`)])),
    pulls: [],
    builds: [],
    pull: async () => undefined,
    engine: undefined as unknown as DockerEngine,
  };
  fake.engine = {
    images: {
      inspect: async (ref: string) => fake.images.get(ref),
      pull: async (ref: string, onLine?: (line: string) => void, options?: { signal?: AbortSignal }) => {
        fake.pulls.push(ref);
        await fake.pull(ref, onLine, options);
      },
      build: async (context: Readable, options: BuildOptions) => {
        for await (const _chunk of context) {
          // drain: the tar must be produced completely, as for the real daemon
        }
        fake.builds.push(options);
        if (fake.failBuildOn && options.buildArgs.BASE === fake.failBuildOn)
          throw new ImageError('apt-get: network unreachable');
        const id = `sha256:${String(fake.builds.length).padStart(64, '0')}`;
        fake.images.set(options.tag, imageDetails(options.tag, id, options.labels));
        return id;
      },
      remove: async () => true,
    },
  } as unknown as DockerEngine;
  return fake;
}
