/**
 * The tree cache on disk: a tree comes back as it was written, for its engine and image id
 * only; anything else at its name (another shape, cut short, a link, another engine's or
 * image's) is a miss, never an error or a wrong tree; the folder stays bounded.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, readdir, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { execFileSync } from 'node:child_process';
import { fileTreeCache, parseTreeFile, treeFileBytes } from '../../../src/sandbox/tree-cache.js';
import type { TreeEntry } from '../../../src/sandbox/types.js';

const dirs: string[] = [];
afterEach(async () => Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true }))));

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-trees-'));
  dirs.push(dir);
  return dir;
}

const SHA = 'a'.repeat(64);
const tree = new Map<string, TreeEntry>([
  ['src', { type: 'directory', mode: 0o755, size: 0 }],
  ['src/a.ts', { type: 'file', mode: 0o644, size: 12, sha256: SHA }],
  ['link', { type: 'symlink', mode: 0o777, size: 0, linkTarget: 'src/a.ts' }],
  ['fifo', { type: 'other', mode: 0o600, size: 0 }],
]);
const ID = 'sha256:' + 'b'.repeat(64);

function stored(entries: unknown, extra: Record<string, unknown> = {}): Buffer {
  return gzipSync(JSON.stringify({ v: 1, engine: 'local', image: ID, entries, ...extra }));
}

describe('the tree cache', () => {
  it('gives back the tree it was given, for that engine and image only', async () => {
    const cache = fileTreeCache(await tempDir());
    expect(await cache.get('local', ID)).toBeUndefined();
    await cache.put('local', ID, tree);
    expect(await cache.get('local', ID)).toEqual(tree);
    expect(await cache.get('gpu-box', ID)).toBeUndefined();
    expect(await cache.get('local', 'sha256:' + 'c'.repeat(64))).toBeUndefined();
  });

  it('reads nothing but what it wrote: another shape, a broken file or a stranger entry is a miss', () => {
    const good = treeFileBytes('local', ID, tree);
    expect(parseTreeFile(good, 'local', ID)).toEqual(tree);
    // Renamed from another key: the engine and image inside must match too.
    expect(parseTreeFile(good, 'other', ID)).toBeUndefined();
    expect(parseTreeFile(good.subarray(0, good.length - 5), 'local', ID)).toBeUndefined();
    expect(parseTreeFile(Buffer.from('not gzip'), 'local', ID)).toBeUndefined();
    expect(parseTreeFile(stored([], { v: 2 }), 'local', ID)).toBeUndefined();
    for (const entries of [
      [['../etc/passwd', ['file', 420, 1, SHA]]],
      [['/abs', ['file', 420, 1, SHA]]],
      [['a//b', ['file', 420, 1, SHA]]],
      [['a', ['device', 420, 1]]],
      [['a', ['file', 0o17777, 1]]],
      [['a', ['file', 420, -1]]],
      [['a', ['file', 420, 1, 'not-a-hash']]],
      [
        ['a', ['file', 420, 1, SHA]],
        ['a', ['file', 420, 1, SHA]],
      ],
      [['a']],
      'not a list',
    ])
      expect(parseTreeFile(stored(entries), 'local', ID), JSON.stringify(entries)).toBeUndefined();
    expect(parseTreeFile(stored([['a', ['file', 420, 1, SHA]]]), 'local', ID)).toEqual(
      new Map([['a', { type: 'file', mode: 420, size: 1, sha256: SHA }]]),
    );
  });

  it('a link where a tree file belongs is not followed: a miss', async () => {
    const dir = await tempDir();
    const cache = fileTreeCache(dir);
    await cache.put('local', ID, tree);
    const [name] = await readdir(dir);
    const elsewhere = join(await tempDir(), 'tree');
    await writeFile(elsewhere, await readFile(join(dir, name!)));
    await rm(join(dir, name!));
    await symlink(elsewhere, join(dir, name!));
    expect(await cache.get('local', ID)).toBeUndefined();
  });

  it('a pipe where a tree file belongs is a miss, at once (never a read that waits)', async () => {
    const dir = await tempDir();
    const cache = fileTreeCache(dir);
    await cache.put('local', ID, tree);
    const [name] = await readdir(dir);
    await rm(join(dir, name!));
    execFileSync('mkfifo', [join(dir, name!)]);
    expect(await cache.get('local', ID)).toBeUndefined();
  });

  it('keeps the most recently written trees, up to its bound', async () => {
    const dir = await tempDir();
    const cache = fileTreeCache(dir, { maxFiles: 2 });
    const ids = ['1', '2', '3'].map((d) => 'sha256:' + d.repeat(64));
    for (const [i, id] of ids.entries()) {
      await cache.put('local', id, tree);
      // Written a second apart as far as the folder can tell, oldest first.
      const names = await readdir(dir);
      for (const name of names) if (i === 0) await utimes(join(dir, name), 1000, 1000);
    }
    expect((await readdir(dir)).filter((n) => n.endsWith('.tree.json.gz'))).toHaveLength(2);
    expect(await cache.get('local', ids[0]!)).toBeUndefined();
    expect(await cache.get('local', ids[2]!)).toEqual(tree);
  });
});
