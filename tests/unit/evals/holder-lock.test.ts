import { spawnSync } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/errors.js';
import { acquireHolderLock, currentHolder, thisMachine } from '../../../src/evals/holder-lock.js';
import { delay, withTempDir } from './helpers.js';

const elsewhere = { host: 'node7', bootId: 'another-boot', pidNamespace: 'pid:[1]' };

/** A pid that is certainly not running: a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  return Number(child.stdout);
}

describe('one writer per results folder', () => {
  it('refuses a second holder while the first is alive on this machine, naming it; takes the folder once released', async () => {
    await withTempDir(async (dir) => {
      const first = await acquireHolderLock(dir, { purpose: 'eval, shard 1/2' });
      const error = await acquireHolderLock(dir, { purpose: 'eval' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toMatch(
        new RegExp(`in use by pid ${process.pid} on .*eval, shard 1/2`),
      );
      expect(await currentHolder(dir)).toMatch(/shard 1\/2/);
      await first.release();
      expect(await currentHolder(dir)).toBeUndefined();
      const second = await acquireHolderLock(dir, { purpose: 'eval' });
      expect(second.lost.aborted).toBe(false);
      await second.release();
    });
  });

  it('takes over at once from a holder on this machine whose process is gone (a killed eval)', async () => {
    await withTempDir(async (dir) => {
      const me = thisMachine();
      const record = {
        ...me,
        token: 't',
        pid: deadPid(),
        startedAt: '2026-01-01T00:00:00Z',
        purpose: 'eval',
      };
      await writeFile(path.join(dir, 'holder.1.json'), JSON.stringify(record));
      await writeFile(path.join(dir, 'holder.1.beat'), '7\n');
      expect(await currentHolder(dir)).toBeUndefined();
      const started = Date.now();
      const held = await acquireHolderLock(dir, { purpose: 'eval', staleMs: 60_000 });
      expect(Date.now() - started).toBeLessThan(5_000);
      await held.release();
      // The dead generation's files are cleared away.
      await delay(50);
      expect((await readdir(dir)).sort()).toEqual(['holder.2.beat', 'holder.2.json']);
    });
  });

  it('waits out a holder on another machine whose counter does not move, then takes the folder', async () => {
    await withTempDir(async (dir) => {
      const record = { ...elsewhere, token: 't', pid: 1, startedAt: '2026-01-01T00:00:00Z', purpose: 'eval' };
      await writeFile(path.join(dir, 'holder.1.json'), JSON.stringify(record));
      await writeFile(path.join(dir, 'holder.1.beat'), '3\n');
      const said: string[] = [];
      const held = await acquireHolderLock(dir, { purpose: 'eval', staleMs: 300, say: (l) => said.push(l) });
      expect(said.join('\n')).toMatch(/pid 1 on node7.*waiting/);
      await held.release();
    });
  });

  it('refuses a holder on another machine whose counter moves (it is alive; its pid means nothing here)', async () => {
    await withTempDir(async (dir) => {
      const alive = await acquireHolderLock(dir, {
        purpose: 'eval, shard 2/2',
        identity: elsewhere,
        beatMs: 50,
      });
      await expect(acquireHolderLock(dir, { purpose: 'eval', staleMs: 1_000 })).rejects.toThrow(
        /in use by .* on node7/,
      );
      await alive.release();
    });
  });

  it('tells a holder that lost the folder (taken over while it looked dead), so it stops writing', async () => {
    await withTempDir(async (dir) => {
      // Its beat is slower than the other's patience: it looks dead from another machine.
      const slow = await acquireHolderLock(dir, { purpose: 'eval', identity: elsewhere, beatMs: 2_000 });
      // Its first sign of life is on disk before the other looks.
      for (let i = 0; i < 100 && !(await readdir(dir)).includes('holder.1.beat'); i++) await delay(20);
      const taker = await acquireHolderLock(dir, { purpose: 'eval', staleMs: 150 });
      for (let i = 0; i < 100 && !slow.lost.aborted; i++) await delay(50);
      expect(slow.lost.aborted).toBe(true);
      expect(String(slow.lost.reason)).toMatch(/taken over/);
      await slow.release();
      // The loser's release does not free the taker's folder.
      expect(await currentHolder(dir)).toBeDefined();
      await taker.release();
    });
  });
});
