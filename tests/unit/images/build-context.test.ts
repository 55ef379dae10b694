import { createHash } from 'node:crypto';
import { chmod, cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import tar from 'tar-stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ImageError } from '../../../src/errors.js';
import { INJECTED_DOCKERFILE, scanBuildContext } from '../../../src/sandbox/docker/build-context.js';

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
