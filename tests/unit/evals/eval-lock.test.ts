import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, UsageError } from '../../../src/errors.js';
import {
  checkSamePlan,
  createEvalLock,
  LOCK_FILE,
  planLock,
  readEvalLock,
  resumeSettings,
} from '../../../src/evals/eval-lock.js';
import { fakeSuite, withTempDir } from './helpers.js';

const suite = fakeSuite(['a', 'b']);
const lock = (extra: Partial<Parameters<typeof planLock>[1]> = {}, shards = 1) =>
  planLock(suite, { n: 2, source: {}, ...extra }, shards, '1.0.0', new Date('2026-01-01T00:00:00Z'));

describe("the out folder's lock", () => {
  it('hashes one plan one way: a switch off is the same as a switch not given, the flags in any order', () => {
    const a = lock({ source: { oracle: false, visibleTests: true, repos: '/r' } });
    const b = lock({ source: { repos: '/r', visibleTests: true } });
    expect(a.planSha256).toBe(b.planSha256);
    expect(lock({ n: 3 }).planSha256).not.toBe(lock().planSha256);
    expect(lock({ costLimitUsd: 1 }).planSha256).not.toBe(lock().planSha256);
    expect(lock({ runtime: 'runsc' }).planSha256).not.toBe(lock().planSha256);
  });

  it('--resume takes n and the other settings from the lock when they are left out', () => {
    const written = lock({ n: 2, source: { oracle: true }, costLimitUsd: 0.5, runtime: 'runsc' });
    expect(resumeSettings(written, { source: {} }, '/out')).toEqual({
      n: 2,
      source: { oracle: true },
      costLimitUsd: 0.5,
      runtime: 'runsc',
    });
  });

  it('--resume refuses every flag that disagrees with the lock, naming each with both values', () => {
    const written = lock({ n: 2, costLimitUsd: 0.5 });
    const error = (() => {
      try {
        resumeSettings(written, { n: 3, source: { oracle: true }, costLimitUsd: 0.5 }, '/out');
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toContain('-n: the lock says 2, given 3');
    expect((error as Error).message).toContain('--oracle: the lock says not given, given on');
    expect((error as Error).message).not.toContain('--cost-limit');
  });

  it("an older harness's lock (suite and n only) resumes with its n", async () => {
    await withTempDir(async (dir) => {
      await writeFile(
        path.join(dir, LOCK_FILE),
        JSON.stringify({ version: 1, suiteSha256: suite.sha256, n: 4 }),
      );
      const old = await readEvalLock(dir);
      expect(old?.version).toBe(1);
      expect(resumeSettings(old!, { source: {} }, dir).n).toBe(4);
      expect(() => resumeSettings(old!, { n: 5 }, dir)).toThrow(/-n: the lock says 4, given 5/);
    });
  });

  it('is created by exactly one of many processes that try at once, and read back whole', async () => {
    await withTempDir(async (dir) => {
      const made = await Promise.all(Array.from({ length: 20 }, () => createEvalLock(dir, lock({}, 2))));
      expect(made.filter(Boolean)).toHaveLength(1);
      expect(await readEvalLock(dir)).toEqual(lock({}, 2));
      // No temp file left behind.
      expect(await readdir(dir)).toEqual([LOCK_FILE]);
    });
  });

  it('refuses a lock that is not one: junk, a link, a huge file', async () => {
    await withTempDir(async (dir) => {
      const file = path.join(dir, LOCK_FILE);
      await writeFile(file, '{"version": 2}');
      await expect(readEvalLock(dir)).rejects.toBeInstanceOf(ConfigError);
      await writeFile(file, 'x'.repeat(100_000));
      await expect(readEvalLock(dir)).rejects.toThrow(/over \d+ bytes/);
      const other = path.join(dir, 'other');
      await mkdir(other);
      await writeFile(path.join(dir, 'real.json'), JSON.stringify(lock()));
      await symlink(path.join(dir, 'real.json'), path.join(other, LOCK_FILE));
      await expect(readEvalLock(other)).rejects.toThrow(/not a regular file/);
      expect(JSON.parse(await readFile(path.join(dir, 'real.json'), 'utf8'))).toEqual(lock());
    });
  });

  it('refuses another plan: each setting that differs, the shard count', () => {
    expect(() => checkSamePlan(lock(), lock({ n: 3 }), '/out', undefined)).toThrow(
      /-n: the lock says 2, given 3/,
    );
    expect(() => checkSamePlan(lock({}, 4), lock({}, 2), '/out', { index: 1, count: 2 })).toThrow(
      /split into 4 shards, given --shard 1\/2/,
    );
    expect(() => checkSamePlan(lock(), lock({}, 2), '/out', { index: 1, count: 2 })).toThrow(/not sharded/);
    const otherSuite = planLock(
      fakeSuite(['a', 'b'], { sha256: 'b'.repeat(64) }),
      { n: 2, source: {} },
      1,
      '1',
    );
    expect(() => checkSamePlan(lock(), otherSuite, '/out', undefined)).toThrow(/the suite changed/);
    expect(() => checkSamePlan(lock({}, 2), lock({}, 2), '/out', { index: 2, count: 2 })).not.toThrow();
  });
});
