import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadGitignores, parseGitignore, DEFAULT_GITIGNORE_CAPS } from '../../../src/changes/gitignore.js';

async function matcher(files: Record<string, string>, caps = DEFAULT_GITIGNORE_CAPS) {
  const loaded = await loadGitignores(
    Object.keys(files),
    async (path) => (path in files ? Buffer.from(files[path]!) : undefined),
    caps,
  );
  return loaded;
}

async function ignored(files: Record<string, string>, path: string, isDir = false): Promise<boolean> {
  return (await matcher(files)).matcher.ignores(path, isDir);
}

describe('gitignore semantics', () => {
  it('a name without a slash matches at any depth, files and folders', async () => {
    const files = { '.gitignore': 'dist\n*.log\n' };
    expect(await ignored(files, 'dist', true)).toBe(true);
    expect(await ignored(files, 'dist/index.js')).toBe(true);
    expect(await ignored(files, 'packages/a/dist/index.js')).toBe(true);
    expect(await ignored(files, 'src/x.log')).toBe(true);
    expect(await ignored(files, 'src/dist.js')).toBe(false);
    expect(await ignored(files, 'distribution/a.js')).toBe(false);
  });

  it('a leading or middle slash anchors to the folder of the .gitignore', async () => {
    const files = { '.gitignore': '/build\nlib/gen/\n', 'pkg/.gitignore': '/out\n' };
    expect(await ignored(files, 'build/a.js')).toBe(true);
    expect(await ignored(files, 'src/build/a.js')).toBe(false);
    expect(await ignored(files, 'lib/gen/a.js')).toBe(true);
    expect(await ignored(files, 'src/lib/gen/a.js')).toBe(false);
    expect(await ignored(files, 'pkg/out/a.js')).toBe(true);
    expect(await ignored(files, 'out/a.js')).toBe(false);
    expect(await ignored(files, 'pkg/sub/out/a.js')).toBe(false);
  });

  it('a trailing slash matches folders only', async () => {
    const files = { '.gitignore': 'cache/\n' };
    expect(await ignored(files, 'cache')).toBe(false);
    expect(await ignored(files, 'cache', true)).toBe(true);
    expect(await ignored(files, 'cache/x')).toBe(true);
  });

  it('negation re-includes, the last matching line wins, but never below an ignored folder', async () => {
    const files = { '.gitignore': '*.js\n!keep.js\nbuild/\n!build/keep.js\n' };
    expect(await ignored(files, 'a.js')).toBe(true);
    expect(await ignored(files, 'keep.js')).toBe(false);
    expect(await ignored(files, 'src/keep.js')).toBe(false);
    expect(await ignored(files, 'build/keep.js')).toBe(true);
  });

  it('a deeper .gitignore wins over a shallower one, and one inside an ignored folder is never read', async () => {
    const files = {
      '.gitignore': '*.tmp\nvendor/\n',
      'src/.gitignore': '!*.tmp\n',
      'vendor/.gitignore': '!*\n',
    };
    const loaded = await matcher(files);
    expect(loaded.matcher.ignores('a.tmp', false)).toBe(true);
    expect(loaded.matcher.ignores('src/a.tmp', false)).toBe(false);
    expect(loaded.matcher.ignores('vendor/x.js', false)).toBe(true);
    expect(loaded.read).toEqual(['.gitignore', 'src/.gitignore']);
  });

  it('** forms, character classes, escapes, comments and trailing spaces', async () => {
    const files = {
      '.gitignore': [
        '# a comment',
        '**/tmp',
        'docs/**',
        'a/**/z',
        'file[0-9].txt',
        'x[!a].y',
        '\\#hash',
        '\\!bang',
        'spaced   ',
        'kept\\ ',
        '',
      ].join('\n'),
    };
    expect(await ignored(files, 'tmp', true)).toBe(true);
    expect(await ignored(files, 'q/r/tmp', true)).toBe(true);
    expect(await ignored(files, 'docs/a/b.md')).toBe(true);
    expect(await ignored(files, 'docs', true)).toBe(false);
    expect(await ignored(files, 'a/z')).toBe(true);
    expect(await ignored(files, 'a/b/c/z')).toBe(true);
    expect(await ignored(files, 'a/bz')).toBe(false);
    expect(await ignored(files, 'file7.txt')).toBe(true);
    expect(await ignored(files, 'fileX.txt')).toBe(false);
    expect(await ignored(files, 'xb.y')).toBe(true);
    expect(await ignored(files, 'xa.y')).toBe(false);
    expect(await ignored(files, '#hash')).toBe(true);
    expect(await ignored(files, '!bang')).toBe(true);
    expect(await ignored(files, 'spaced')).toBe(true);
    expect(await ignored(files, 'kept ')).toBe(true);
    expect(await ignored(files, 'kept')).toBe(false);
    expect(await ignored(files, '# a comment')).toBe(false);
  });

  it('is byte-exact: case and Unicode normalisation matter', async () => {
    const files = { '.gitignore': 'dist/\ncafé\n' };
    expect(await ignored(files, 'DIST/a.js')).toBe(false);
    expect(await ignored(files, 'café'.normalize('NFC'))).toBe(true);
    expect(await ignored(files, 'café'.normalize('NFD'))).toBe(false);
  });

  it('CRLF files work like LF files', async () => {
    expect(await ignored({ '.gitignore': 'dist\r\n*.log\r\n' }, 'a.log')).toBe(true);
  });

  it('a malformed bracket never matches', () => {
    expect(parseGitignore('[abc\n')).toEqual([]);
  });

  it('caps: a file over the byte cap, or with a line over the length cap, is left out whole', async () => {
    const caps = { ...DEFAULT_GITIGNORE_CAPS, maxFileBytes: 100, maxLineLength: 20 };
    const big = await loadGitignores(
      ['.gitignore'],
      async () => Buffer.from(`*\n${'#'.repeat(200)}\n`),
      caps,
    );
    expect(big.matcher.ignores('a.js', false)).toBe(false);
    expect(big.skipped[0]).toMatch(/over 100 bytes/);
    // Leaving out only the long line would drop its negation and ignore everything.
    const long = await loadGitignores(
      ['.gitignore'],
      async () => Buffer.from(`*\n!${'x'.repeat(30)}\n`),
      caps,
    );
    expect(long.matcher.ignores('a.js', false)).toBe(false);
    expect(long.skipped[0]).toMatch(/line over 20/);
  });

  it('caps: the number of files and of rules', async () => {
    const many = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`d${i}/.gitignore`, 'x\n']));
    const loaded = await matcher(many, { ...DEFAULT_GITIGNORE_CAPS, maxFiles: 3 });
    expect(loaded.read).toHaveLength(3);
    expect(loaded.skipped).toHaveLength(7);
    const rules = await matcher(
      { '.gitignore': 'a\nb\n', 'x/.gitignore': 'c\nd\n' },
      { ...DEFAULT_GITIGNORE_CAPS, maxRules: 3 },
    );
    expect(rules.read).toEqual(['.gitignore']);
  });

  it('a pattern built to backtrack matches in linear time', async () => {
    const files = { '.gitignore': `${'*a'.repeat(40)}b\n**/${'**/'.repeat(40)}z\n` };
    const loaded = await matcher(files);
    const started = Date.now();
    expect(loaded.matcher.ignores('a'.repeat(250), false)).toBe(false);
    expect(loaded.matcher.ignores(`${'q/'.repeat(200)}y`, false)).toBe(false);
    // Generous: a backtracking matcher takes hours here, this one milliseconds.
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

/** The same cases against git itself (`git check-ignore`; the harness needs git on the host anyway). */
describe('agrees with git check-ignore', () => {
  it('on a mixed set of rules, nested files and paths', async () => {
    const files: Record<string, string> = {
      '.gitignore': 'dist\n/build/\n*.log\n!important.log\nlib/**/gen\ncache/\n*.py[co]\nnode_modules\n',
      'pkg/.gitignore': '!*.log\nout/\n/local\n',
      'pkg/deep/.gitignore': '*.txt\n!keep.txt\n',
    };
    const paths: Array<[string, boolean]> = [
      ['dist', true],
      ['dist/a.js', false],
      ['src/dist/a.js', false],
      ['build/a.js', false],
      ['src/build/a.js', false],
      ['a.log', false],
      ['important.log', false],
      ['pkg/a.log', false],
      ['pkg/out/x', false],
      ['pkg/local/x', false],
      ['pkg/sub/local/x', false],
      ['lib/gen/x', false],
      ['lib/a/b/gen/x', false],
      ['cache/x', false],
      ['src/m.pyc', false],
      ['pkg/deep/a.txt', false],
      ['pkg/deep/keep.txt', false],
      ['pkg/deep/sub/a.txt', false],
      ['node_modules/x/y.js', false],
      ['src/index.js', false],
    ];
    const dir = mkdtempSync(join(tmpdir(), 'gitignore-'));
    try {
      execFileSync('git', ['init', '-q', dir]);
      for (const [path, content] of Object.entries(files)) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), content);
      }
      for (const [path, isDir] of paths) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        if (isDir) mkdirSync(join(dir, path), { recursive: true });
        else writeFileSync(join(dir, path), '');
      }
      const loaded = await matcher(files);
      for (const [path, isDir] of paths) {
        let byGit = true;
        try {
          execFileSync('git', ['-C', dir, 'check-ignore', '-q', '--no-index', path], { stdio: 'ignore' });
        } catch {
          byGit = false;
        }
        expect([path, loaded.matcher.ignores(path, isDir)]).toEqual([path, byGit]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
