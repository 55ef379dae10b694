/**
 * An eval of 11 tasks printed MaxListenersExceededWarning: each trial waiting for a slot
 * added its own abort listener to the eval's one signal, and every command and file call of
 * a sandbox left one on the run's signal. Listeners are counted here, not the limit raised.
 */
import { getEventListeners } from 'node:events';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runEval } from '../../../src/evals/runner.js';
import { Placement } from '../../../src/fleet/placement.js';
import { runCommand, runScript } from '../../../src/sandbox/posix/exec.js';
import type { StartedProcess, Transport } from '../../../src/sandbox/posix/transport.js';
import { delay, fakeSuite, result, withTempDir } from './helpers.js';

describe('abort listeners', () => {
  it('an eval of 11 tasks x 3 trials at concurrency 2 warns of no listener leak', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      await withTempDir(async (dir) => {
        const controller = new AbortController();
        let most = 0;
        const run = await runEval({
          suite: fakeSuite(Array.from({ length: 11 }, (_, i) => `task-${i}`)),
          n: 3,
          concurrency: 2,
          outDir: dir,
          signal: controller.signal,
          runner: async (spec) => {
            most = Math.max(most, getEventListeners(controller.signal, 'abort').length);
            await delay(2);
            return result(spec, 'ready-for-review');
          },
        });
        expect(run.results).toHaveLength(33);
        expect(most).toBeLessThanOrEqual(2);
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
      });
      // Warnings are emitted on the next tick.
      await delay(10);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  });

  it('Placement: thirty waiters on one signal share one listener; an abort rejects them all', async () => {
    const placement = new Placement([{ name: 'local', capacity: 1 }]);
    const controller = new AbortController();
    const held = await placement.acquire(controller.signal);
    const waiting = Array.from({ length: 30 }, () => placement.acquire(controller.signal));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort(new Error('stop'));
    const settled = await Promise.allSettled(waiting);
    expect(settled.every((s) => s.status === 'rejected')).toBe(true);
    held.release();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('Placement: once every waiter got its slot, no listener is left', async () => {
    const placement = new Placement([{ name: 'local', capacity: 1 }]);
    const controller = new AbortController();
    const first = await placement.acquire(controller.signal);
    const second = placement.acquire(controller.signal);
    const third = placement.acquire(controller.signal);
    first.release();
    (await second).release();
    (await third).release();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('commands and scripts leave no listener on the signal they were given', async () => {
    const transport: Transport = {
      async start(): Promise<StartedProcess> {
        return { exited: Promise.resolve(0), streamEnded: Promise.resolve(), detach: () => undefined };
      },
    };
    const controller = new AbortController();
    for (let i = 0; i < 15; i++) {
      await runCommand(transport, [], 'true', { signal: controller.signal });
      await runScript(transport, 'true', [], {
        maxStdoutBytes: 10,
        signal: controller.signal,
        stdout: new PassThrough(),
      });
    }
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
