/**
 * The walk of a container's writable layer, on folders laid out the way overlay2 leaves them:
 * what it lists, and that it never reads through a link, wherever the link sits.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  layerMarker,
  scanOverlay,
  upperDirBytes,
  type OverlayLayers,
} from '../../../src/sandbox/docker/upper-dir.js';

let root: string;
let layers: OverlayLayers;
/** Files of "the host" that a walk through a link would find. */
let outside: string;

async function put(base: string, files: Record<string, string | null>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    const full = join(base, path);
    if (content === null) await mkdir(full, { recursive: true });
    else {
      await mkdir(join(full, '..'), { recursive: true });
      await writeFile(full, content);
    }
  }
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'upper-dir-'));
  layers = { upperDir: join(root, 'diff'), mergedDir: join(root, 'merged') };
  outside = join(root, 'host');
  await put(outside, { 'secret.txt': 'host secret', 'deep/more.txt': 'more' });
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('scanOverlay', () => {
  it('lists what the layer holds, as the container sees it now, and what each written folder holds', async () => {
    // Written: one file changed, one added in a new folder; a deleted file leaves its folder
    // in the layer (its whiteout is not in the merged view).
    await put(layers.upperDir, {
      'workspace/src/changed.txt': 'new',
      'workspace/lib/new.txt': 'added',
      'workspace/old/': null,
      'workspace/old/gone.txt': 'whiteout stand-in',
    });
    await put(layers.mergedDir, {
      'workspace/src/changed.txt': 'new',
      'workspace/src/untouched.txt': 'same',
      'workspace/lib/new.txt': 'added',
      'workspace/old/kept.txt': 'kept',
      'workspace/README.md': 'readme',
    });
    const scan = await scanOverlay(layers, 'workspace', 100);
    expect(scan?.records.map((r) => `${r.type} ${r.path}`).sort()).toEqual([
      'directory lib',
      'directory old',
      'directory src',
      'file lib/new.txt',
      'file src/changed.txt',
    ]);
    expect(scan?.records.find((r) => r.path === 'src/changed.txt')).toMatchObject({ size: 3, links: 1 });
    expect(Object.fromEntries([...(scan?.children ?? [])].map(([k, v]) => [k, [...v].sort()]))).toEqual({
      '': ['README.md', 'lib', 'old', 'src'],
      lib: ['new.txt'],
      old: ['kept.txt'],
      src: ['changed.txt', 'untouched.txt'],
    });
  });

  it('names a link as a link and never walks into it, in the layer or in the merged view', async () => {
    await put(layers.upperDir, {
      'workspace/': null,
      'workspace/swapped/': null,
      'workspace/swapped/x': 'x',
    });
    await put(layers.mergedDir, { 'workspace/': null });
    // In the layer: a folder link. In the merged view: a folder of the layer that became a
    // link to the host's files between one look and the next (what a racing process can do).
    await symlink(outside, join(layers.upperDir, 'workspace/link'));
    await symlink(outside, join(layers.mergedDir, 'workspace/link'));
    await symlink(outside, join(layers.mergedDir, 'workspace/swapped'));
    const scan = await scanOverlay(layers, 'workspace', 100);
    expect(scan?.records.map((r) => `${r.type} ${r.path}`).sort()).toEqual([
      'symlink link',
      'symlink swapped',
    ]);
    expect([...(scan?.children.keys() ?? [])]).toEqual(['']);
    const everything = JSON.stringify([
      scan?.records,
      [...(scan?.children.values() ?? [])].map((s) => [...s]),
    ]);
    expect(everything).not.toMatch(/secret|more\.txt|deep/);
  });

  it('a workspace folder that is a link is not walked at all', async () => {
    await mkdir(layers.upperDir, { recursive: true });
    await mkdir(layers.mergedDir, { recursive: true });
    await symlink(outside, join(layers.upperDir, 'workspace'));
    await symlink(outside, join(layers.mergedDir, 'workspace'));
    expect(await scanOverlay(layers, 'workspace', 100)).toBeUndefined();
  });

  it('stops past maxRecords, so the caller knows the list is incomplete', async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 20; i++) files[`workspace/f${i}.txt`] = 'x';
    await put(layers.upperDir, files);
    await put(layers.mergedDir, files);
    expect((await scanOverlay(layers, 'workspace', 5))?.records.length).toBe(6);
  });

  it('no merged view (a container that is not running) is no answer; an empty layer is no change', async () => {
    await mkdir(layers.upperDir, { recursive: true });
    expect(await scanOverlay(layers, 'workspace', 100)).toBeUndefined();
    await put(layers.mergedDir, { 'workspace/a.txt': 'a' });
    expect(await scanOverlay(layers, 'workspace', 100)).toEqual({ records: [], children: new Map() });
  });
});

describe('layerMarker', () => {
  it('reads the marker through real folders only', async () => {
    await put(layers.upperDir, { 'etc/sandbox-harness/started': 'abc123' });
    expect(await layerMarker(layers, '/etc/sandbox-harness/started')).toBe('abc123');
  });

  it('a marker reached through a link is no proof', async () => {
    await put(outside, { 'sandbox-harness/started': 'abc123', 'started-file': 'abc123' });
    await mkdir(join(layers.upperDir, 'etc'), { recursive: true });
    await symlink(join(outside, 'sandbox-harness'), join(layers.upperDir, 'etc/sandbox-harness'));
    expect(await layerMarker(layers, '/etc/sandbox-harness/started')).toBeUndefined();
    await rm(join(layers.upperDir, 'etc/sandbox-harness'));
    await mkdir(join(layers.upperDir, 'etc/sandbox-harness'));
    await symlink(join(outside, 'started-file'), join(layers.upperDir, 'etc/sandbox-harness/started'));
    expect(await layerMarker(layers, '/etc/sandbox-harness/started')).toBeUndefined();
  });

  it('layers that are not there give no marker', async () => {
    expect(await layerMarker(layers, '/etc/sandbox-harness/started')).toBeUndefined();
  });
});

describe('upperDirBytes', () => {
  it('counts what the layer holds as the engine does: files, not folders, a hard-linked file once, never through a link', async () => {
    await put(layers.upperDir, {
      'workspace/a.txt': 'x'.repeat(1000),
      'workspace/deep/er/b.txt': 'y'.repeat(500),
      'home/sandbox/.cache/c.bin': 'z'.repeat(24),
      'workspace/empty': null,
    });
    await link(
      join(layers.upperDir, 'workspace', 'a.txt'),
      join(layers.upperDir, 'workspace', 'a-again.txt'),
    );
    // Links to the host's files and folders: the link itself is a few bytes, what it names is not counted.
    await symlink(join(outside, 'secret.txt'), join(layers.upperDir, 'workspace', 'to-file'));
    await symlink(outside, join(layers.upperDir, 'workspace', 'to-folder'));
    const links = outside.length + join(outside, 'secret.txt').length;
    expect(await upperDirBytes(layers.upperDir)).toBe(1000 + 500 + 24 + links);
  });

  it('is undefined for a layer it cannot open, and zero for an empty one', async () => {
    expect(await upperDirBytes(join(root, 'nowhere'))).toBeUndefined();
    await mkdir(layers.upperDir, { recursive: true });
    expect(await upperDirBytes(layers.upperDir)).toBe(0);
    // A link where the layer should be is not followed either.
    await symlink(outside, join(root, 'linked-layer'));
    expect(await upperDirBytes(join(root, 'linked-layer'))).toBeUndefined();
  });
});
