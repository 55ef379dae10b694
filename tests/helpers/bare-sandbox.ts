/**
 * A POSIX sandbox over a transport a test makes (fake processes): the layer every backend
 * shares, without an engine under it. Alive, never disposed of, never hard-frozen.
 */
import { PosixSandbox } from '../../src/sandbox/posix/posix-sandbox.js';
import type { Transport } from '../../src/sandbox/posix/transport.js';

export class BareSandbox extends PosixSandbox {
  async isAlive(): Promise<boolean> {
    return true;
  }
  async dispose(): Promise<void> {}
  protected async hardFreeze(): Promise<void> {}
}

export function bareSandbox(transport: Transport): BareSandbox {
  return new BareSandbox({
    id: 'bare',
    image: 'bare',
    labels: {},
    env: [],
    transport,
    tree: async () => new Map(),
  });
}
