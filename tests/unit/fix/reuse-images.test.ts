/** Within an eval, a repo's image is resolved once per catalog; a failure is not remembered. */
import { describe, expect, it } from 'vitest';
import { reuseImages } from '../../../src/fix/deps.js';
import type { FixDeps } from '../../../src/fix/types.js';
import type { RepoImage, RepoImageRequest } from '../../../src/image-context/request.js';

function fakeDeps(fail: { next: boolean }): { deps: FixDeps; calls: RepoImageRequest[] } {
  const calls: RepoImageRequest[] = [];
  const deps = {
    image: async (request: RepoImageRequest): Promise<RepoImage> => {
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

/** Recipe `a` or `b` of one repo, as two catalogs would ask for it; the log and listener differ each time. */
const request = (recipe: string, rebuild = false): RepoImageRequest => ({
  repoDir: '/repo',
  dockerfile: `Dockerfile.${recipe}`,
  dockerfileRoot: '/repo/catalogs',
  buildArgs: { B: '2', A: '1' },
  buildNetwork: false,
  rebuild,
  logFile: `/tmp/log-${Math.random()}`,
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
    // Build arguments in another order are the same build; other arguments, another network or other exclusions are not.
    expect((await reusing.image({ ...request('a'), buildArgs: { A: '1', B: '2' } })).tag).toBe('img-1');
    expect((await reusing.image({ ...request('a'), buildArgs: { A: '1' } })).tag).toBe('img-3');
    expect((await reusing.image({ ...request('a'), buildNetwork: true })).tag).toBe('img-4');
    expect((await reusing.image({ ...request('a'), excludes: ['x'] })).tag).toBe('img-5');
    expect((await reusing.image({ ...request('a'), prebuilt: 'their/image:1' })).tag).toBe('img-6');
    expect(calls).toHaveLength(6);
    // --rebuild always asks.
    await reusing.image(request('a', true));
    expect(calls).toHaveLength(7);
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
