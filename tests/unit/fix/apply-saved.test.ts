/**
 * `sandbox-harness apply <run>`: a verified run's saved change goes to its repo later, with
 * the gate and the atomic apply of `fix`, refused when the repo changed since the run read it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { applySavedRun } from '../../../src/fix/apply.js';
import { exitCodeForRun } from '../../../src/cli/exit-codes.js';
import { appliedCell } from '../../../src/cli/commands/runs.js';
import { resolveRun } from '../../../src/runs/record.js';
import { SAVED_CHANGE_FILE, parseSavedChange } from '../../../src/changes/saved-change.js';
import { memoryRun, type MemoryRun } from '../../helpers/memory-run.js';
import { expectRecordIsFoldOfEvents } from '../../helpers/journal.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

/** A verified run made with --no-apply on a copy of the example. */
async function verifiedRun(): Promise<MemoryRun> {
  const run = await memoryRun();
  runs.push(run);
  expect(run.result.outcome).toBe('ready-for-review');
  expect(run.result.record.applied).toBe(false);
  return run;
}

describe('apply <run>', () => {
  it('writes the saved change to the repo, marks the record applied, and refuses a second time', async () => {
    const { repo, runsDir, env, catalog } = await verifiedRun();
    const target = join(repo, 'src', 'shipping.ts');
    expect(await readFile(target, 'utf8')).toContain('= 50;');
    const stored = await resolveRun(runsDir, 'last');
    expect(appliedCell(stored.record)).toBe('no');
    const result = await applySavedRun(stored, { env, catalogFile: catalog });
    expect(result.outcome).toBe('ready-for-review');
    expect(exitCodeForRun(result)).toBe(0);
    expect(result.written).toEqual(['src/shipping.ts']);
    expect(await readFile(target, 'utf8')).toContain('FREE_SHIPPING_THRESHOLD = 39;');
    const after = await resolveRun(runsDir, 'last');
    expect(after.record.applied).toBe(true);
    expect(after.record.appliedAt).toBeDefined();
    expect(appliedCell(after.record)).toBe('yes (apply)');
    // The later apply is on the run's journal too: run.json is still the fold of events.jsonl
    // (its fields; `apply` rewrites the record it read back, in the schema's order).
    await expectRecordIsFoldOfEvents(after.dir, 'fields');
    await expect(applySavedRun(after, { env, catalogFile: catalog })).rejects.toThrow(/already applied/);
  });

  it('refuses when a file it touches changed since the run read it: nothing written, not-applied, exit 4', async () => {
    const { repo, runsDir, env, catalog } = await verifiedRun();
    const target = join(repo, 'src', 'shipping.ts');
    await writeFile(target, '// edited by a person since\n');
    const result = await applySavedRun(await resolveRun(runsDir, 'last'), { env, catalogFile: catalog });
    expect(result.outcome).toBe('not-applied');
    expect(exitCodeForRun(result)).toBe(4);
    expect(result.problem).toMatch(/src\/shipping\.ts/);
    expect(await readFile(target, 'utf8')).toBe('// edited by a person since\n');
    const after = await resolveRun(runsDir, 'last');
    expect(after.record.applied).toBe(false);
    expect(after.record.applyError).toMatch(/src\/shipping\.ts/);
    expect(appliedCell(after.record)).toBe('no');
    await expectRecordIsFoldOfEvents(after.dir, 'fields');
  });

  it('checks the change against the catalog as it is now: a path it no longer allows is refused', async () => {
    const { root, repo, runsDir, env, catalog } = await verifiedRun();
    const catalogFile = join(root, 'shipping-service.yaml');
    const yaml = await readFile(catalogFile, 'utf8');
    await writeFile(catalogFile, yaml.replace('    - src/shipping.ts', '    - src/other.ts'));
    expect(await readFile(catalogFile, 'utf8')).toContain('src/other.ts');
    await expect(
      applySavedRun(await resolveRun(runsDir, 'last'), { env, catalogFile: catalog }),
    ).rejects.toThrow(/no longer allows src\/shipping\.ts/);
    expect(await readFile(join(repo, 'src', 'shipping.ts'), 'utf8')).toContain('= 50;');
  });

  it('refuses a saved change that was tampered with (content not matching its hash, a path out of the repo)', async () => {
    const { runsDir } = await verifiedRun();
    const stored = await resolveRun(runsDir, 'last');
    const text = await readFile(join(stored.dir, SAVED_CHANGE_FILE), 'utf8');
    const saved = JSON.parse(text) as { entries: Array<{ path: string; content: string }> };
    expect(saved.entries.map((e) => e.path)).toEqual(['src/shipping.ts']);
    const swapped = structuredClone(saved);
    swapped.entries[0]!.content = Buffer.from('evil').toString('base64');
    expect(parseSavedChange(JSON.stringify(swapped))).toEqual({
      problem: 'src/shipping.ts: content does not match its sha256',
    });
    const escaping = structuredClone(saved);
    escaping.entries[0]!.path = '../outside.ts';
    expect('problem' in parseSavedChange(JSON.stringify(escaping))).toBe(true);
  });

  it('refuses a run without a verified fix', async () => {
    const { runsDir, env } = await verifiedRun();
    const stored = await resolveRun(runsDir, 'last');
    await expect(
      applySavedRun({ ...stored, record: { ...stored.record, outcome: 'failed' } }, { env }),
    ).rejects.toThrow(/ended failed: it has no verified fix/);
  });
});
