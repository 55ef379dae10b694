/** Which attempt a recorded sandbox served, read from its role (no schema: the CLI loads it before any command). */
import type { ContainerRecord } from './record.js';

/**
 * The attempt whose sandbox `container` was, or undefined: an `attempt-N` role, or a
 * `verify-N` one for an attempt that had no sandbox of its own (a replayed patch is written
 * straight into its verification's, see `fix/attempt.ts`).
 */
export function attemptOfContainer(
  container: ContainerRecord,
  containers: readonly ContainerRecord[],
): number | undefined {
  const own = /^attempt-(\d+)$/.exec(container.role);
  if (own) return Number(own[1]);
  const verify = /^verify-(\d+)$/.exec(container.role);
  if (!verify || containers.some((c) => c.role === `attempt-${verify[1]}`)) return undefined;
  return Number(verify[1]);
}
