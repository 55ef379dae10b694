/**
 * `sandbox-harness apply <run>` as a user runs it, on real Docker: a verified `fix
 * --no-apply` is written later; a repo changed since is refused with nothing written
 * (exit 4, not-applied); `runs` says which runs are applied.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { prepareExampleCopy, type ExampleCopy } from '../../src/demo.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { runCli } from '../helpers/cli.js';

let copy: ExampleCopy;
const runIds: string[] = [];

beforeAll(async () => {
  await dockerEngine().ping(5000);
  await ensureBaseImage('node', {});
  copy = await prepareExampleCopy();
}, 900_000);

afterAll(async () => {
  for (const id of runIds) {
    for (const c of await dockerEngine().containers.list({ [LABEL.run]: id }))
      await dockerEngine().containers.remove(c.id);
  }
  if (copy) await rm(dirname(copy.root), { recursive: true, force: true });
});

describe('sandbox-harness apply', () => {
  it('refuses while the repo differs from what the run saw, then writes the saved fix; runs shows it', async () => {
    const fix = await runCli(
      [
        'fix',
        'OPS-412',
        '--catalog',
        copy.catalog,
        '--cassette',
        join(copy.cassettes, 'OPS-412.json'),
        '--no-apply',
        '--json',
      ],
      { cwd: copy.root },
    );
    expect(fix.code, fix.stderr).toBe(0);
    const { runId, outcome, applied } = JSON.parse(fix.stdout) as {
      runId: string;
      outcome: string;
      applied: boolean;
    };
    runIds.push(runId);
    expect([outcome, applied]).toEqual(['ready-for-review', false]);

    const where = ['--catalog', copy.catalog];
    const before = await runCli(['runs', ...where], { cwd: copy.root });
    expect(before.stdout).toMatch(/applied/);
    expect(before.stdout).toMatch(new RegExp(`${runId}.*ready-for-review.*\\bno\\s*$`, 'm'));

    const target = join(copy.repo, 'src', 'shipping.ts');
    const pristine = await readFile(target, 'utf8');
    await writeFile(target, `${pristine}// a person's edit since the run\n`);
    const refused = await runCli(['apply', runId, ...where], { cwd: copy.root });
    expect(refused.code, refused.stdout + refused.stderr).toBe(4);
    expect(refused.stdout).toMatch(/not applied: .*src\/shipping\.ts/);
    expect(await readFile(target, 'utf8')).toBe(`${pristine}// a person's edit since the run\n`);

    await writeFile(target, pristine);
    const applied2 = await runCli(['apply', 'last', ...where, '--json'], { cwd: copy.root });
    expect(applied2.code, applied2.stderr).toBe(0);
    expect(JSON.parse(applied2.stdout)).toMatchObject({
      outcome: 'ready-for-review',
      written: ['src/shipping.ts'],
    });
    expect(await readFile(target, 'utf8')).toContain('FREE_SHIPPING_THRESHOLD = 39');

    const after = await runCli(['runs', ...where], { cwd: copy.root });
    expect(after.stdout).toMatch(new RegExp(`${runId}.*yes \\(apply\\)`));
    const again = await runCli(['apply', runId, ...where], { cwd: copy.root });
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already applied/);
  }, 600_000);
});
