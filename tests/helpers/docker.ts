/**
 * Shared set-up for tests that need real Docker: the base image (bootstrapped offline when
 * no registry answers) and small repo images built from fixtures. Docker tests never skip:
 * when the engine is missing they fail with the command that fixes it.
 */
import { hardenedContainer, IDLE_CONTAINER_LIMITS } from '../../src/sandbox/container/container-spec.js';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { buildRepoImage, type BuildRepoImageOptions } from '../../src/sandbox/docker/images/repo-image.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';

const run = promisify(execFile);

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');

export async function requireDocker(): Promise<void> {
  await dockerEngine().ping(5000);
}

const built = new Map<string, Promise<string>>();

/** Image of a fixture repo under tests/fixtures/repos/, built once per test process. */
export function fixtureImage(name: string): Promise<string> {
  let pending = built.get(name);
  if (!pending) {
    pending = (async () => {
      await requireDocker();
      await ensureBaseImage('node', {});
      const result = await buildRepoImage({ repoDir: join(FIXTURES, 'repos', name) });
      return result.tag;
    })();
    built.set(name, pending);
  }
  return pending;
}

/**
 * Private copies of a fixture repo, each under a unique folder name (so its image tag is
 * unique too), and the images built from them, all removed by `cleanUp`.
 */
export class ScratchRepos {
  private dir: string | undefined;
  private readonly tags = new Set<string>();
  /** A forced rebuild moves the tag; the image it leaves untagged is removed by id. */
  private readonly ids = new Set<string>();

  constructor(
    private readonly prefix: string,
    private readonly fixture = 'tiny-node',
  ) {}

  /** Checks the engine and makes sure the base image exists (the first time: minutes). */
  async setUp(): Promise<void> {
    await requireDocker();
    this.dir = await mkdtemp(join(tmpdir(), `sh-${this.prefix}-`));
    await ensureBaseImage('node', { onLine: () => undefined });
  }

  async cleanUp(): Promise<void> {
    for (const ref of [...this.tags, ...this.ids]) await dockerEngine().images.remove(ref);
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }

  get scratch(): string {
    if (!this.dir) throw new Error('ScratchRepos.setUp() was not awaited');
    return this.dir;
  }

  async fresh(): Promise<string> {
    const dir = join(this.scratch, `${this.prefix}-${randomBytes(4).toString('hex')}`);
    await cp(join(FIXTURES, 'repos', this.fixture), dir, { recursive: true });
    return dir;
  }

  /** Builds (or reuses) the repo's image; the image is removed by `cleanUp`. */
  async build(repoDir: string, extra: Partial<BuildRepoImageOptions> = {}) {
    const lines: string[] = [];
    const image = await buildRepoImage({ repoDir, onProgress: (l) => lines.push(l), ...extra });
    this.tags.add(image.tag);
    this.ids.add(image.imageId);
    return { image, lines };
  }
}

/** Runs a command in a throwaway, network-less container of `image`; its stdout. */
export async function inImage(image: string, script: string): Promise<string> {
  const { stdout } = await run('docker', ['run', '--rm', '--network', 'none', image, 'sh', '-c', script]);
  return stdout;
}

/**
 * A container this tool did not make (its own labels, no harness marks): what a
 * forged run record points at. The caller removes it.
 */
export async function foreignContainer(image: string, options: { start: boolean }): Promise<string> {
  const engine = dockerEngine();
  const id = await engine.containers.create(
    hardenedContainer({
      image,
      entrypoint: ['sleep'],
      cmd: ['infinity'],
      user: '1000:1000',
      workingDir: '/',
      env: [],
      labels: { purpose: 'someone else' },
      ...IDLE_CONTAINER_LIMITS,
    }),
  );
  if (options.start) await engine.containers.start(id);
  return id;
}
