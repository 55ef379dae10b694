import { createHash } from 'node:crypto';

/** sha256 (hex) of bytes: how the host names content it has checked. */
export function sha256(content: Buffer | string): string {
  return createHash('sha256').update(content).digest('hex');
}
