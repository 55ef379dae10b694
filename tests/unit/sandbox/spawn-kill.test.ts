/**
 * `Sandbox.spawn`'s kill (what the model bridge's relay rides on): once the tree is killed,
 * `exited` tells the end even when the transport sees the exit only after the kill returned,
 * and never waits forever once the transport stopped following.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { ProcessSpec, StartedProcess, Transport } from '../../../src/sandbox/posix/transport.js';
import { bareSandbox as sandbox } from '../../helpers/bare-sandbox.js';

/**
 * A transport like Docker's exec: the spawned process's exit is seen `seenAfterMs` after the
 * kill script ran, and not at all once detached (it stops following). `never`: not at all.
 */
function transport(seenAfterMs: number | 'never'): Transport {
  let spawned: { resolve: (code: number) => void; following: boolean } | undefined;
  return {
    async start(spec: ProcessSpec): Promise<StartedProcess> {
      if (spec.stdin === 'stream') {
        let resolve!: (code: number) => void;
        const exited = new Promise<number>((r) => (resolve = r));
        spawned = { resolve, following: true };
        const own = spawned;
        return {
          input: new PassThrough(),
          exited,
          streamEnded: exited.then(() => undefined),
          detach: () => (own.following = false),
        };
      }
      // The kill script: the spawned tree dies now; its transport notices later.
      const target = spawned;
      if (target && seenAfterMs !== 'never')
        setTimeout(() => target.following && target.resolve(137), seenAfterMs);
      return { exited: Promise.resolve(0), streamEnded: Promise.resolve(), detach: () => undefined };
    },
  };
}

const sink = () => new PassThrough();

describe('spawn, then kill', () => {
  it('tells the exit code seen after the kill returned (the exit was not lost to the detach)', async () => {
    const box = sandbox(transport(50));
    const process = await box.spawn(['cat'], { stdout: sink(), stderr: sink() });
    await process.kill();
    expect(await process.exited).toBe(137);
  });

  it('resolves exited (-1) when the exit is never seen, instead of waiting forever', async () => {
    const box = sandbox(transport('never'));
    const process = await box.spawn(['cat'], { stdout: sink(), stderr: sink() });
    await process.kill();
    expect(await process.exited).toBe(-1);
  }, 15_000);
});
