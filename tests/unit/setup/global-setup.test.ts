/**
 * The global set-up compiles `dist/` before the end-to-end tests use it. A compile error
 * must stop the run, not leave the tests running against the last good build.
 */
import { mkdir, mkdtemp, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../../global-setup.js';

// No DOM types and no @types/* from folders above the temporary one: each compile reads a few
// thousand lines instead of 50,000 (a third of the time), and the test is about when it runs.
const TSCONFIG = JSON.stringify({
  compilerOptions: {
    target: 'ES2022',
    lib: ['ES2022'],
    types: [],
    module: 'NodeNext',
    strict: true,
    rootDir: 'src',
    outDir: 'dist',
  },
  include: ['src'],
});

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

async function project(main: string): Promise<string> {
  dir = await mkdtemp(join(tmpdir(), 'global-setup-'));
  await mkdir(join(dir, 'src'));
  await writeFile(join(dir, 'tsconfig.build.json'), TSCONFIG);
  await writeFile(join(dir, 'src', 'main.ts'), main);
  return dir;
}

describe('global set-up', () => {
  it('fails the run with the compiler messages when the build fails', async () => {
    const root = await project("export const port: number = 'eighty';\n");
    expect(() => ensureBuilt(root)).toThrow(
      /tsc -p tsconfig\.build\.json` failed[\s\S]*main\.ts[\s\S]*TS2322/,
    );
    // Nothing emitted, so the next run does not mistake a broken build for a current one.
    await expect(stat(join(root, 'dist', 'main.js'))).rejects.toThrow();
    expect(() => ensureBuilt(root)).toThrow(/TS2322/);
  });

  it('builds a stale dist/ and leaves a current one alone', async () => {
    const root = await project('export const port: number = 80;\n');
    ensureBuilt(root);
    const first = await stat(join(root, 'dist', 'main.js'));
    // A source older than the build: nothing to do, even if it would not compile.
    await writeFile(join(root, 'src', 'main.ts'), "export const port: number = 'eighty';\n");
    const past = new Date(first.mtimeMs - 60_000);
    await utimes(join(root, 'src', 'main.ts'), past, past);
    await utimes(join(root, 'src'), past, past);
    expect(() => ensureBuilt(root)).not.toThrow();
    expect((await stat(join(root, 'dist', 'main.js'))).mtimeMs).toBe(first.mtimeMs);
  });
});
