/**
 * Shared set-up for tests that need real Docker: the base image (bootstrapped offline when
 * no registry answers) and small repo images built from fixtures. Docker tests never skip:
 * when the engine is missing they fail with the command that fixes it.
 */
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { dockerEngine } from '../../src/sandbox/docker/engine.js';
import { buildRepoImage, ensureBaseImage } from '../../src/sandbox/docker/images.js';

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
