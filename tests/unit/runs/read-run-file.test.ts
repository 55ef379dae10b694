/** A run folder's files are data: read without following a link anywhere, and bounded. */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readRunFile, type RunRecord } from '../../../src/runs/record.js';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function runDir() {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-runfile-'));
  dirs.push(dir);
  await mkdir(join(dir, 'attempts', '1'), { recursive: true });
  return { dir, record: {} as RunRecord };
}

describe('readRunFile', () => {
  it('reads a regular file, and refuses one over the limit by name instead of loading it', async () => {
    const run = await runDir();
    await writeFile(join(run.dir, 'attempts', '1', 'patch.diff'), 'x'.repeat(100));
    expect(await readRunFile(run, 'attempts/1/patch.diff')).toHaveLength(100);
    await expect(readRunFile(run, 'attempts/1/patch.diff', 99)).rejects.toThrow(
      /attempts\/1\/patch.diff is over the 99-byte limit/,
    );
  });

  it('follows no link: not the file, not a folder on the way', async () => {
    const run = await runDir();
    const outside = await mkdtemp(join(tmpdir(), 'sandbox-harness-outside-'));
    dirs.push(outside);
    await writeFile(join(outside, 'secret'), 'host secret');
    await symlink(join(outside, 'secret'), join(run.dir, 'transcript.json'));
    await symlink(outside, join(run.dir, 'attempts', '2'));
    expect(await readRunFile(run, 'transcript.json')).toBeUndefined();
    expect(await readRunFile(run, 'attempts/2/secret')).toBeUndefined();
  });
});
