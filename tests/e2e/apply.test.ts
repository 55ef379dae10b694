/**
 * `sandbox-harness apply <run>` as a user runs it, on real Docker: a verified `fix
 * --no-apply` is written later; a repo changed since is refused with nothing written
 * (exit 4, not-applied); `runs` says which runs are applied.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
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
    // The record's catalog pointed at a permissive catalog planted beside it, and the saved
    // change made to carry a test file and other bytes (their hashes recomputed): refused,
    // exit 2, nothing written. Put back as the run left them, the change applies.
    const runDir = join(copy.repo, '.sandbox-harness', 'runs', runId);
    const kept = new Map<string, string>();
    for (const name of ['run.json', 'verified-change.json'])
      kept.set(name, await readFile(join(runDir, name), 'utf8'));
    const permissive = join(runDir, 'catalog.yaml');
    await writeFile(
      permissive,
      (await readFile(copy.catalog, 'utf8'))
        .replace(/^repo: .*$/m, `repo: ${copy.repo}`)
        .replace('    - src/shipping.ts', "    - '**'"),
    );
    const record = JSON.parse(kept.get('run.json')!) as { catalog: { file: string } };
    record.catalog.file = permissive;
    await writeFile(join(runDir, 'run.json'), JSON.stringify(record, null, 2));
    const saved = JSON.parse(kept.get('verified-change.json')!) as {
      entries: Record<string, unknown>[];
    };
    const evil = Buffer.from('export const FREE_SHIPPING_THRESHOLD = 0;\n');
    saved.entries[0]!.content = evil.toString('base64');
    saved.entries[0]!.sha256 = createHash('sha256').update(evil).digest('hex');
    saved.entries.push({
      path: 'test/planted.test.ts',
      kind: 'added',
      mode: 0o755,
      sha256: saved.entries[0]!.sha256,
      content: evil.toString('base64'),
      expectedSha256: null,
    });
    await writeFile(join(runDir, 'verified-change.json'), JSON.stringify(saved, null, 2));
    const tampered = await runCli(['apply', runId], { cwd: copy.root });
    expect(tampered.code, tampered.stdout + tampered.stderr).toBe(2);
    expect(tampered.stderr).toMatch(
      /was edited after verification.*; refusing to apply it, nothing was written/,
    );
    expect(await readFile(target, 'utf8')).toBe(pristine);
    expect(await readdir(join(copy.repo, 'test'))).not.toContain('planted.test.ts');
    for (const [name, text] of kept) await writeFile(join(runDir, name), text);

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
