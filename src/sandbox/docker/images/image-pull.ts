/** Pulling an image without letting a black-holed registry hang set-up. */
import { HarnessError, ImageError, Interrupted } from '../../../errors.js';
import { formatDuration } from '../../../format.js';
import type { DockerEngine } from '../engine/index.js';

export async function tryPull(
  engine: DockerEngine,
  ref: string,
  say: (line: string) => void,
  idleMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  say(`pulling ${ref}`);
  const failure = await pullWithIdleTimeout(engine, ref, say, idleMs, signal);
  if (failure === undefined) return true;
  say(`cannot pull ${ref}: ${failure}`);
  return false;
}

/**
 * Pulls `ref`; resolves with undefined on success or the reason it failed. A pull that
 * shows no progress for `idleMs` is given up: a black-holed registry must not hang set-up.
 */
export async function pullWithIdleTimeout(
  engine: DockerEngine,
  ref: string,
  onLine: ((line: string) => void) | undefined,
  idleMs: number,
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  const controller = new AbortController();
  const abortFromCaller = () => controller.abort();
  signal?.addEventListener('abort', abortFromCaller, { once: true });
  let timer = setTimeout(() => controller.abort(), idleMs);
  const bump = () => {
    clearTimeout(timer);
    timer = setTimeout(() => controller.abort(), idleMs);
  };
  // Aborting the request may not end the progress stream it already returned; this ends the wait.
  const aborted = new Promise<never>((_, reject) => {
    controller.signal.addEventListener('abort', () => reject(new ImageError(`no progress pulling ${ref}`)), {
      once: true,
    });
  });
  aborted.catch(() => undefined);
  try {
    await Promise.race([
      engine.images.pull(
        ref,
        (line) => {
          bump();
          onLine?.(line);
        },
        { signal: controller.signal },
      ),
      aborted,
    ]);
    return undefined;
  } catch (error) {
    if (signal?.aborted) throw new Interrupted(`pulling ${ref}: interrupted`);
    if (error instanceof HarnessError && !(error instanceof ImageError)) throw error;
    if (controller.signal.aborted) return `no progress for ${formatDuration(idleMs)}`;
    return ((error as Error).message.split('\n')[0] ?? '').replace(/^cannot pull \S+: /, '');
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', abortFromCaller);
  }
}
