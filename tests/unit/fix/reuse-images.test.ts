/** Within an eval, a repo's image is resolved once per catalog; a failure is not remembered. */
import { describe, expect, it } from 'vitest';
import { reuseImages } from '../../../src/fix/deps.js';
import type { FixDeps, ImageRequest, SandboxImage } from '../../../src/fix/context.js';
import type { LoadedCatalog } from '../../../src/catalog/load.js';

function fakeDeps(fail: { next: boolean }): { deps: FixDeps; calls: ImageRequest[] } {
  const calls: ImageRequest[] = [];
  const deps = {
    image: async (request: ImageRequest): Promise<SandboxImage> => {
      calls.push(request);
      if (fail.next) {
        fail.next = false;
        throw new Error('the engine said no');
      }
      return {
        tag: `img-${calls.length}`,
        imageId: 'sha256:x',
        reused: false,
        buildNetwork: false,
        hostFiles: new Map(),
      };
    },
  } as unknown as FixDeps;
  return { deps, calls };
}

const request = (hash: string, rebuild = false): ImageRequest => ({
  repoDir: '/repo',
  catalog: { file: '/repo/catalog.yaml', hash } as LoadedCatalog,
  rebuild,
  logFile: '/tmp/log',
  onProgress: () => undefined,
});

describe('reuseImages', () => {
  it('resolves an image once per repo and catalog, and says the later ones found it made', async () => {
    const { deps, calls } = fakeDeps({ next: false });
    const reusing = reuseImages(deps);
    const first = await reusing.image(request('a'));
    const second = await reusing.image(request('a'));
    expect(calls).toHaveLength(1);
    expect([first.tag, first.reused]).toEqual(['img-1', false]);
    expect([second.tag, second.reused]).toEqual(['img-1', true]);
    // Another catalog of the same repo (other recipe or build options) is another image.
    expect((await reusing.image(request('b'))).tag).toBe('img-2');
    // --rebuild always asks.
    await reusing.image(request('a', true));
    expect(calls).toHaveLength(3);
  });

  it('does not remember a failure', async () => {
    const fail = { next: true };
    const { deps, calls } = fakeDeps(fail);
    const reusing = reuseImages(deps);
    await expect(reusing.image(request('a'))).rejects.toThrow(/said no/);
    expect((await reusing.image(request('a'))).tag).toBe('img-2');
    expect(calls).toHaveLength(2);
  });
});
