/**
 * The file-level half of the sandbox contract, as tests every backend runs: Docker
 * (`docker.test.ts`) and the in-memory fake (`memory.test.ts`), so the fake that unit tests
 * rely on cannot drift from what Docker does. Each target starts from the workspace of
 * `tests/fixtures/repos/conformance` plus `locked/` (a folder the sandbox user does not own)
 * and `node_modules/dep/`, and says how to arrange what the file API cannot make (links,
 * fifos, deletions).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Sandbox, SandboxSpec } from '../../src/sandbox/types.js';

export type ArrangeStep =
  | { symlink: { target: string; path: string } }
  | { hardlink: { existing: string; path: string } }
  | { fifo: string }
  | { mkdir: string }
  | { remove: string }
  | { write: { path: string; content: string } }
  | { chmod: { path: string; mode: number } };

export interface FileConformanceTarget {
  name: string;
  make(spec?: Partial<SandboxSpec>): Promise<Sandbox>;
  arrange(sandbox: Sandbox, steps: ArrangeStep[]): Promise<void>;
  /** Removes every sandbox it made. */
  cleanup(): Promise<void>;
  /**
   * How an export refuses a named pipe: `special-file` where the exporter sees it, `missing`
   * where it never reaches what the exporter reads (gVisor keeps named pipes in its own kernel,
   * so they are not in the writable layer the host reads). Refused either way.
   */
  fifoRefusedAs?: 'special-file' | 'missing';
}

async function problem(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return (error as { problem?: string }).problem ?? `not a SandboxFileError: ${String(error)}`;
  }
}

export function describeFileConformance(target: FileConformanceTarget): void {
  describe(`file conformance: ${target.name}`, () => {
    afterAll(() => target.cleanup());

    // A sandbox made inside a test is disposed when that test ends, not with the rest at the
    // end: live sandboxes cost every later test (each has a disk watchdog asking the engine for
    // its size every second, which on Podman walks the container's files), and the last tests
    // of the file paid for all the earlier ones. Those of a `beforeAll` live until their block ends.
    const made: Sandbox[] = [];
    let inTest = false;
    beforeEach(() => {
      inTest = true;
    });
    afterEach(async () => {
      inTest = false;
      await Promise.all(made.splice(0).map((box) => box.dispose()));
    });
    const make = async (spec?: Partial<SandboxSpec>): Promise<Sandbox> => {
      const box = await target.make(spec);
      if (inTest) made.push(box);
      return box;
    };

    describe('readFile', () => {
      let box: Sandbox;
      afterAll(() => box?.dispose());
      beforeAll(async () => {
        box = await make();
        await target.arrange(box, [
          { symlink: { target: 'greeting.txt', path: 'src/link.txt' } },
          { symlink: { target: '../src', path: 'linked' } },
          { fifo: 'pipe' },
        ]);
      });

      it('reads a workspace file, bytes exact', async () => {
        expect((await box.readFile('src/greeting.txt')).toString()).toBe('hello\n');
        expect((await box.readFile('src/nested/deep.txt')).toString()).toBe('deep\n');
      });

      it('names each refusal with its kind', async () => {
        expect(await problem(box.readFile('src/nope.txt'))).toBe('missing');
        expect(await problem(box.readFile('nope/deeper.txt'))).toBe('missing');
        expect(await problem(box.readFile('src'))).toBe('is-a-directory');
        expect(await problem(box.readFile('pipe'))).toBe('not-a-file');
        expect(await problem(box.readFile('src/greeting.txt', { maxBytes: 3 }))).toBe('too-large');
        expect(await problem(box.readFile('../etc/passwd'))).toBe('invalid-path');
        expect(await problem(box.readFile('src//greeting.txt'))).toBe('invalid-path');
      });

      it('never reads through a symlink, at the end or on the way', async () => {
        expect(await problem(box.readFile('src/link.txt'))).toBe('through-link');
        expect(await problem(box.readFile('linked/greeting.txt'))).toBe('through-link');
      });
    });

    describe('writeFiles', () => {
      let box: Sandbox;
      afterAll(() => box?.dispose());
      beforeAll(async () => {
        box = await make();
        await target.arrange(box, [
          { symlink: { target: '../src', path: 'out/shared' } },
          { symlink: { target: '../README.md', path: 'src/readme-link' } },
          { mkdir: 'folder' },
        ]);
      });

      it('creates folders and files, whole, with the mode asked for', async () => {
        await box.writeFiles([
          { path: 'deep/new/file.txt', content: 'content\n' },
          { path: 'deep/run.sh', content: '#!/bin/sh\n', mode: 0o755 },
        ]);
        expect((await box.readFile('deep/new/file.txt')).toString()).toBe('content\n');
        const exported = await box.exportFiles(['deep/new/file.txt', 'deep/run.sh']);
        expect(exported.files.map((f) => [f.path, f.mode & 0o777])).toEqual([
          ['deep/new/file.txt', 0o644],
          ['deep/run.sh', 0o755],
        ]);
      });

      it('writes a batch whose paths are longer together than one command line of the channel', async () => {
        // 60 files of about 2.8 KiB of path each: 170 KiB, over one shell argument (128 KiB).
        const folder = Array.from(
          { length: 11 },
          (_, i) => `${String(i).padStart(2, '0')}${'p'.repeat(240)}`,
        ).join('/');
        const files = Array.from({ length: 60 }, (_, i) => ({
          path: `long/${folder}/f${i}.txt`,
          content: `${i}\n`,
        }));
        await box.writeFiles(files);
        expect((await box.readFile(files[59]!.path)).toString()).toBe('59\n');
        expect((await box.readFile(files[0]!.path)).toString()).toBe('0\n');
      });

      it('replaces an existing file whole', async () => {
        await box.writeFiles([{ path: 'src/greeting.txt', content: 'hi' }]);
        expect((await box.readFile('src/greeting.txt')).toString()).toBe('hi');
      });

      it('refuses a symlinked folder on the way and writes nothing where it points', async () => {
        expect(await problem(box.writeFiles([{ path: 'out/shared/nested/deep.txt', content: 'evil' }]))).toBe(
          'through-link',
        );
        expect((await box.readFile('src/nested/deep.txt')).toString()).toBe('deep\n');
      });

      it('refuses a symlink at the name itself and leaves its target alone', async () => {
        expect(await problem(box.writeFiles([{ path: 'src/readme-link', content: 'evil' }]))).toBe(
          'through-link',
        );
        expect((await box.readFile('README.md')).toString()).toBe('untouched\n');
      });

      it('refuses to replace a folder, to write where it may not, and malformed paths', async () => {
        expect(await problem(box.writeFiles([{ path: 'folder', content: 'x' }]))).toBe('is-a-directory');
        expect(await problem(box.writeFiles([{ path: 'locked/file.txt', content: 'x' }]))).toBe('permission');
        expect(await problem(box.writeFiles([{ path: 'locked/new.txt', content: 'x' }]))).toBe('permission');
        expect(await problem(box.writeFiles([{ path: '../escape.txt', content: 'x' }]))).toBe('invalid-path');
        expect(await problem(box.writeFiles([{ path: '/etc/passwd', content: 'x' }]))).toBe('invalid-path');
        expect((await box.readFile('locked/file.txt')).toString()).toBe('locked\n');
      });
    });

    describe("writeFiles keeps a file's mode", () => {
      let box: Sandbox;
      afterAll(() => box?.dispose());
      const modes: Record<string, number> = {
        'bin/run.sh': 0o755,
        'bin/private.sh': 0o700,
        'bin/shared.txt': 0o664,
        'bin/readonly.txt': 0o444,
        'bin/setuid.sh': 0o4755,
        'bin/setgid.sh': 0o6755,
        'bin/explicit.sh': 0o755,
        'bin/linked.sh': 0o755,
      };
      const exportedModes = async (paths: string[]) => {
        const exported = await box.exportFiles(paths);
        return Object.fromEntries(exported.files.map((f) => [f.path, f.mode & 0o7777]));
      };
      const scannedModes = async (paths: string[]) => {
        const { changes } = await box.changes();
        return Object.fromEntries(
          changes.filter((c) => paths.includes(c.path)).map((c) => [c.path, (c.mode ?? -1) & 0o7777]),
        );
      };
      beforeAll(async () => {
        box = await make();
        await target.arrange(box, [
          { mkdir: 'bin' },
          ...Object.entries(modes).flatMap(([path, mode]): ArrangeStep[] => [
            { write: { path, content: 'before\n' } },
            { chmod: { path, mode } },
          ]),
          { hardlink: { existing: 'bin/linked.sh', path: 'bin/alias.sh' } },
          { symlink: { target: 'run.sh', path: 'bin/link.sh' } },
        ]);
        // The arranged modes really are there (setuid and setgid included): nothing below is vacuous.
        expect(await scannedModes(Object.keys(modes))).toEqual(modes);
      });

      it('a rewrite without a mode keeps what the file has: 0755, 0700, 0664, 0444', async () => {
        const kept = ['bin/run.sh', 'bin/private.sh', 'bin/shared.txt', 'bin/readonly.txt'];
        await box.writeFiles(kept.map((path) => ({ path, content: `after ${path}\n` })));
        for (const path of kept) expect((await box.readFile(path)).toString()).toBe(`after ${path}\n`);
        const expected = Object.fromEntries(kept.map((p) => [p, modes[p]]));
        expect(await exportedModes(kept)).toEqual(expected);
        expect(await scannedModes(kept)).toEqual(expected);
      });

      it('a rewrite never keeps a setuid or setgid bit', async () => {
        await box.writeFiles([
          { path: 'bin/setuid.sh', content: 'after\n' },
          { path: 'bin/setgid.sh', content: 'after\n' },
        ]);
        const expected = { 'bin/setuid.sh': 0o755, 'bin/setgid.sh': 0o755 };
        expect(await exportedModes(Object.keys(expected))).toEqual(expected);
        expect(await scannedModes(Object.keys(expected))).toEqual(expected);
      });

      it('a new file gets 0644; a mode asked for wins, without special bits', async () => {
        await box.writeFiles([
          { path: 'bin/new.txt', content: 'new\n' },
          { path: 'bin/explicit.sh', content: 'after\n', mode: 0o644 },
          { path: 'bin/new-special.sh', content: 'new\n', mode: 0o4755 },
        ]);
        expect(await exportedModes(['bin/new.txt', 'bin/explicit.sh', 'bin/new-special.sh'])).toEqual({
          'bin/new.txt': 0o644,
          'bin/explicit.sh': 0o644,
          'bin/new-special.sh': 0o755,
        });
      });

      it('keeps the mode of a hard link it replaces, and leaves the other name alone', async () => {
        await box.writeFiles([{ path: 'bin/alias.sh', content: 'alias\n' }]);
        expect((await box.readFile('bin/linked.sh')).toString()).toBe('before\n');
        const exported = await box.exportFiles(['bin/alias.sh', 'bin/linked.sh']);
        const mode = (path: string) => exported.files.find((f) => f.path === path)?.mode;
        expect((mode('bin/alias.sh') ?? -1) & 0o7777).toBe(0o755);
        // The other name keeps its mode; where the kernel still counts two names for it (gVisor's
        // in-sandbox view), the export refuses it as a hard link: closed, never another mode.
        if (mode('bin/linked.sh') !== undefined) expect(mode('bin/linked.sh')! & 0o7777).toBe(0o755);
        else
          expect(exported.refused).toContainEqual(
            expect.objectContaining({ path: 'bin/linked.sh', kind: 'hard-link' }),
          );
      });

      it('never takes a mode through a symlink, and a folder where a file was is refused', async () => {
        expect(await problem(box.writeFiles([{ path: 'bin/link.sh', content: 'evil' }]))).toBe(
          'through-link',
        );
        await target.arrange(box, [{ remove: 'bin/private.sh' }, { mkdir: 'bin/private.sh' }]);
        expect(await problem(box.writeFiles([{ path: 'bin/private.sh', content: 'x' }]))).toBe(
          'is-a-directory',
        );
      });
    });

    describe('listFiles', () => {
      it('lists files, folders and links with their types, without node_modules', async () => {
        const box = await make();
        await target.arrange(box, [{ symlink: { target: 'greeting.txt', path: 'src/link.txt' } }]);
        const entries = await box.listFiles();
        const byPath = new Map(entries.map((e) => [e.path, e]));
        expect(byPath.get('src/greeting.txt')).toEqual({ path: 'src/greeting.txt', type: 'file', size: 6 });
        expect(byPath.get('src')?.type).toBe('directory');
        expect(byPath.get('src/link.txt')?.type).toBe('symlink');
        expect(byPath.get('src/nested/deep.txt')?.type).toBe('file');
        expect([...byPath.keys()].some((p) => p.startsWith('node_modules'))).toBe(false);
        expect((await box.listFiles('src')).map((e) => e.path)).toEqual(
          expect.arrayContaining(['src/greeting.txt', 'src/nested', 'src/nested/deep.txt']),
        );
        expect(await box.listFiles('.', { maxEntries: 2 })).toHaveLength(2);
        expect(await problem(box.listFiles('src/link.txt'))).toBe('through-link');
      });
    });

    describe('changes', () => {
      it('lists nothing for an untouched workspace', async () => {
        const box = await make();
        await box.readFile('src/greeting.txt');
        await box.listFiles();
        expect(await box.changes()).toEqual({ changes: [], complete: true });
      });

      it('lists created, modified and deleted files, new folders, links and type changes', async () => {
        const box = await make();
        await box.writeFiles([
          { path: 'src/greeting.txt', content: 'hello\nmore\n' },
          { path: 'lib/new.txt', content: 'new\n' },
        ]);
        await target.arrange(box, [
          { remove: 'src/obsolete.txt' },
          { remove: 'src/nested' },
          { symlink: { target: '..', path: 'src/up' } },
          { remove: 'README.md' },
          { mkdir: 'README.md' },
        ]);
        const { changes, complete } = await box.changes();
        expect(complete).toBe(true);
        expect(changes.map((c) => [c.path, c.kind, c.type])).toEqual([
          ['README.md', 'modified', 'directory'],
          ['lib', 'added', 'directory'],
          ['lib/new.txt', 'added', 'file'],
          ['src/greeting.txt', 'modified', 'file'],
          ['src/nested', 'deleted', undefined],
          ['src/nested/deep.txt', 'deleted', undefined],
          ['src/obsolete.txt', 'deleted', undefined],
          ['src/up', 'added', 'symlink'],
        ]);
        const file = changes.find((c) => c.path === 'src/greeting.txt');
        expect(file).toMatchObject({ size: 11, links: 1 });
      });

      it('sees the deletion of the last file in a folder', async () => {
        const box = await make();
        await target.arrange(box, [{ remove: 'src/nested/deep.txt' }]);
        expect((await box.changes()).changes).toEqual([{ path: 'src/nested/deep.txt', kind: 'deleted' }]);
      });

      it('reports a hard link and a file whose content did not change but was rewritten', async () => {
        const box = await make();
        await target.arrange(box, [{ hardlink: { existing: 'src/greeting.txt', path: 'src/alias.txt' } }]);
        const { changes } = await box.changes();
        expect(changes.find((c) => c.path === 'src/alias.txt')).toMatchObject({ kind: 'added', links: 2 });
      });

      it('says when there are more changes than it may list', async () => {
        const box = await make();
        await box.writeFiles(
          Array.from({ length: 12 }, (_, i) => ({ path: `many/f${i}.txt`, content: `${i}` })),
        );
        const scan = await box.changes({ maxEntries: 5 });
        expect(scan.complete).toBe(false);
        expect(scan.changes.length).toBeLessThanOrEqual(5);
      });

      it('treats hidden paths as never there', async () => {
        const box = await make({ hidden: ['src/obsolete.txt', 'src/nested'] });
        expect(await problem(box.readFile('src/obsolete.txt'))).toBe('missing');
        expect(await problem(box.readFile('src/nested/deep.txt'))).toBe('missing');
        expect((await box.changes()).changes).toEqual([]);
      });

      it("treats hidden paths as never there in an agent's sandbox, whose channel removed them", async () => {
        const box = await make({ hidden: ['src/obsolete.txt', 'src/nested'], channel: true });
        await heldOutAreGone(box);
      });

      it("removes a held-out list longer than the channel's command line takes (an exec's arguments)", async () => {
        // About 180 KiB of paths: more than one shell argument (128 KiB) of the channel may carry.
        const absent = Array.from({ length: 3000 }, (_, i) => `src/absent/${'d'.repeat(48)}-${i}.txt`);
        const box = await make({ hidden: ['src/obsolete.txt', ...absent, 'src/nested'], channel: true });
        await heldOutAreGone(box);
      });

      async function heldOutAreGone(box: Sandbox): Promise<void> {
        // The agent's own calls go over the channel: they see no trace of the held-out files.
        // (A shell test, not `ls`: gVisor's kernel here refuses coreutils' statx.)
        const listed = await box.exec(
          'for p in src/obsolete.txt src/nested src/nested/deep.txt; do [ -e "$p" ] && echo "$p"; done; [ -e src/greeting.txt ]',
          { fast: true },
        );
        expect(listed.exitCode).toBe(0);
        expect(listed.stdout).toBe('');
        const paths = (await box.listFiles('src', { fast: true })).map((e) => e.path);
        expect(paths).toContain('src/greeting.txt');
        expect(paths.filter((p) => /obsolete|nested/.test(p))).toEqual([]);
        expect(await problem(box.readFile('src/nested/deep.txt', { fast: true }))).toBe('missing');
        // And the harness's own reads, which never use the channel, agree.
        expect(await problem(box.readFile('src/obsolete.txt'))).toBe('missing');
        expect((await box.changes()).changes).toEqual([]);
      }
    });

    describe('exportFiles', () => {
      it('returns regular files with their modes and refuses everything else by kind', async () => {
        const box = await make();
        await box.writeFiles([
          { path: 'fine.txt', content: 'ok\n' },
          { path: 'big.txt', content: 'x'.repeat(4096) },
          { path: 'tool.sh', content: '#!/bin/sh\n', mode: 0o755 },
        ]);
        await target.arrange(box, [
          { symlink: { target: '/etc/passwd', path: 'link' } },
          { hardlink: { existing: 'src/greeting.txt', path: 'hard' } },
          { fifo: 'pipe' },
        ]);
        const exported = await box.exportFiles(
          [
            'fine.txt',
            'tool.sh',
            'link',
            'hard',
            'src/greeting.txt',
            'pipe',
            'src',
            'big.txt',
            'gone.txt',
            '../x',
          ],
          { maxFileBytes: 1024 },
        );
        expect(exported.files.map((f) => [f.path, f.content.toString(), f.mode & 0o777]).sort()).toEqual([
          ['fine.txt', 'ok\n', 0o644],
          ['tool.sh', '#!/bin/sh\n', 0o755],
        ]);
        const kinds = Object.fromEntries(exported.refused.map((r) => [r.path, r.kind]));
        expect(kinds).toEqual({
          link: 'symlink',
          hard: 'hard-link',
          'src/greeting.txt': 'hard-link',
          pipe: target.fifoRefusedAs ?? 'special-file',
          src: 'directory',
          'big.txt': 'too-large',
          'gone.txt': 'missing',
          '../x': 'invalid-path',
        });
      });

      it('keeps to the total cap', async () => {
        const box = await make();
        await box.writeFiles(
          Array.from({ length: 4 }, (_, i) => ({ path: `t/f${i}.txt`, content: 'y'.repeat(1000) })),
        );
        const exported = await box.exportFiles(['t/f0.txt', 't/f1.txt', 't/f2.txt', 't/f3.txt'], {
          maxTotalBytes: 2500,
        });
        expect(exported.files).toHaveLength(2);
        expect(exported.refused.map((r) => r.kind)).toEqual(['over-total', 'over-total']);
      });
    });

    describe('freeze', () => {
      it('leaves a sandbox that still serves reads, listings and exports', async () => {
        const box = await make();
        await box.writeFiles([{ path: 'after.txt', content: 'kept\n' }]);
        await box.freeze();
        expect((await box.readFile('after.txt')).toString()).toBe('kept\n');
        expect((await box.changes()).changes.map((c) => c.path)).toEqual(['after.txt']);
        expect((await box.exportFiles(['after.txt'])).files).toHaveLength(1);
      });
    });
  });
}
