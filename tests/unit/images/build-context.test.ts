import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, cp, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import tar from 'tar-stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BuildRefused, ImageError } from '../../../src/errors.js';
import { INJECTED_DOCKERFILE, scanBuildContext } from '../../../src/image-context/build-context.js';
import { TOKENS } from '../../helpers/fake-secrets.js';
import { rejection } from '../../helpers/rejection.js';

interface TarItem {
  name: string;
  type: string;
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  linkname: string | null;
  content: string;
}

async function readTar(stream: Readable): Promise<TarItem[]> {
  const extract = tar.extract();
  const items: TarItem[] = [];
  const done = (async () => {
    for await (const entry of extract) {
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      const h = entry.header;
      items.push({
        name: h.name,
        type: h.type,
        mode: h.mode,
        uid: h.uid,
        gid: h.gid,
        mtime: h.mtime.getTime(),
        linkname: h.linkname ?? null,
        content: Buffer.concat(chunks).toString('utf8'),
      });
    }
  })();
  stream.pipe(extract);
  await done;
  return items;
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

let root: string;
let repo: string;
let dockerfile: string;

async function put(rel: string, content = `content of ${rel}\n`): Promise<void> {
  const abs = join(repo, rel);
  await mkdir(dirname(abs), { recursive: true });
  await writeFile(abs, content);
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sh-build-context-'));
  repo = join(root, 'repo');
  await mkdir(repo);
  dockerfile = join(root, 'Dockerfile.sandbox');
  await writeFile(dockerfile, 'FROM scratch\nCOPY . /workspace\n');
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('build context: what goes in', () => {
  it('excludes every secret pattern at any depth, even without a .dockerignore', async () => {
    await put('src/index.js');
    await put('package.json');
    await put('.environment-notes.md'); // starts with .env: excluded too, on purpose
    for (const secret of [
      '.git/config',
      '.git/objects/ab/cdef',
      '.env',
      '.env.local',
      'services/api/.env.production',
      'certs/server.pem',
      'deep/nested/private.key',
      '.npmrc',
      'packages/a/.npmrc',
      '.aws/credentials',
      'home/.ssh/id_rsa',
      '.sandbox-harness/runs/r1/meta.json',
      'vendor/lib/.git/HEAD',
    ]) {
      await put(secret, 'SECRET_VALUE_DO_NOT_SHIP\n');
    }

    const context = await scanBuildContext({ contextDir: repo, dockerfile });

    expect([...context.snapshot.keys()].sort()).toEqual(['package.json', 'src/index.js']);
    const items = await readTar(context.createTar().stream);
    expect(items.some((i) => i.content.includes('SECRET_VALUE_DO_NOT_SHIP'))).toBe(false);
    expect(
      items
        .filter((i) => i.type !== 'directory')
        .map((i) => i.name)
        .sort(),
    ).toEqual(['.dockerignore', INJECTED_DOCKERFILE, 'package.json', 'src/index.js'].sort());
    expect(context.skipped.map((s) => s.path)).toEqual(
      expect.arrayContaining(['.git', '.env', '.aws', 'home/.ssh', 'certs/server.pem', 'vendor/lib/.git']),
    );
  });

  it('applies .dockerignore rules with Docker semantics (dirs, globs, ** and ! exceptions, case-sensitive)', async () => {
    await put(
      '.dockerignore',
      ['node_modules', '*.log', 'build/', '!build/keep.txt', 'docs/**/*.md', 'tmp*'].join('\n'),
    );
    await put('src/app.js');
    await put('app.log');
    await put('src/nested.log'); // `*.log` only matches at the top level in Docker
    await put('node_modules/left-pad/index.js');
    await put('build/out.js');
    await put('build/keep.txt');
    await put('docs/a/b/guide.md');
    await put('docs/readme.txt');
    await put('tmpfile');
    await put('TMPFILE'); // Docker on Linux matches case-sensitively

    const context = await scanBuildContext({ contextDir: repo, dockerfile });

    expect([...context.snapshot.keys()].sort()).toEqual(
      [
        '.dockerignore',
        'TMPFILE',
        'build/keep.txt',
        'docs/readme.txt',
        'src/app.js',
        'src/nested.log',
      ].sort(),
    );
  });

  it('applies extra excludes passed by the caller', async () => {
    await put('src/app.js');
    await put('fixtures/big.bin');
    const context = await scanBuildContext({ contextDir: repo, dockerfile, extraExcludes: ['fixtures'] });
    expect([...context.snapshot.keys()]).toEqual(['src/app.js']);
  });

  it('records sha256, mode and size of every file', async () => {
    await put('run.sh', '#!/bin/sh\necho hi\n');
    await chmod(join(repo, 'run.sh'), 0o755);
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(context.snapshot.get('run.sh')).toEqual({
      sha256: createHash('sha256').update('#!/bin/sh\necho hi\n').digest('hex'),
      mode: 0o755,
      size: 18,
      type: 'file',
    });
  });
});

describe('build context: symlinks', () => {
  it('never follows a symlink: links leaving the repo are skipped with a warning, their targets never read', async () => {
    const outside = join(root, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'secret.txt'), 'OUTSIDE_SECRET\n');
    await put('src/app.js');
    await symlink(outside, join(repo, 'abs-dir-link'));
    await symlink('../outside/secret.txt', join(repo, 'rel-file-link'));
    await symlink('../outside', join(repo, 'rel-dir-link'));
    await symlink(join(repo, 'src/app.js'), join(repo, 'abs-inside-link'));
    await symlink('.', join(repo, 'self'));
    await symlink('self/..', join(repo, 'escape-through-link')); // lexically inside, really outside

    const warnings: string[] = [];
    const context = await scanBuildContext({
      contextDir: repo,
      dockerfile,
      onWarning: (w) => warnings.push(w),
    });

    expect([...context.snapshot.keys()].sort()).toEqual(['self', 'src/app.js']);
    for (const skipped of [
      'abs-dir-link',
      'rel-file-link',
      'rel-dir-link',
      'abs-inside-link',
      'escape-through-link',
    ]) {
      expect(warnings.some((w) => w.includes(`symlink ${skipped} `))).toBe(true);
    }
    const items = await readTar(context.createTar().stream);
    expect(items.some((i) => i.content.includes('OUTSIDE_SECRET'))).toBe(false);
    expect(items.some((i) => i.name.startsWith('self/'))).toBe(false);
  });

  it('keeps a symlink that points inside the repo as a symlink, without walking into it', async () => {
    await put('src/app.js');
    await symlink('src', join(repo, 'lib'));
    await mkdir(join(repo, 'bin'));
    await symlink('../src/app.js', join(repo, 'bin/app'));

    const context = await scanBuildContext({ contextDir: repo, dockerfile });

    expect(context.snapshot.get('lib')).toMatchObject({ type: 'symlink', linkTarget: 'src' });
    expect(context.snapshot.get('bin/app')).toMatchObject({ type: 'symlink', linkTarget: '../src/app.js' });
    expect(context.snapshot.has('lib/app.js')).toBe(false);
    const items = await readTar(context.createTar().stream);
    expect(items.find((i) => i.name === 'lib')).toMatchObject({ type: 'symlink', linkname: 'src' });
  });
});

describe('build context: content hash', () => {
  async function baseline(): Promise<void> {
    await put('src/app.js', 'console.log(1)\n');
    await put('package.json', '{"name":"x"}\n');
    await put('.env', 'TOKEN=1\n');
  }

  it('is stable across runs and across copies of the same repo', async () => {
    await baseline();
    const a = await scanBuildContext({ contextDir: repo, dockerfile, buildArgs: { A: '1', B: '2' } });
    const b = await scanBuildContext({ contextDir: repo, dockerfile, buildArgs: { B: '2', A: '1' } });
    const copy = join(root, 'copy');
    await cp(repo, copy, { recursive: true });
    const c = await scanBuildContext({ contextDir: copy, dockerfile, buildArgs: { A: '1', B: '2' } });
    expect(a.contentHash).toMatch(/^[0-9a-f]{64}$/);
    expect(b.contentHash).toBe(a.contentHash);
    expect(c.contentHash).toBe(a.contentHash);
  });

  it('changes when one file changes', async () => {
    await baseline();
    const before = await scanBuildContext({ contextDir: repo, dockerfile });
    await put('src/app.js', 'console.log(2)\n');
    const after = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(after.contentHash).not.toBe(before.contentHash);
  });

  it('changes when a file is added, removed or changes mode', async () => {
    await baseline();
    const h0 = (await scanBuildContext({ contextDir: repo, dockerfile })).contentHash;
    await put('src/new.js');
    const h1 = (await scanBuildContext({ contextDir: repo, dockerfile })).contentHash;
    await rm(join(repo, 'src/new.js'));
    const h2 = (await scanBuildContext({ contextDir: repo, dockerfile })).contentHash;
    await chmod(join(repo, 'src/app.js'), 0o755);
    const h3 = (await scanBuildContext({ contextDir: repo, dockerfile })).contentHash;
    expect(h1).not.toBe(h0);
    expect(h2).toBe(h0);
    expect(h3).not.toBe(h0);
  });

  it('changes when the Dockerfile changes', async () => {
    await baseline();
    const before = await scanBuildContext({ contextDir: repo, dockerfile });
    await writeFile(dockerfile, 'FROM scratch\nCOPY . /workspace\nRUN true\n');
    const after = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(after.contentHash).not.toBe(before.contentHash);
  });

  it('changes when a build argument changes, and with extra hash inputs', async () => {
    await baseline();
    const a = await scanBuildContext({ contextDir: repo, dockerfile, buildArgs: { BASE_IMAGE: 'x:1' } });
    const b = await scanBuildContext({ contextDir: repo, dockerfile, buildArgs: { BASE_IMAGE: 'x:2' } });
    const c = await scanBuildContext({
      contextDir: repo,
      dockerfile,
      buildArgs: { BASE_IMAGE: 'x:1' },
      hashInputs: { base: 'sha256:1' },
    });
    expect(b.contentHash).not.toBe(a.contentHash);
    expect(c.contentHash).not.toBe(a.contentHash);
  });

  it('does not change when only an excluded file changes', async () => {
    await baseline();
    const before = await scanBuildContext({ contextDir: repo, dockerfile });
    await put('.env', 'TOKEN=2\n');
    await put('.git/HEAD', 'ref: refs/heads/other\n');
    const after = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(after.contentHash).toBe(before.contentHash);
  });
});

describe('build context: tar stream', () => {
  it('is byte-for-byte deterministic, with uid/gid 0 and a fixed mtime', async () => {
    await put('src/app.js');
    await put('README.md');
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    const first = await collect(context.createTar().stream);
    const again = await collect(
      (await scanBuildContext({ contextDir: repo, dockerfile })).createTar().stream,
    );
    expect(again.equals(first)).toBe(true);
    const items = await readTar(context.createTar().stream);
    expect(new Set(items.map((i) => `${i.uid}:${i.gid}`))).toEqual(new Set(['0:0']));
    expect(new Set(items.map((i) => i.mtime)).size).toBe(1);
  });

  it('adds an outside Dockerfile under its own name and a .dockerignore that makes the daemon drop both', async () => {
    await put('src/app.js');
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(context.dockerfileInContext).toBe(INJECTED_DOCKERFILE);
    const items = await readTar(context.createTar().stream);
    expect(items.find((i) => i.name === INJECTED_DOCKERFILE)?.content).toBe(
      'FROM scratch\nCOPY . /workspace\n',
    );
    expect(items.find((i) => i.name === '.dockerignore')?.content).toBe(
      `.dockerignore\n${INJECTED_DOCKERFILE}\n`,
    );
    expect(context.snapshot.has(INJECTED_DOCKERFILE)).toBe(false);
  });

  it("uses the repo's own Dockerfile in place when it is part of the context", async () => {
    await put('src/app.js');
    await put('Dockerfile.sandbox', 'FROM scratch\n');
    const context = await scanBuildContext({
      contextDir: repo,
      dockerfile: join(repo, 'Dockerfile.sandbox'),
    });
    expect(context.dockerfileInContext).toBe('Dockerfile.sandbox');
    const names = (await readTar(context.createTar().stream)).map((i) => i.name);
    expect(names.filter((n) => n === 'Dockerfile.sandbox')).toHaveLength(1);
    expect(names).not.toContain(INJECTED_DOCKERFILE);
    expect(names).not.toContain('.dockerignore');
  });

  it('fails the stream with an ImageError when a file changes after the scan', async () => {
    await put('src/app.js', 'one\n');
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    await put('src/app.js', 'two\n');
    const { stream, done } = context.createTar();
    stream.resume();
    await expect(done).rejects.toBeInstanceOf(ImageError);
    await expect(done).rejects.toThrow(/src\/app\.js changed/);
  });

  it('rejects a missing Dockerfile with an ImageError naming it', async () => {
    await put('src/app.js');
    await expect(scanBuildContext({ contextDir: repo, dockerfile: join(root, 'nope') })).rejects.toThrow(
      /Dockerfile .*nope does not exist/,
    );
  });
});

describe('build context: in a git work tree', () => {
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], {
      cwd: repo,
      stdio: 'pipe',
      env: { PATH: process.env.PATH, HOME: root },
    });

  beforeEach(async () => {
    git('init', '-q');
    await put('.gitignore', ['node_modules/', '.venv/', 'ignored/', '*.log', 'dist/'].join('\n'));
    await put('src/app.js');
    git('add', '.gitignore', 'src/app.js');
    await put('notes.md'); // untracked, not ignored
    await put('ignored/local-config.yaml', 'not for the image\n');
    await put('debug.log');
    await put('dist/bundle.js');
    await put('node_modules/left-pad/index.js');
    await put('packages/a/index.js');
    await put('packages/a/node_modules/dep/index.js');
    await put('.venv/lib/site.py');
  });

  it('takes tracked and untracked-but-not-ignored files, plus node_modules and .venv even when ignored', async () => {
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(context.fileSource).toBe('git');
    expect([...context.snapshot.keys()].sort()).toEqual(
      [
        '.gitignore',
        '.venv/lib/site.py',
        'node_modules/left-pad/index.js',
        'notes.md',
        'packages/a/index.js',
        'packages/a/node_modules/dep/index.js',
        'src/app.js',
      ].sort(),
    );
    // Ignored folders are not even walked: they cannot add folders to the image.
    expect(context.directories).not.toContain('dist');
    expect(context.directories).not.toContain('ignored');
  });

  it('still applies .dockerignore and the secret names on top of git', async () => {
    await put('.dockerignore', 'notes.md\n');
    await put('config/.ENV.production', 'X=1\n');
    git('add', '-f', 'config/.ENV.production');
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(context.snapshot.has('notes.md')).toBe(false);
    expect(context.snapshot.has('config/.ENV.production')).toBe(false);
    expect(context.skipped).toContainEqual(expect.objectContaining({ path: 'config/.ENV.production' }));
  });

  it('takes a nested repository (or submodule) whole', async () => {
    await put('vendor/lib/index.js');
    execFileSync('git', ['init', '-q'], { cwd: join(repo, 'vendor/lib') });
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(context.snapshot.has('vendor/lib/index.js')).toBe(true);
    expect(context.snapshot.has('vendor/lib/.git/HEAD')).toBe(false);
  });

  it('lists a sub-folder of a work tree relative to itself', async () => {
    const context = await scanBuildContext({ contextDir: join(repo, 'packages', 'a'), dockerfile });
    expect(context.fileSource).toBe('git');
    expect([...context.snapshot.keys()].sort()).toEqual(['index.js', 'node_modules/dep/index.js']);
  });

  it("never runs a program the repo's git config names (core.fsmonitor)", async () => {
    const marker = join(root, 'fsmonitor-ran');
    await writeFile(join(root, 'monitor.sh'), `#!/bin/sh\ntouch ${marker}\n`);
    await chmod(join(root, 'monitor.sh'), 0o755);
    git('config', 'core.fsmonitor', join(root, 'monitor.sh'));
    const context = await scanBuildContext({ contextDir: repo, dockerfile });
    expect(context.snapshot.has('src/app.js')).toBe(true);
    await expect(stat(marker)).rejects.toThrow();
    // The same config does run the program for an ordinary git call: the test can fail.
    git('status', '--porcelain');
    await expect(stat(marker)).resolves.toBeTruthy();
  });

  it("ignores the caller's GIT_* variables (a git hook running the harness sets GIT_DIR)", async () => {
    await put('ignored/forced.txt');
    git('add', '-f', 'ignored/forced.txt');
    const other = join(root, 'other');
    await mkdir(other);
    execFileSync('git', ['init', '-q'], { cwd: other });
    await writeFile(join(root, 'excludes'), 'notes.md\n');
    const injected = {
      GIT_DIR: join(other, '.git'),
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'core.excludesFile',
      GIT_CONFIG_VALUE_0: join(root, 'excludes'),
    };
    const saved = Object.fromEntries(Object.keys(injected).map((k) => [k, process.env[k]]));
    Object.assign(process.env, injected);
    try {
      const context = await scanBuildContext({ contextDir: repo, dockerfile });
      expect(context.snapshot.has('notes.md')).toBe(true);
      expect(context.snapshot.has('ignored/forced.txt')).toBe(true);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  it.runIf(process.getuid?.() === 0)(
    "lists a repo owned by another user (dubious ownership) without changing the user's git config",
    async () => {
      execFileSync('chown', ['-R', '4321:4321', repo]);
      const context = await scanBuildContext({ contextDir: repo, dockerfile });
      expect(context.fileSource).toBe('git');
      expect(context.snapshot.has('ignored/local-config.yaml')).toBe(false);
      await expect(stat(join(root, '.gitconfig'))).rejects.toThrow();
    },
  );

  it('uses the folder rules, with a warning, when the enclosing repo ignores the whole folder', async () => {
    await put('ignored/service/src/main.js');
    const warnings: string[] = [];
    const context = await scanBuildContext({
      contextDir: join(repo, 'ignored', 'service'),
      dockerfile,
      onWarning: (w) => warnings.push(w),
    });
    expect(context.fileSource).toBe('folder');
    expect([...context.snapshot.keys()]).toEqual(['src/main.js']);
    expect(warnings.join('\n')).toMatch(/git lists no file in it/);
  });
});

describe('build context: secrets in file contents', () => {
  const scan = (extra: Partial<Parameters<typeof scanBuildContext>[0]> = {}) =>
    scanBuildContext({ contextDir: repo, dockerfile, secretScanCache: false, ...extra });

  const refusal = (extra: Partial<Parameters<typeof scanBuildContext>[0]> = {}) =>
    rejection(scan(extra), BuildRefused);

  it('refuses a private key under an innocent name, listing file:line and how to exclude it, never the key', async () => {
    await put('src/app.js');
    await put('config/deploy.txt', `# deploy key\n${TOKENS['a private key (PEM block)']}\n`);
    await put(
      'src/settings.js',
      `export const a = 1;\nexport const b = 2;\nconst t = '${TOKENS['a GitHub token']}';\n`,
    );
    const error = await refusal();
    expect(error.message).toContain('config/deploy.txt:2: a private key (PEM block)');
    expect(error.message).toContain('src/settings.js:3: a GitHub token');
    expect(error.hint).toMatch(/\.dockerignore/);
    expect(error.hint).toMatch(/sandbox\.build\.exclude/);
    const everything = `${error.message}\n${error.hint}\n${JSON.stringify(error.details)}`;
    expect(everything).not.toContain(TOKENS['a GitHub token']!.slice(4, 24));
    expect(everything).not.toContain(TOKENS['a private key (PEM block)']!.split('\n')[1]!.slice(0, 24));
  });

  it('builds once the file is excluded by .dockerignore or by the caller (catalog sandbox.build.exclude)', async () => {
    await put('src/app.js');
    await put('fixtures/keys/test.txt', `${TOKENS['a private key (PEM block)']}\n`);
    await expect(scan({ extraExcludes: ['fixtures/keys'] })).resolves.toBeTruthy();
    await put('.dockerignore', 'fixtures/keys/**\n');
    const context = await scan();
    expect(context.snapshot.has('fixtures/keys/test.txt')).toBe(false);
  });

  it('in node_modules, lets test keys of packages through but not provider tokens', async () => {
    await put('node_modules/ssh2/test/fixtures/host_key.txt', `${TOKENS['a private key (PEM block)']}\n`);
    await expect(scan()).resolves.toBeTruthy();
    await put('node_modules/leaky/config.js', `module.exports = '${TOKENS['an npm token']}';\n`);
    expect((await refusal()).message).toContain('node_modules/leaky/config.js:1: an npm token');
  });

  it('scans a Dockerfile from outside the repo too (its ENV lines end up in the image)', async () => {
    await put('src/app.js');
    await writeFile(dockerfile, `FROM scratch\nENV TOKEN=${TOKENS['an Anthropic API key']}\n`);
    expect((await refusal()).message).toContain(`${dockerfile}:2: an Anthropic API key`);
  });

  it('scans large files in chunks, with the right line', async () => {
    const lines = Array.from({ length: 60_000 }, (_, i) => `line ${i} ${'x'.repeat(20)}`);
    lines[45_000] = `key = "${TOKENS['an AWS access key id']}"`;
    await put('data/big.txt', lines.join('\n'));
    expect((await refusal()).message).toContain('data/big.txt:45001: an AWS access key id');
  });

  it('remembers clean files between scans, and a file that changes is scanned again', async () => {
    const cache = join(root, 'clean.txt');
    await put('src/app.js', 'console.log(1)\n');
    await scan({ secretScanCache: cache });
    const remembered = await readFile(cache, 'utf8');
    expect(remembered).toContain(createHash('sha256').update('console.log(1)\n').digest('hex'));
    await put('src/app.js', `console.log('${TOKENS['an OpenAI API key']}')\n`);
    expect((await refusal({ secretScanCache: cache })).message).toContain('src/app.js:1: an OpenAI API key');
    // A file with a hit is never remembered as clean.
    expect(await readFile(cache, 'utf8')).toBe(remembered);
  });

  it('does not scan when asked not to (a context nothing is built from)', async () => {
    await put('src/key.txt', `${TOKENS['a private key (PEM block)']}\n`);
    await expect(scan({ secretScan: false })).resolves.toBeTruthy();
  });
});

describe('build context: files the host reads', () => {
  it('refuses a .dockerignore or a Dockerfile that is a symlink out of the repo', async () => {
    const outside = join(root, 'host-file');
    await writeFile(outside, 'FROM scratch\n');
    await put('src/app.js');
    await symlink(outside, join(repo, '.dockerignore'));
    await expect(scanBuildContext({ contextDir: repo, dockerfile })).rejects.toThrow(
      /^\.dockerignore is a symlink to .*host-file, outside the repo/,
    );
    await rm(join(repo, '.dockerignore'));
    await symlink(outside, join(repo, 'Dockerfile.sandbox'));
    const error = await rejection(
      scanBuildContext({ contextDir: repo, dockerfile: 'Dockerfile.sandbox', dockerfileRoot: repo }),
      BuildRefused,
    );
    expect(error.message).toMatch(
      /^Dockerfile Dockerfile\.sandbox is a symlink to .*host-file, outside the repo/,
    );
  });

  it('refuses a Dockerfile reached through a folder link out of its folder', async () => {
    const hostDir = join(root, 'host-dir');
    await mkdir(hostDir);
    await writeFile(join(hostDir, 'Dockerfile'), 'FROM scratch\n');
    await symlink(hostDir, join(repo, 'docker'));
    await put('src/app.js');
    await expect(
      scanBuildContext({ contextDir: repo, dockerfile: 'docker/Dockerfile', dockerfileRoot: repo }),
    ).rejects.toThrow(/^Dockerfile docker\/Dockerfile: docker is a symlink to .*host-dir, outside the repo/);
  });
});
