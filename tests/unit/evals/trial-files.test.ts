import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { SUPERSEDED_FILE, type ResultCheck } from '../../../src/evals/results-file.js';
import { TRIAL_RESULTS_DIR, trialFilesStore } from '../../../src/evals/trial-files.js';
import { trialFileName } from '../../../src/evals/trial-plan.js';
import { result, withTempDir } from './helpers.js';

const check: ResultCheck = { taskIds: new Set(['a', 'b']), n: 2, what: 'shard 1/1' };

describe("a shard's results, one file per trial", () => {
  it('reads back what was written, the latest per trial, interrupted ones left out', async () => {
    await withTempDir(async (dir) => {
      const store = trialFilesStore(dir, 4);
      expect(await store.isEmpty()).toBe(true);
      const log = await store.open();
      await log.append(result({ taskId: 'a', trial: 0 }, 'ready-for-review'));
      await log.append(result({ taskId: 'a', trial: 1 }, 'interrupted'));
      await log.append(result({ taskId: 'b', trial: 0 }, 'infrastructure'));
      await log.append(result({ taskId: 'b', trial: 0 }, 'tests-failed'));
      await log.close();
      const read = await store.read(check, true);
      expect(read.map((r) => `${r.taskId}#${r.trial}:${r.category}`).sort()).toEqual([
        'a#0:ready-for-review',
        'b#0:tests-failed',
      ]);
      // Only whole files: no temp file is left by a write that finished.
      expect((await readdir(path.join(dir, TRIAL_RESULTS_DIR))).every((n) => !n.startsWith('.'))).toBe(true);
    });
  });

  it('ignores a torn write (a temp file a killed process left) and clears it when the holder reads', async () => {
    await withTempDir(async (dir) => {
      const results = path.join(dir, TRIAL_RESULTS_DIR);
      await mkdir(results, { recursive: true });
      await writeFile(
        path.join(results, `.${trialFileName({ taskId: 'a', trial: 0 })}.abc.tmp`),
        '{"taskId": "a", "tri',
      );
      const store = trialFilesStore(dir, 4);
      expect(await store.isEmpty()).toBe(true);
      expect(await store.read(check, false)).toEqual([]);
      expect(await readdir(results)).toHaveLength(1);
      expect(await store.read(check, true)).toEqual([]);
      expect(await readdir(results)).toEqual([]);
    });
  });

  it('refuses damage, naming each file: a link, not JSON, a trial of another plan, a file named for another trial', async () => {
    await withTempDir(async (dir) => {
      const results = path.join(dir, TRIAL_RESULTS_DIR);
      await mkdir(results, { recursive: true });
      const a0 = trialFileName({ taskId: 'a', trial: 0 });
      await writeFile(
        path.join(dir, 'elsewhere.json'),
        JSON.stringify(result({ taskId: 'a', trial: 0 }, 'ready-for-review')),
      );
      await symlink(path.join(dir, 'elsewhere.json'), path.join(results, a0));
      await writeFile(path.join(results, trialFileName({ taskId: 'a', trial: 1 })), 'nope');
      await writeFile(
        path.join(results, trialFileName({ taskId: 'z', trial: 0 })),
        JSON.stringify(result({ taskId: 'z', trial: 0 }, 'ready-for-review')),
      );
      await writeFile(
        path.join(results, trialFileName({ taskId: 'b', trial: 1 })),
        JSON.stringify(result({ taskId: 'b', trial: 0 }, 'ready-for-review')),
      );
      const error = await trialFilesStore(dir, 4)
        .read(check, true)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      const problems = (error as ConfigError).problems.join('\n');
      expect(problems).toMatch(/not a regular file/);
      expect(problems).toMatch(/not JSON/);
      expect(problems).toMatch(/z#0 is not part of shard 1\/1/);
      expect(problems).toMatch(/holds trial b#0, whose file is/);
    });
  });

  it('refuses a folder with more entries than the shard has trials before reading any', async () => {
    await withTempDir(async (dir) => {
      const results = path.join(dir, TRIAL_RESULTS_DIR);
      await mkdir(results, { recursive: true });
      for (let i = 0; i < 50; i++) await writeFile(path.join(results, `junk-${i}.json`), 'x');
      await expect(trialFilesStore(dir, 4).read(check, true)).rejects.toThrow(
        /has 50 entries, more than the 4 trial/,
      );
    });
  });

  it('moves superseded results to the history beside the store', async () => {
    await withTempDir(async (dir) => {
      const store = trialFilesStore(dir, 4);
      const log = await store.open();
      const unscored = result({ taskId: 'a', trial: 0 }, 'infrastructure');
      await log.append(unscored);
      await store.supersede([unscored]);
      expect(await store.read(check, true)).toEqual([]);
      expect(JSON.parse(await readFile(path.join(dir, SUPERSEDED_FILE), 'utf8'))).toEqual(unscored);
    });
  });
});
