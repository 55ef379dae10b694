/**
 * Forks: a sandbox's state (its workspace and the rest of its writable layer: installed
 * dependencies, build output, the agent's files) becomes an image that new sandboxes start
 * from, hardened like any sandbox (they are made by `SandboxBackend.create` from the shared
 * container spec). Used by `fix --continue --from-sandbox` (the kept sandbox's state, not
 * only its patch) and by parallel attempts that start from one prepared state.
 *
 * A fork is never a verification base: verification sandboxes are made from the pristine
 * image plus exactly the gated change, whatever a fork holds outside that change.
 *
 * A backend forks by implementing `forkImage` (Docker: the engine's commit). One that cannot
 * says so (`ForkUnsupported`), never silently starting from the image instead.
 */
import { HarnessError } from '../../errors.js';
import type { AttachRequest, PathChange, Sandbox, SandboxBackend } from '../types.js';
import { ForkedSandbox } from './forked-sandbox.js';

/** A fork: the image, and the changes its source had made against the pristine tree. */
export interface Fork {
  image: string;
  imageId: string;
  /** The source sandbox's change scan when it was forked (a hint, see `ForkedSandbox`). */
  inherited: readonly PathChange[];
  durationMs: number;
}

export class ForkUnsupported extends HarnessError {
  constructor(backend: string) {
    super(
      'FORK_UNSUPPORTED',
      'config',
      `the ${backend} backend cannot fork a sandbox (make an image of its state)`,
      {
        hint: 'Run on the docker backend, or start from the patch: fix --continue without --from-sandbox.',
      },
    );
  }
}

/** Most changed paths a fork carries; past it the fork is refused rather than half-known. */
export const MAX_FORK_CHANGES = 100_000;

/**
 * Forks `source` (a sandbox of run `request.runId`, running or kept) for run `owner`. The
 * source's changes are read first, then its state committed; the caller freezes it before,
 * when processes of its own may still be writing.
 */
export async function forkSandbox(
  backend: SandboxBackend,
  source: Sandbox,
  request: AttachRequest,
  options: { owner: string; signal?: AbortSignal | undefined },
): Promise<Fork> {
  if (!backend.forkImage) throw new ForkUnsupported(backend.name);
  const started = Date.now();
  const scan = await source.changes({
    maxEntries: MAX_FORK_CHANGES,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (!scan.complete)
    throw new HarnessError(
      'FORK_TOO_LARGE',
      'config',
      `sandbox ${source.id.slice(0, 12)} changed more than ${MAX_FORK_CHANGES} paths; it is not forked`,
    );
  const made = await backend.forkImage(request, {
    owner: options.owner,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return {
    image: made.image,
    imageId: made.imageId,
    inherited: scan.changes,
    durationMs: Date.now() - started,
  };
}

/**
 * A sandbox made from `fork.image`, whose change scan includes what the fork carried, but
 * nothing at or under `hidden` (paths removed from the new sandbox, held-out tests: the
 * source had them removed too, which is no change of anyone's).
 */
export function forkedSandbox(sandbox: Sandbox, fork: Fork, hidden: readonly string[] = []): Sandbox {
  const under = (path: string) => hidden.some((h) => path === h || path.startsWith(`${h}/`));
  return new ForkedSandbox(
    sandbox,
    fork.inherited.filter((c) => !under(c.path)),
  );
}

/** Removes a fork's image when nothing uses it any more; gc removes one still in use later. */
export async function removeFork(backend: SandboxBackend, fork: Fork): Promise<void> {
  await backend.removeForkImage?.(fork.image);
}
