/**
 * Root's look for the freeze (a process as root, started ahead and waiting for its word) costs
 * an exec: started with an agent's command channel, whose sandbox always ends in a freeze, and
 * never for a sandbox that opens its channel only for the harness's own calls.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { ProcessSpec, StartedProcess, Transport } from '../../../src/sandbox/posix/transport.js';
import { bareSandbox as sandbox } from '../../helpers/bare-sandbox.js';

/** Long-lived processes (stdin kept open) that never end; which user each was started as. */
function recording(): { transport: Transport; started: string[] } {
  const started: string[] = [];
  return {
    started,
    transport: {
      async start(spec: ProcessSpec): Promise<StartedProcess> {
        started.push(spec.user ?? 'sandbox');
        const never = new Promise<never>(() => undefined);
        return {
          ...(spec.stdin === 'stream' ? { input: new PassThrough() } : {}),
          exited: never,
          streamEnded: never,
          detach: () => undefined,
        };
      },
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("root's look for the freeze", () => {
  it("starts with an agent's channel, once however often it is asked", async () => {
    const { transport, started } = recording();
    const box = sandbox(transport);
    box.startChannel();
    box.startChannel();
    box.watchFreeze();
    await settle();
    expect(started.sort()).toEqual(['root', 'sandbox']);
  });

  it("starts with a channel a fast call opens (an agent's calls)", async () => {
    const { transport, started } = recording();
    const box = sandbox(transport);
    void box.exec('true', { fast: true }).catch(() => undefined);
    await settle();
    expect(started.sort()).toEqual(['root', 'sandbox']);
  });

  it('does not start with a channel opened without it, even when fast calls use it, until a freeze is announced', async () => {
    const { transport, started } = recording();
    const box = sandbox(transport);
    box.startChannel({ freezeWatch: false });
    void box.exec('true', { fast: true }).catch(() => undefined);
    await settle();
    expect(started).toEqual(['sandbox']);
    box.watchFreeze();
    box.watchFreeze();
    await settle();
    expect(started).toEqual(['sandbox', 'root']);
  });
});
