/**
 * Host-side git runs nothing a repo, a clone, a task folder or the user's configuration
 * names, on a real git. Every test plants a program (a filter, a textconv, an fsmonitor, a
 * hook, an alias) that writes a marker file, runs the harness's git, and checks the marker is
 * absent; then it runs plain git the same way and checks the marker appears, so the test
 * would fail if the harness's git behaved like plain git.
 */
import { execFileSync } from 'node:child_process';
import {
  chmod,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  applyPatch,
  commitExists,
  exportCommit,
  listFiles,
  openClone,
  userExcludesFile,
} from '../../../src/host-git/commands.js';
import { runGit } from '../../../src/host-git/run.js';
import { ConfigError, ImageError } from '../../../src/errors.js';
import { gitListing } from '../../../src/image-context/git-files.js';

let root: string;
let home: string;
let marker: string;
const saved: Record<string, string | undefined> = {};

/** Plain git, as a user runs it: the repo's and HOME's configuration apply. */
function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH, HOME: home, GIT_CONFIG_NOSYSTEM: '1' },
  });
}

async function put(file: string, content = 'x\n'): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, content);
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

/** A shell command that leaves the marker and passes its input through. */
const marking = () => `sh -c 'echo ran >> ${marker}; cat'`;

/** A repo with one commit whose every file goes through the filter driver `evil`. */
async function repoWithFilter(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
  await put(join(dir, 'src/a.txt'), 'hello\n');
  await put(join(dir, '.gitattributes'), '* filter=evil diff=evil\n');
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'base');
  return git(dir, 'rev-parse', 'HEAD').trim();
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'host-git-'));
  home = join(root, 'home');
  await mkdir(home);
  marker = join(root, 'MARKER');
  // The harness's own HOME during the test: a user whose global configuration is hostile too.
  for (const key of ['HOME', 'XDG_CONFIG_HOME']) saved[key] = process.env[key];
  process.env.HOME = home;
  delete process.env.XDG_CONFIG_HOME;
});

afterEach(async () => {
  for (const [key, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  await rm(root, { recursive: true, force: true });
});

describe('exporting a commit of a clone', () => {
  it("runs no smudge filter of the clone's config; plain git archive does", async () => {
    const clone = join(root, 'clone');
    const commit = await repoWithFilter(clone);
    git(clone, 'config', 'filter.evil.smudge', marking());
    git(clone, 'config', 'filter.evil.clean', marking());
    git(clone, 'config', 'filter.evil.required', 'true');
    const dest = join(root, 'copy');
    await mkdir(dest);
    const repo = await openClone(clone);
    expect(await commitExists(repo, commit.slice(0, 9))).toBe(true);
    await exportCommit(repo, commit, dest);
    expect(await readFile(join(dest, 'src/a.txt'), 'utf8')).toBe('hello\n');
    expect(await exists(marker)).toBe(false);

    execFileSync('sh', ['-c', `git archive --format=tar ${commit} > /dev/null`], {
      cwd: clone,
      env: { PATH: process.env.PATH, HOME: home, GIT_CONFIG_NOSYSTEM: '1' },
    });
    expect(await exists(marker)).toBe(true);
  });

  it('runs no filter that an include.path or includeIf of the repo config defines', async () => {
    const clone = join(root, 'clone');
    const commit = await repoWithFilter(clone);
    await put(join(root, 'included'), `[filter "evil"]\n\tsmudge = ${JSON.stringify(marking())}\n`);
    git(clone, 'config', 'include.path', join(root, 'included'));
    git(clone, 'config', `includeIf.gitdir:${clone}/.path`, join(root, 'included'));
    const dest = join(root, 'copy');
    await mkdir(dest);
    await exportCommit(await openClone(clone), commit, dest);
    expect(await exists(marker)).toBe(false);
    git(clone, 'archive', '--format=tar', '-o', join(root, 'out.tar'), commit);
    expect(await exists(marker)).toBe(true);
  });

  it("runs no filter the user's global config defines (HOME), nor an alias of it", async () => {
    const clone = join(root, 'clone');
    const commit = await repoWithFilter(clone);
    await put(
      join(home, '.gitconfig'),
      `[filter "evil"]\n\tsmudge = ${JSON.stringify(marking())}\n[alias]\n\tx = !echo alias >> ${marker}\n`,
    );
    const dest = join(root, 'copy');
    await mkdir(dest);
    await exportCommit(await openClone(clone), commit, dest);
    expect(await exists(marker)).toBe(false);
    git(clone, 'x');
    expect(await readFile(marker, 'utf8')).toBe('alias\n');
    git(clone, 'archive', '--format=tar', '-o', join(root, 'out.tar'), commit);
    expect(await readFile(marker, 'utf8')).toMatch(/alias\nran\n/);
  });

  it("ignores the caller's GIT_* variables (GIT_CONFIG_COUNT naming a filter, GIT_DIR elsewhere)", async () => {
    const clone = join(root, 'clone');
    const commit = await repoWithFilter(clone);
    const injected: Record<string, string> = {
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'filter.evil.smudge',
      GIT_CONFIG_VALUE_0: marking(),
      GIT_DIR: join(root, 'nowhere'),
    };
    for (const key of Object.keys(injected)) saved[key] = process.env[key];
    Object.assign(process.env, injected);
    const dest = join(root, 'copy');
    await mkdir(dest);
    await exportCommit(await openClone(clone), commit, dest);
    expect(await readFile(join(dest, 'src/a.txt'), 'utf8')).toBe('hello\n');
    expect(await exists(marker)).toBe(false);
  });

  it('refuses a clone whose .git is a file pointing at a git folder outside it, naming the clone', async () => {
    const elsewhere = join(root, 'elsewhere');
    const commit = await repoWithFilter(elsewhere);
    git(elsewhere, 'config', 'filter.evil.smudge', marking());
    const clone = join(root, 'clone');
    await mkdir(clone);
    await writeFile(join(clone, '.git'), `gitdir: ${join(elsewhere, '.git')}\n`);
    const refused = openClone(clone);
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(
      new RegExp(`${clone}: \\.git points at .*elsewhere/\\.git, outside the repo`),
    );
    // A relative path out of the clone is the same.
    await writeFile(join(clone, '.git'), 'gitdir: ../elsewhere/.git\n');
    await expect(openClone(clone)).rejects.toThrow(/outside the repo/);
    expect(await exists(marker)).toBe(false);
    // A .git file that stays inside the clone is fine (a separate git folder kept within).
    const inside = join(root, 'inside');
    await repoWithFilter(inside);
    execFileSync('mv', [join(inside, '.git'), join(inside, 'gitdata')]);
    await writeFile(join(inside, '.git'), 'gitdir: gitdata\n');
    const dest = join(root, 'copy');
    await mkdir(dest);
    const repo = await openClone(inside);
    expect(repo.dotGit).toBe('file');
    expect(await commitExists(repo, '0123456789abcdef')).toBe(false);
    expect(commit).toMatch(/^[0-9a-f]{40}$/);
    await exportCommit(repo, git(inside, 'rev-parse', 'HEAD').trim(), dest);
    expect(await exists(join(dest, 'src/a.txt'))).toBe(true);
  });

  it('refuses a .git link, a commondir and alternates that lead outside the clone', async () => {
    const elsewhere = join(root, 'elsewhere');
    await repoWithFilter(elsewhere);
    const linked = join(root, 'linked');
    await mkdir(linked);
    execFileSync('ln', ['-s', join(elsewhere, '.git'), join(linked, '.git')]);
    await expect(openClone(linked)).rejects.toThrow(/outside the repo/);

    const common = join(root, 'common');
    await repoWithFilter(common);
    await writeFile(join(common, '.git', 'commondir'), `${join(elsewhere, '.git')}\n`);
    await expect(openClone(common)).rejects.toThrow(/outside the repo/);

    // `git clone --shared`: objects read from the other repo.
    const shared = join(root, 'shared');
    git(root, 'clone', '-q', '--shared', elsewhere, shared);
    await expect(openClone(shared)).rejects.toThrow(
      /alternates reads objects from .*elsewhere.*outside the repo/,
    );
    git(root, 'clone', '-q', '--no-local', elsewhere, join(root, 'full'));
    expect((await openClone(join(root, 'full'))).top).toBe(join(root, 'full'));
    // A pack (or a loose object) that is a link reads objects from wherever it points.
    const pack = join(root, 'full', '.git', 'objects', 'pack');
    const [packFile] = (await readdir(pack)).filter((n) => n.endsWith('.pack'));
    await rename(join(pack, packFile!), join(root, 'moved.pack'));
    await symlink(join(root, 'moved.pack'), join(pack, packFile!));
    await expect(openClone(join(root, 'full'))).rejects.toThrow(/objects\/pack\/.*\.pack is a symlink/);
  });

  it('exports a sha256 repo', async () => {
    const clone = join(root, 'clone');
    await mkdir(clone);
    git(clone, 'init', '-q', '--object-format=sha256');
    await put(join(clone, 'f.txt'), 'sha256\n');
    git(clone, 'add', '-A');
    git(clone, 'commit', '-q', '-m', 'x');
    const commit = git(clone, 'rev-parse', 'HEAD').trim();
    expect(commit).toHaveLength(64);
    const dest = join(root, 'copy');
    await mkdir(dest);
    const repo = await openClone(clone);
    expect(repo.objectFormat).toBe('sha256');
    await exportCommit(repo, commit, dest);
    expect(await readFile(join(dest, 'f.txt'), 'utf8')).toBe('sha256\n');
  });
});

describe('applying a patch to a working copy', () => {
  it('runs no clean or smudge filter, not even from a .git the folder carries; plain git apply does', async () => {
    const dir = join(root, 'work');
    await repoWithFilter(dir);
    git(dir, 'config', 'filter.evil.clean', marking());
    git(dir, 'config', 'filter.evil.smudge', marking());
    await writeFile(join(dir, 'src/a.txt'), 'hello\nworld\n');
    const patch = git(dir, 'diff');
    await rm(marker, { force: true });
    await writeFile(join(dir, 'src/a.txt'), 'hello\n');
    const result = await applyPatch(dir, patch);
    expect(result).toEqual({ ok: true, stderr: '' });
    expect(await readFile(join(dir, 'src/a.txt'), 'utf8')).toBe('hello\nworld\n');
    expect(await exists(marker)).toBe(false);
    await writeFile(join(dir, 'src/a.txt'), 'hello\n');
    execFileSync('git', ['apply', '-'], {
      cwd: dir,
      input: patch,
      env: { PATH: process.env.PATH, HOME: home, GIT_CONFIG_NOSYSTEM: '1' },
    });
    expect(await exists(marker)).toBe(true);
  });

  it('says why a patch does not apply', async () => {
    const dir = join(root, 'work');
    await put(join(dir, 'a.txt'), 'other\n');
    const result = await applyPatch(
      dir,
      'diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello\n+world\n',
    );
    expect(result.ok).toBe(false);
    expect(result.stderr).toMatch(/patch failed|does not apply/);
  });
});

describe('listing a work tree', () => {
  it('runs no fsmonitor, textconv or hook of the repo config; plain git does', async () => {
    const repo = join(root, 'repo');
    await repoWithFilter(repo);
    const script = join(root, 'monitor.sh');
    await writeFile(script, `#!/bin/sh\necho ran >> ${marker}\n`);
    await chmod(script, 0o755);
    git(repo, 'config', 'core.fsmonitor', script);
    git(repo, 'config', 'diff.evil.textconv', marking());
    git(repo, 'config', 'core.hooksPath', join(root, 'hooks'));
    for (const hook of ['pre-commit', 'post-checkout', 'post-index-change', 'reference-transaction']) {
      await put(join(root, 'hooks', hook), `#!/bin/sh\necho ${hook} >> ${marker}\n`);
      await chmod(join(root, 'hooks', hook), 0o755);
    }
    await put(join(repo, 'untracked.txt'));
    const listed = await gitListing(repo);
    expect(listed.kind === 'git' && [...listed.files].sort()).toEqual([
      '.gitattributes',
      'src/a.txt',
      'untracked.txt',
    ]);
    expect(await exists(marker)).toBe(false);

    git(repo, 'status', '--porcelain');
    expect(await readFile(marker, 'utf8')).toMatch(/ran/);
    await rm(marker);
    await writeFile(join(repo, 'src/a.txt'), 'changed\n');
    git(repo, 'diff', 'HEAD');
    expect(await exists(marker)).toBe(true);
    await rm(marker);
    git(repo, 'commit', '-q', '-am', 'two');
    expect(await readFile(marker, 'utf8')).toMatch(/pre-commit/);
  });

  it("still leaves out what the user's global ignore file and the repo's info/exclude name", async () => {
    const repo = join(root, 'repo');
    await repoWithFilter(repo);
    await put(join(home, '.gitignore_global'), 'mine-everywhere.txt\n');
    await put(join(home, '.gitconfig'), '[core]\n\texcludesFile = ~/.gitignore_global\n');
    expect(await userExcludesFile()).toBe(join(home, '.gitignore_global'));
    await put(join(repo, '.git', 'info', 'exclude'), 'local-only.txt\n');
    for (const f of ['mine-everywhere.txt', 'local-only.txt', 'kept.txt']) await put(join(repo, f));
    const listed = await gitListing(repo);
    expect(listed.kind === 'git' && [...listed.files].sort()).toEqual([
      '.gitattributes',
      'kept.txt',
      'src/a.txt',
    ]);
  });

  it('lists a linked worktree and a submodule, and refuses a .git file pointing at some other git folder', async () => {
    const main = join(root, 'main');
    await repoWithFilter(main);
    git(main, 'worktree', 'add', '-q', join(root, 'wt'), '-b', 'wt');
    await put(join(root, 'wt', 'new.txt'));
    const wt = await gitListing(join(root, 'wt'));
    expect(wt.kind === 'git' && [...wt.files].sort()).toEqual(['.gitattributes', 'new.txt', 'src/a.txt']);

    // A submodule: its git folder is under .git/modules/ of the superproject around it.
    const sub = join(main, 'sub');
    await mkdir(join(main, '.git', 'modules'), { recursive: true });
    await repoWithFilter(join(main, '.git', 'modules', 'sub-src'));
    await mkdir(sub);
    execFileSync('mv', [
      join(main, '.git', 'modules', 'sub-src', '.git'),
      join(main, '.git', 'modules', 'sub'),
    ]);
    await writeFile(join(sub, '.git'), 'gitdir: ../.git/modules/sub\n');
    await put(join(sub, 'src/a.txt'), 'hello\n');
    const listedSub = await gitListing(sub);
    expect(listedSub.kind === 'git' && [...listedSub.files]).toContain('src/a.txt');

    const elsewhere = join(root, 'elsewhere');
    await repoWithFilter(elsewhere);
    const planted = join(root, 'planted');
    await put(join(planted, 'a.txt'));
    await writeFile(join(planted, '.git'), `gitdir: ${join(elsewhere, '.git')}\n`);
    const refused = gitListing(planted);
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(new RegExp(`${planted}: \\.git points at .*, outside the repo`));
  });

  it('says git is not installed, and not a repo, without an error', async () => {
    await put(join(root, 'plain', 'a.txt'));
    expect(await listFiles(join(root, 'plain'), { error: (m) => new ImageError(m) })).toEqual({
      kind: 'none',
      reason: 'not-a-repo',
    });
    const repo = join(root, 'repo');
    await repoWithFilter(repo);
    expect(await gitListing(repo, { gitBinary: join(root, 'no-such-git') })).toEqual({
      kind: 'none',
      reason: 'git is not installed, so .gitignore rules cannot be applied',
    });
  });
});

describe('the git runner', () => {
  it('gives git an environment of its own: no caller GIT_*, HOME an empty folder, no global or system config', async () => {
    saved.GIT_EXEC_PATH = process.env.GIT_EXEC_PATH;
    process.env.GIT_EXEC_PATH = join(root, 'nowhere');
    const shown = await runGit(['var', '-l'], { cwd: root });
    const text = shown.stdout.toString('utf8');
    expect(shown.code).toBe(0);
    expect(text).toMatch(/^core\.fsmonitor=false$/m);
    expect(text).toMatch(/^protocol\.allow=never$/m);
    expect(text).not.toMatch(/nowhere/);
    const env = await runGit(['rev-parse', '--git-dir'], { cwd: root });
    expect(env.stdout.toString('utf8')).toMatch(/sandbox-harness-git-[^/]+\/git\n$/);
  });
});
