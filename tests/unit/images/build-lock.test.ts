/**
 * The base-image build lock, raced by real processes: two processes never hold it at once,
 * and a lock whose owner died (its folder no longer kept fresh) is taken over.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withFileLock } from '../../../src/image-context/build-lock.js';
import { ROOT } from '../../helpers/cli.js';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A process that takes the lock, logs start and end around a pause, and releases it. */
function contender(dir: string, log: string, name: string): Promise<number | null> {
  const script = `
    import { appendFileSync } from 'node:fs';
    import { withFileLock } from ${JSON.stringify(join(ROOT, 'src/image-context/build-lock.ts'))};
    await withFileLock('base-test', () => undefined, async () => {
      appendFileSync(${JSON.stringify(log)}, 'start ${name}\\n');
      await new Promise((r) => setTimeout(r, 400));
      appendFileSync(${JSON.stringify(log)}, 'end ${name}\\n');
    }, { dir: ${JSON.stringify(dir)} });
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
}

describe('the base-image build lock', () => {
  it('two racing processes hold it one after the other, never together', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-lock-'));
    dirs.push(dir);
    const log = join(dir, 'log.txt');
    const codes = await Promise.all([
      contender(dir, log, 'a'),
      contender(dir, log, 'b'),
      contender(dir, log, 'c'),
    ]);
    expect(codes).toEqual([0, 0, 0]);
    const lines = (await readFile(log, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(6);
    // Every start is followed by the end of the same process.
    for (let i = 0; i < lines.length; i += 2) {
      expect(lines[i]!.replace('start', 'end')).toBe(lines[i + 1]);
    }
  }, 60_000);

  it('takes over a lock left behind by a process that died', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-lock-'));
    dirs.push(dir);
    // What a killed owner leaves: the lock folder, no longer kept fresh.
    await mkdir(join(dir, 'base-test.lock'));
    const old = new Date(Date.now() - 60_000);
    await utimes(join(dir, 'base-test.lock'), old, old);
    let ran = false;
    await withFileLock(
      'base-test',
      () => undefined,
      async () => {
        ran = true;
      },
      { dir, staleMs: 2_000 },
    );
    expect(ran).toBe(true);
  });
});
