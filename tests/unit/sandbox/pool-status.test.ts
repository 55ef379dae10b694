/**
 * The warm pools' status files, for `doctor`: a pool's counts are written while it lives and
 * gone once it is drained; a file left by a process that is gone is told apart (and removed
 * by the next pool); anything at a status name that is not one is skipped, never an error.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawnSync, execFileSync } from 'node:child_process';
import { mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  findPools,
  poolCheck,
  PoolStatusFile,
  removeStalePools,
} from '../../../src/sandbox/pool/pool-status.js';
import { WarmPool } from '../../../src/sandbox/pool/warm-pool.js';
import { MemoryBackend } from '../../fakes/memory-sandbox.js';

const dirs: string[] = [];
afterEach(async () => Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true }))));

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-pools-'));
  dirs.push(dir);
  return dir;
}

const STATS = { ready: 2, starting: 1, handedOut: 5, cold: 1, discarded: 0 };
const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The pid of a process that ran and is gone. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

function statusJson(pid: number, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    version: 1,
    pid,
    host: hostname(),
    owner: 'eval',
    engine: 'local',
    startedAt: '2026-12-02T10:00:00.000Z',
    updatedAt: '2026-12-02T10:00:01.000Z',
    stats: STATS,
    ...extra,
  });
}

describe('pool status files', () => {
  it("holds a live pool's counts and is gone once the pool is closed", async () => {
    const dir = await tempDir();
    const status = new PoolStatusFile('eval', 'local', dir);
    status.update({ ...STATS, ready: 0 });
    status.update(STATS);
    await wait(400);
    const [pool, ...rest] = await findPools(dir);
    expect(rest).toEqual([]);
    expect(pool).toMatchObject({
      pid: process.pid,
      owner: 'eval',
      engine: 'local',
      alive: true,
      stats: STATS,
    });
    const check = await poolCheck(dir);
    expect(check).toMatchObject({ name: 'warm-pools', ok: true });
    expect(check.warning).toBeUndefined();
    expect(check.detail).toContain(
      `eval pid ${process.pid}, engine local: 2 warm, 1 starting (5 taken, 1 cold`,
    );
    await status.close();
    expect(await findPools(dir)).toEqual([]);
    expect((await poolCheck(dir)).detail).toMatch(/^none running/);
  });

  it('writes nothing after close, even an update still waiting', async () => {
    const dir = await tempDir();
    const status = new PoolStatusFile('fix', 'local', dir);
    status.update(STATS);
    await status.close();
    await wait(400);
    expect((await readdir(dir).catch(() => [])).filter((n) => !n.startsWith('.'))).toEqual([]);
  });

  it('tells a pool whose process is gone apart, and the next pool removes its file', async () => {
    const dir = await tempDir();
    const pid = deadPid();
    await writeFile(join(dir, `${pid}-1.json`), statusJson(pid));
    const [found] = await findPools(dir);
    expect(found?.alive).toBe(false);
    const check = await poolCheck(dir);
    expect(check).toMatchObject({ ok: true, warning: true });
    expect(check.detail).toContain(`left by 1 process(es) that are gone: eval pid ${pid}`);
    expect(check.fix).toContain('sandbox-harness gc');
    const next = new PoolStatusFile('eval', 'local', dir);
    await wait(100);
    expect(await findPools(dir)).toEqual([]);
    await next.close();
  });

  it("does not judge another host's process, and shows where it runs", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, '1-1.json'), statusJson(1, { host: 'elsewhere' }));
    const [found] = await findPools(dir);
    expect(found?.alive).toBe('unknown');
    expect((await poolCheck(dir)).detail).toContain('pid 1 on elsewhere');
  });

  it('skips whatever at a status name is not a status file', async () => {
    const dir = await tempDir();
    const target = join(dir, 'real.json');
    await writeFile(target, statusJson(process.pid));
    await symlink(target, join(dir, '11-1.json'));
    execFileSync('mkfifo', [join(dir, '12-1.json')]);
    await writeFile(join(dir, '13-1.json'), statusJson(process.pid, { padding: 'x'.repeat(5000) }));
    await writeFile(join(dir, '14-1.json'), '{"version": 1, "pid": ');
    await writeFile(join(dir, '15-1.json'), statusJson(process.pid, { stats: { ...STATS, ready: -1 } }));
    await writeFile(join(dir, '16-1.json'), statusJson(process.pid, { version: 2 }));
    await writeFile(join(dir, '17-1.json'), statusJson(0));
    await writeFile(join(dir, 'notes.json'), statusJson(process.pid));
    expect(await findPools(dir)).toEqual([]);
    expect((await poolCheck(dir)).detail).toMatch(/^none running/);
  });

  it('a warm pool keeps its status file up to date and removes it when drained', async () => {
    const dir = await tempDir();
    const pool = new WarmPool(new MemoryBackend({ 'a.txt': Buffer.from('a') }), {
      capacity: 2,
      status: new PoolStatusFile('fix', 'local', dir),
    });
    pool.warm({ image: 'memory:repo', runId: 'r1', role: 'attempt-1' });
    await wait(400);
    const [found] = await findPools(dir);
    expect(found?.stats).toMatchObject({ ready: 1, starting: 0 });
    await pool.drain();
    expect(await findPools(dir)).toEqual([]);
  });
});

describe('removeStalePools (gc)', () => {
  it('removes only the files of pools whose process is gone; a dry run only says which', async () => {
    const dir = await tempDir();
    const pid = deadPid();
    await writeFile(join(dir, `${pid}-1.json`), statusJson(pid));
    await writeFile(join(dir, `${process.pid}-1.json`), statusJson(process.pid));
    expect((await removeStalePools(dir, { dryRun: true })).map((p) => p.pid)).toEqual([pid]);
    expect((await readdir(dir)).length).toBe(2);
    expect((await removeStalePools(dir)).map((p) => p.pid)).toEqual([pid]);
    expect(await readdir(dir)).toEqual([`${process.pid}-1.json`]);
  });
});
