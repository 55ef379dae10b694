/**
 * The image build's time limit, for any backend: past it the build's signal is aborted and
 * the caller gets a BuildTimeout (a configuration's limit, not an engine failure) naming the
 * file and field that set it; without a limit the request passes as it is; Ctrl-C still stops
 * the build. A catalog's `sandbox.timeouts.buildSec` becomes the request's limit.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../src/catalog/load.js';
import { BuildTimeout, Interrupted } from '../../../src/errors.js';
import { catalogImageOptions, fixDeps } from '../../../src/fix/deps.js';
import { withBuildTimeLimit } from '../../../src/image-context/build-limit.js';
import type { RepoImage, RepoImageRequest } from '../../../src/image-context/request.js';
import type { SandboxProvider } from '../../../src/sandbox/backend-registry.js';

const IMAGE: RepoImage = {
  tag: 'sandbox-harness/repo-x:1',
  imageId: 'sha256:1',
  reused: false,
  hostFiles: new Map(),
};

/** A build that runs until its signal is aborted, and then ends as an engine's does. */
function hangingBuild(seen: { signal?: AbortSignal | undefined }) {
  return (request: RepoImageRequest): Promise<RepoImage> =>
    new Promise((_, reject) => {
      seen.signal = request.signal;
      request.signal?.addEventListener('abort', () => reject(new Interrupted('building: interrupted')), {
        once: true,
      });
    });
}

const limit = { sec: 0.05, file: 'tasks/t/task.toml', field: 'environment.build_timeout_sec' };

describe('withBuildTimeLimit', () => {
  it('stops a build past its limit and names the file and field that set it', async () => {
    const seen: { signal?: AbortSignal } = {};
    const error = await withBuildTimeLimit({ repoDir: '/r', timeLimit: limit }, hangingBuild(seen)).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(BuildTimeout);
    expect((error as BuildTimeout).category).toBe('config');
    expect((error as Error).message).toMatch(
      /^tasks\/t\/task\.toml: environment\.build_timeout_sec: making the sandbox image took longer than its limit of 0\.05 s/,
    );
    expect((error as BuildTimeout).hint).toContain(
      'Raise environment.build_timeout_sec in tasks/t/task.toml',
    );
    expect(seen.signal?.aborted).toBe(true);
  });

  it('passes a build within its limit, and a request without one, as they are', async () => {
    let asked: RepoImageRequest | undefined;
    const build = async (request: RepoImageRequest) => {
      asked = request;
      return IMAGE;
    };
    await expect(
      withBuildTimeLimit({ repoDir: '/r', timeLimit: { ...limit, sec: 60 } }, build),
    ).resolves.toBe(IMAGE);
    const plain: RepoImageRequest = { repoDir: '/r' };
    await expect(withBuildTimeLimit(plain, build)).resolves.toBe(IMAGE);
    expect(asked).toBe(plain);
  });

  it("stops the build on the caller's signal too, with the caller's reason", async () => {
    const seen: { signal?: AbortSignal } = {};
    const controller = new AbortController();
    const pending = withBuildTimeLimit(
      { repoDir: '/r', timeLimit: { ...limit, sec: 60 }, signal: controller.signal },
      hangingBuild(seen),
    );
    controller.abort(new Interrupted());
    await expect(pending).rejects.toBeInstanceOf(Interrupted);
    expect(seen.signal?.reason).toBeInstanceOf(Interrupted);
  });
});

describe("a catalog's build limit", () => {
  it('is the request limit of every image fix asks for, named by the catalog file and field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'build-limit-'));
    try {
      const file = join(dir, 'catalog.yaml');
      await writeFile(
        file,
        'name: svc\nowner: me\nrepo: .\nagent:\n  editableFiles: ["src/**"]\n  testCommand: npm test\nsandbox:\n  timeouts: { buildSec: 0.05 }\n',
      );
      const catalog = await loadCatalog(file, { cwd: dir });
      const options = catalogImageOptions(catalog);
      expect(options.timeLimit).toEqual({
        sec: 0.05,
        file: 'catalog.yaml',
        field: 'sandbox.timeouts.buildSec',
      });
      // fixDeps applies it to the provider's build.
      const seen: { signal?: AbortSignal } = {};
      const provider = { backend: {}, preflight: async () => undefined, repoImage: hangingBuild(seen) };
      const deps = fixDeps(provider as unknown as SandboxProvider);
      await expect(deps.image({ repoDir: dir, ...options })).rejects.toThrow(
        /^catalog\.yaml: sandbox\.timeouts\.buildSec: making the sandbox image took longer/,
      );
      expect(seen.signal?.aborted).toBe(true);
      // Without the field, no limit of its own.
      await writeFile(
        file,
        'name: svc\nowner: me\nrepo: .\nagent:\n  editableFiles: ["src/**"]\n  testCommand: npm test\n',
      );
      expect(catalogImageOptions(await loadCatalog(file, { cwd: dir })).timeLimit).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
