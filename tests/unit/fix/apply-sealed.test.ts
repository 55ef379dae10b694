/**
 * What `apply <run>` writes is what verification tested: a verified run is sealed when its
 * tests pass (an HMAC with this user's key, kept outside the repo and the run folder), and
 * every edit of what the run saved is refused with nothing written: each sealed field of
 * run.json, the patch, the saved change (bytes with their hash recomputed, modes, paths, an
 * added file), the seal itself, a missing seal, another run's seal, another user's key. The
 * catalog that judges the change is the one named now, never the record's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { copyFile, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { applySavedRun } from '../../../src/fix/apply.js';
import { exitCodeForError } from '../../../src/cli/exit-codes.js';
import { resolveRun, type StoredRun } from '../../../src/runs/record.js';
import { sha256 } from '../../../src/changes/hash.js';
import {
  SAVED_CHANGE_FILE,
  parseSavedChange,
  serializeSavedChange,
} from '../../../src/changes/saved-change.js';
import { SEAL_FILE, SEALED_RECORD_FIELDS, sealKeyFile } from '../../../src/changes/verified-seal.js';
import { UsageError } from '../../../src/errors.js';
import { memoryRun, type MemoryRun } from '../../helpers/memory-run.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

async function verifiedRun(overrides: Parameters<typeof memoryRun>[0] = {}): Promise<MemoryRun> {
  const run = await memoryRun(overrides);
  runs.push(run);
  expect(run.result.outcome).toBe('ready-for-review');
  return run;
}

/** Every file of the repo (but the harness's own folder) and its bytes: nothing may change. */
async function snapshot(
  dir: string,
  base = dir,
  out = new Map<string, string>(),
): Promise<Map<string, string>> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.name === '.sandbox-harness' || entry.name === 'node_modules') continue;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) await snapshot(full, base, out);
    else out.set(full.slice(base.length + 1), sha256(await readFile(full)));
  }
  return out;
}

async function readJson(file: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
}

type Saved = {
  version: number;
  entries: Array<Record<string, unknown> & { path: string; content?: string }>;
};

async function editSaved(stored: StoredRun, edit: (saved: Saved) => void): Promise<void> {
  const file = join(stored.dir, SAVED_CHANGE_FILE);
  const saved = (await readJson(file)) as unknown as Saved;
  edit(saved);
  await writeFile(file, `${JSON.stringify(saved, null, 2)}\n`);
}

async function editRecord(stored: StoredRun, edit: (record: Record<string, unknown>) => void): Promise<void> {
  const file = join(stored.dir, 'run.json');
  const record = await readJson(file);
  edit(record);
  await writeFile(file, `${JSON.stringify(record, null, 2)}\n`);
}

/** A value of the same type that differs from `value`. */
function changed(value: unknown): unknown {
  if (typeof value === 'string') return `${value}x`;
  if (Array.isArray(value)) return [...value, changed(value[0] ?? 'x')];
  if (value && typeof value === 'object') {
    const [key, inner] = Object.entries(value)[0]!;
    return { ...value, [key]: changed(inner) };
  }
  return value;
}

/** Applies after `tamper`; expects a refusal naming `reason`, exit 2, and the repo untouched. */
async function expectRefused(
  run: MemoryRun,
  tamper: (stored: StoredRun) => Promise<void>,
  reason: RegExp,
): Promise<void> {
  const before = await snapshot(run.repo);
  await tamper(await resolveRun(run.runsDir, 'last'));
  const error = await applySavedRun(await resolveRun(run.runsDir, 'last'), {
    env: run.env,
    catalogFile: run.catalog,
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UsageError);
  expect((error as Error).message).toMatch(reason);
  expect((error as Error).message).toMatch(/nothing was written/);
  expect(exitCodeForError(error)).toBe(2);
  expect(await snapshot(run.repo)).toEqual(before);
  expect((await resolveRun(run.runsDir, 'last')).record.applied).not.toBe(true);
}

describe('apply <run> writes only what verification tested', () => {
  it('a sealed run applies as it was verified', async () => {
    const run = await verifiedRun();
    const stored = await resolveRun(run.runsDir, 'last');
    expect(await readJson(join(stored.dir, SEAL_FILE))).toMatchObject({
      version: 1,
      runId: stored.record.id,
    });
    const result = await applySavedRun(stored, { env: run.env, catalogFile: run.catalog });
    expect(result.written).toEqual(['src/shipping.ts']);
  });

  it.each(SEALED_RECORD_FIELDS.filter((f) => f !== 'id'))(
    'refuses a run.json whose %s was edited',
    async (field) => {
      const run = await verifiedRun();
      await expectRefused(
        run,
        (stored) =>
          editRecord(stored, (record) => {
            // A field the run did not have is added: that is an edit too.
            record[field] = record[field] === undefined ? ['test/added.test.ts'] : changed(record[field]);
          }),
        /run\.json was edited after verification/,
      );
    },
  );

  it("refuses a record whose catalog path names a permissive catalog planted beside it, even with the saved change's bytes and hash made to match (the attack of issue #31)", async () => {
    const run = await verifiedRun();
    await expectRefused(
      run,
      async (stored) => {
        const permissive = join(stored.dir, 'permissive.yaml');
        const yaml = await readFile(run.catalog, 'utf8');
        await writeFile(
          permissive,
          yaml.replace('repo: repo', `repo: ${run.repo}`).replace('    - src/shipping.ts', "    - '**'"),
        );
        await editRecord(stored, (record) => ((record.catalog as Record<string, unknown>).file = permissive));
        const evil = Buffer.from('export const pwned = true;\n');
        await editSaved(stored, (saved) => {
          saved.entries.push({
            path: 'test/pwned.test.ts',
            kind: 'added',
            mode: 0o755,
            sha256: sha256(evil),
            content: evil.toString('base64'),
            expectedSha256: null,
          });
        });
      },
      /run\.json was edited|saved change .* was edited/,
    );
  });

  it('refuses edited bytes of the saved change whose sha256 was recomputed to match', async () => {
    const run = await verifiedRun();
    await expectRefused(
      run,
      (stored) =>
        editSaved(stored, (saved) => {
          const content = Buffer.from('export const FREE_SHIPPING_THRESHOLD = 0;\n');
          saved.entries[0]!.content = content.toString('base64');
          saved.entries[0]!.sha256 = sha256(content);
        }),
      /the saved change \(verified-change\.json\) was edited after verification/,
    );
  });

  it.each([
    ['an executable mode', (e: Record<string, unknown>) => (e.mode = 0o755)],
    ['a set-id mode', (e: Record<string, unknown>) => (e.mode = 0o4755)],
    ['another path', (e: Record<string, unknown>) => (e.path = 'test/shipping.test.ts')],
    ['another expected host state', (e: Record<string, unknown>) => (e.expectedSha256 = null)],
    ['a deletion', (e: Record<string, unknown>) => (e.kind = 'deleted')],
  ])('refuses a saved change with %s', async (_what, edit) => {
    const run = await verifiedRun();
    await expectRefused(run, (stored) => editSaved(stored, (saved) => edit(saved.entries[0]!)), /was edited/);
  });

  it('refuses an edited patch', async () => {
    const run = await verifiedRun();
    await expectRefused(
      run,
      async (stored) => {
        const file = join(stored.dir, 'patch.diff');
        await writeFile(file, (await readFile(file, 'utf8')).replace('39', '0'));
      },
      /patch\.diff was edited after verification/,
    );
  });

  it('refuses an edited seal, a missing one, one that is not a seal, and a missing patch', async () => {
    const run = await verifiedRun();
    const stored = await resolveRun(run.runsDir, 'last');
    const sealFile = join(stored.dir, SEAL_FILE);
    const seal = await readFile(sealFile, 'utf8');
    const parsed = JSON.parse(seal) as Record<string, string>;
    // The seal rewritten to vouch for an edited change: its signature no longer matches.
    await expectRefused(
      run,
      async () => {
        await editSaved(stored, (saved) => (saved.entries[0]!.mode = 0o755));
        const text = await readFile(join(stored.dir, SAVED_CHANGE_FILE), 'utf8');
        await writeFile(sealFile, JSON.stringify({ ...parsed, change: sha256(Buffer.from(text)) }));
      },
      /was edited, or made with another user's key/,
    );
    await expectRefused(
      run,
      async () => writeFile(sealFile, JSON.stringify({ ...parsed, mac: '0'.repeat(64) })),
      /was edited, or made with another user's key/,
    );
    await expectRefused(run, () => rm(sealFile), /verified-change\.seal\.json is missing/);
    await expectRefused(run, () => writeFile(sealFile, 'not json'), /is not JSON/);
    await expectRefused(run, () => rm(join(stored.dir, 'patch.diff')), /patch\.diff is missing/);
  });

  it("refuses another run's seal, and a run sealed with another user's key (or none)", async () => {
    const a = await verifiedRun();
    const b = await verifiedRun();
    const storedA = await resolveRun(a.runsDir, 'last');
    const storedB = await resolveRun(b.runsDir, 'last');
    // Same key for both, so only the run id tells the seals apart.
    await copyFile(sealKeyFile(a.env), sealKeyFile(b.env));
    await expectRefused(
      a,
      () => copyFile(join(storedB.dir, SEAL_FILE), join(storedA.dir, SEAL_FILE)),
      /was edited, or made with another user's key|the seal of another run/,
    );
    // b's own seal was made with b's old key: the key it holds now is another.
    await expectRefused(b, async () => undefined, /made with another user's key/);
    await rm(sealKeyFile(b.env));
    await expectRefused(b, async () => undefined, /there is no sealing key/);
  });

  it('refuses a sealing key others could change', async () => {
    const run = await verifiedRun();
    const { chmod } = await import('node:fs/promises');
    await chmod(sealKeyFile(run.env), 0o666);
    await expectRefused(run, async () => undefined, /not a private file of this user's/);
  });
});

describe('apply <run> judges the change with the catalog named now', () => {
  it('uses --catalog, else the catalog found where it runs, never the path the record names', async () => {
    const run = await verifiedRun();
    const stored = await resolveRun(run.runsDir, 'last');
    // Nothing named, nothing to find: refused, and the record's catalog is only a suggestion.
    const elsewhere = join(run.root, 'elsewhere');
    await mkdir(elsewhere);
    const refused = applySavedRun(stored, { env: run.env, cwd: elsewhere });
    await expect(refused).rejects.toThrow(/which catalog should the change be checked against/);
    await expect(refused).rejects.toMatchObject({ hint: expect.stringContaining(run.catalog) });
    // Found where the command runs (the catalog's folder), as `fix` finds it.
    const applied = await applySavedRun(stored, { env: run.env, cwd: run.root });
    expect(applied.written).toEqual(['src/shipping.ts']);
  });

  it('refuses a path the named catalog does not allow', async () => {
    const run = await verifiedRun();
    const strict = join(run.root, 'strict.yaml');
    await writeFile(
      strict,
      (await readFile(run.catalog, 'utf8')).replace('    - src/shipping.ts', '    - src/other.ts'),
    );
    await expect(
      applySavedRun(await resolveRun(run.runsDir, 'last'), { env: run.env, catalogFile: strict }),
    ).rejects.toThrow(/no longer allows src\/shipping\.ts/);
  });
});

describe('fix applies through the same check', () => {
  it('a run whose change cannot be sealed is not applied (nothing written), and says why', async () => {
    const run = await memoryRun({ overrides: { apply: true } });
    runs.push(run);
    expect(run.result.outcome).toBe('ready-for-review');
    expect(run.result.record.applied).toBe(true);

    // A state folder whose key is unusable (a folder where the key file goes): no seal.
    const state = join(run.root, 'other-state');
    await mkdir(join(state, 'sandbox-harness', 'seal.key'), { recursive: true });
    const again = await memoryRun({
      overrides: { apply: true, env: { HOME: '/root', XDG_STATE_HOME: state } },
    });
    runs.push(again);
    expect(again.result.outcome).toBe('not-applied');
    expect(again.result.record.applyError).toMatch(/could not be sealed/);
    expect(await readFile(join(again.repo, 'src', 'shipping.ts'), 'utf8')).toContain('= 50;');
  });
});

describe('the saved change', () => {
  it('keeps deletions (apply refuses them, as fix does) and saves only the modes verification writes', () => {
    const text = serializeSavedChange(
      {
        entries: [
          {
            path: 'a.sh',
            kind: 'added',
            type: 'file',
            content: Buffer.from('#!/bin/sh\n'),
            mode: 0o4775,
            binary: false,
            modeChanged: false,
            allowed: true,
          },
          {
            path: 'old.txt',
            kind: 'deleted',
            type: 'file',
            binary: false,
            modeChanged: false,
            allowed: true,
          },
        ],
      },
      new Map([['old.txt', 'a'.repeat(64)]]),
    );
    const saved = parseSavedChange(text);
    expect('problem' in saved).toBe(false);
    if ('problem' in saved) return;
    expect(saved.changeSet.entries.map((e) => [e.path, e.kind, e.mode])).toEqual([
      ['a.sh', 'added', 0o755],
      ['old.txt', 'deleted', undefined],
    ]);
    const setuid = JSON.parse(text) as Saved;
    setuid.entries[0]!.mode = 0o4755;
    expect(parseSavedChange(JSON.stringify(setuid))).toEqual({
      problem: expect.stringMatching(/^entries\.0\.mode: expected mode 420 \(0644\) or 493 \(0755\)/),
    });
  });
});
