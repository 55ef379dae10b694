/**
 * The hints `check` gives when Python tests cannot import a module that no agent can make
 * importable from the editable files: a src-layout package not on PYTHONPATH, a module that
 * is not installed. Over real runner output (pytest 8 and unittest on the Python base).
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import {
  hostRepoLookup,
  importHints,
  missingModules,
  testRunHints,
  type RepoPathLookup,
  type RepoPathType,
} from '../../../src/fix/import-hints.js';

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'test-output');
const sample = (name: string) => readFileSync(join(FIXTURES, `${name}.txt`), 'utf8');

function repo(paths: Record<string, RepoPathType>): RepoPathLookup {
  return (path) => Promise.resolve(paths[path]);
}

describe('missingModules', () => {
  it('reads the top-level names pytest and unittest print, first seen first, once each', () => {
    expect(missingModules(sample('unittest-failing-import-py313'))).toEqual(['tomli_nope']);
    expect(missingModules(sample('pytest-src-layout'))).toEqual(['shopcalc']);
    expect(
      missingModules(
        "E   ModuleNotFoundError: No module named 'a.b'\nModuleNotFoundError: No module named 'a'\nModuleNotFoundError: No module named 'c'\n",
      ),
    ).toEqual(['a', 'c']);
  });

  it('an ImportError of a name inside a module of the repo is not a missing module', () => {
    expect(missingModules(sample('pytest-failing-import'))).toEqual([]);
  });
});

describe('importHints', () => {
  it('a package under src/ that is not on PYTHONPATH: says which folder and how to put it there', async () => {
    const output = sample('pytest-src-layout');
    const [hint, ...rest] = await importHints(
      output,
      repo({ src: 'directory', 'src/shopcalc': 'directory' }),
    );
    expect(rest).toEqual([]);
    expect(hint).toContain('`shopcalc`, which is src/shopcalc/ in the repo');
    expect(hint).toContain('PYTHONPATH: src');
    // A single module file, and the other package folders.
    expect(await importHints(output, repo({ 'lib/shopcalc.py': 'file' }))).toEqual([
      expect.stringContaining('lib/shopcalc.py in the repo'),
    ]);
  });

  it('no hint when the folder is already on PYTHONPATH or the module sits at the root (the error is elsewhere)', async () => {
    const output = sample('pytest-src-layout');
    const layout = { 'src/shopcalc': 'directory' } as const;
    expect(await importHints(output, repo(layout), { PYTHONPATH: 'other:./src/' })).toEqual([]);
    expect(await importHints(output, repo(layout), { PYTHONPATH: '/workspace/src' })).toEqual([]);
    expect(await importHints(output, repo({ 'shopcalc.py': 'file', ...layout }))).toEqual([]);
  });

  it('a module found nowhere in the repo is said to be not installed', async () => {
    const hints = await importHints(sample('unittest-failing-import-py313'), repo({}));
    expect(hints).toEqual([expect.stringContaining('`tomli_nope`, which is neither at the repo')]);
    expect(hints[0]).toContain('nor installed in the sandbox');
  });

  it('output without a missing module gives no hint', async () => {
    expect(await importHints(sample('pytest-failing'), repo({}))).toEqual([]);
  });
});

describe('testRunHints', () => {
  it('async tests pytest skipped for want of a plugin: said even when the run passed (the ticket may be one)', async () => {
    const output = sample('pytest-async-no-plugin');
    expect(output).toMatch(/1 passed, 1 skipped/);
    const hints = await testRunHints(output, true, repo({}));
    expect(hints).toEqual([expect.stringContaining('pytest did not run the `async def` tests')]);
    expect(hints[0]).toContain('pytest-asyncio');
    // A passing run gives no import hint; a failing one gives both kinds.
    const both = await testRunHints(
      `${output}\n${sample('pytest-src-layout')}`,
      false,
      repo({ 'src/shopcalc': 'directory' }),
    );
    expect(both).toHaveLength(2);
    expect(
      await testRunHints(sample('pytest-src-layout'), true, repo({ 'src/shopcalc': 'directory' })),
    ).toEqual([]);
  });
});

describe('hostRepoLookup', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('tells files from folders and never follows a link (a link reads as absent)', async () => {
    const root = await mkdtemp(join(tmpdir(), 'import-hints-'));
    dirs.push(root);
    await mkdir(join(root, 'src', 'pkg'), { recursive: true });
    await writeFile(join(root, 'src', 'mod.py'), 'x = 1\n');
    await symlink(join(root, 'src'), join(root, 'lib'));
    const lookup = hostRepoLookup(root);
    expect(await lookup('src/pkg')).toBe('directory');
    expect(await lookup('src/mod.py')).toBe('file');
    expect(await lookup('src/nope.py')).toBeUndefined();
    expect(await lookup('lib/mod.py')).toBeUndefined();
    expect(await lookup('lib')).toBeUndefined();
    expect(await lookup('../etc')).toBeUndefined();
  });
});
