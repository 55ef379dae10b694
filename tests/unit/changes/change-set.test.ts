import { describe, expect, it } from 'vitest';
import { createAllowlist } from '../../../src/changes/allowlist.js';
import {
  collectChangeSet,
  gateChangeSet,
  type ChangeLimits,
  type PristineSource,
} from '../../../src/changes/change-set.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';

const repo: Record<string, string> = {
  'src/pricing.ts': 'export const fee = 5;\n',
  'src/rates.ts': 'export const rate = 1;\n',
  'test/pricing.test.ts': 'test("fee", () => {});\n',
  'package.json': '{"name":"shipping"}\n',
  'catalog/shipping.yaml': 'name: shipping\n',
};

const pristine = (
  files: Record<string, string> = repo,
  modes: Record<string, number> = {},
): PristineSource => ({
  read: (path) =>
    Promise.resolve(
      files[path] === undefined
        ? undefined
        : { content: Buffer.from(files[path]), mode: modes[path] ?? 0o644 },
    ),
});

const allowlist = createAllowlist({
  editable: ['src/**/*.ts', 'test/**/*.ts'],
  neverEditable: ['catalog/shipping.yaml'],
});

const collect = (sandbox: MemorySandbox, limits?: ChangeLimits, source = pristine()) =>
  collectChangeSet(sandbox, {
    allowlist,
    ignore: ['coverage/**', 'node_modules/.vite/**'],
    pristine: source,
    ...(limits ? { limits } : {}),
  });

describe('collectChangeSet', () => {
  it('collects added and modified files with old and new content, classified against the allowlist', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('src/pricing.ts', 'export const fee = 0;\n');
    await sandbox.writeFile('src/zones/eu.ts', 'export const eu = true;\n');
    await sandbox.writeFile('package.json', '{"name":"shipping","x":1}\n');

    const set = await collect(sandbox);
    expect(set.entries.map((e) => [e.path, e.kind, e.allowed, e.reason])).toEqual([
      ['package.json', 'modified', false, 'is not in the editable files'],
      ['src/pricing.ts', 'modified', true, undefined],
      ['src/zones/eu.ts', 'added', true, undefined],
    ]);
    const pricing = set.entries.find((e) => e.path === 'src/pricing.ts');
    expect(pricing?.content?.toString()).toBe('export const fee = 0;\n');
    expect(pricing?.oldContent?.toString()).toBe('export const fee = 5;\n');
    expect(pricing).toMatchObject({ mode: 0o644, oldMode: 0o644, binary: false, modeChanged: false });
    expect(set.editable).toEqual(['src/**/*.ts', 'test/**/*.ts']);
  });

  it('drops changes under ignoreChanges globs', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('coverage/lcov.info', 'TN:\n');
    await sandbox.writeFile('node_modules/.vite/deps/_metadata.json', '{}');
    const set = await collect(sandbox);
    expect(set.entries).toEqual([]);
    expect(set.ignored).toEqual(['coverage/lcov.info', 'node_modules/.vite/deps/_metadata.json']);
    expect(gateChangeSet(set)).toEqual({ ok: true });
  });

  it('drops a "modified" file whose content and mode equal the pristine source', async () => {
    // The image build rewrote the file; the agent put it back the way the host has it.
    const sandbox = new MemorySandbox({ ...repo, 'src/generated.ts': 'built in image\n' });
    await sandbox.writeFile('src/generated.ts', 'as on host\n');
    const set = await collect(sandbox, undefined, pristine({ ...repo, 'src/generated.ts': 'as on host\n' }));
    expect(set.entries).toEqual([]);
    expect(set.unchanged).toEqual(['src/generated.ts']);
  });

  it('calls a file "added" when the daemon says modified but the pristine source does not have it', async () => {
    const sandbox = new MemorySandbox({ ...repo, 'src/built.ts': 'from image build\n' });
    await sandbox.writeFile('src/built.ts', 'edited\n');
    const set = await collect(sandbox);
    expect(set.entries).toMatchObject([{ path: 'src/built.ts', kind: 'added', allowed: true }]);
    expect(set.entries[0]).not.toHaveProperty('oldContent');
  });

  it('keeps malformed paths out of ignore globs so the gate sees and refuses them', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('coverage/../src/pricing.ts', 'sneaky\n');
    const set = await collect(sandbox);
    expect(set.ignored).toEqual([]);
    expect(set.entries).toMatchObject([{ path: 'coverage/../src/pricing.ts', allowed: false }]);
  });
});

describe('gateChangeSet', () => {
  it('accepts a change set where every path is editable text with unchanged modes', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('src/pricing.ts', 'export const fee = 0;\n');
    await sandbox.writeFile('test/zones.test.ts', 'test("eu", () => {});\n');
    expect(gateChangeSet(await collect(sandbox))).toEqual({ ok: true });
  });

  it('rejects the whole set for one file outside the allowlist and tells the model what is editable', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('src/pricing.ts', 'export const fee = 0;\n');
    await sandbox.writeFile('package.json', '{}\n');
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate).toEqual({
      ok: false,
      offending: [{ path: 'package.json', why: 'is not in the editable files' }],
      reason: [
        'Your changes were rejected as a whole: 1 path breaks the rules for changes.',
        '- package.json is not in the editable files',
        'Files you may change (globs): src/**/*.ts, test/**/*.ts.',
        'Only edit existing or new text files that match these globs; do not delete, rename, or change file modes. Then try again.',
      ].join('\n'),
    });
  });

  it('rejects a deletion, even of an editable file (a rename shows up as one)', async () => {
    const sandbox = new MemorySandbox(repo);
    sandbox.files.delete('test/pricing.test.ts');
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending).toEqual([
      { path: 'test/pricing.test.ts', why: 'was deleted; deleting (or renaming) files is not allowed' },
    ]);
  });

  it('rejects a symlink or fifo that the export refused', async () => {
    const sandbox = new MemorySandbox(repo);
    sandbox.files.set('src/pricing.ts', {
      content: Buffer.from('/etc/passwd'),
      mode: 0o777,
      kind: 'symlink',
    });
    sandbox.files.set('src/pipe.ts', { content: Buffer.alloc(0), mode: 0o644, kind: 'fifo' });
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending.map((o) => o.path)).toEqual(['src/pipe.ts', 'src/pricing.ts']);
    expect(gate.offending[1]?.why).toBe(
      'is not a regular file (a symlink is not a regular file); symlinks, hard links, fifos and devices are refused',
    );
  });

  it('rejects a setuid bit, a changed executable bit and a new executable file', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('src/pricing.ts', 'export const fee = 0;\n', { mode: 0o4644 });
    await sandbox.writeFile('src/rates.ts', 'export const rate = 1;\n', { mode: 0o755 });
    await sandbox.writeFile('src/run.ts', '#!/bin/sh\n', { mode: 0o755 });
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending).toEqual([
      { path: 'src/pricing.ts', why: 'has a setuid, setgid or sticky bit (mode 04644)' },
      {
        path: 'src/rates.ts',
        why: 'changed its executable bit (0644 to 0755); keep file modes as they were',
      },
      { path: 'src/run.ts', why: 'is a new executable file; new files must not be executable' },
    ]);
  });

  it('rejects a binary file unless its path is listed as binary-allowed', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('src/blob.ts', Buffer.from([0x61, 0x00, 0x62]));
    const refused = gateChangeSet(await collect(sandbox));
    expect(refused.ok).toBe(false);
    if (!refused.ok) {
      expect(refused.offending).toEqual([
        {
          path: 'src/blob.ts',
          why: 'is a binary file (contains NUL bytes); only text files may be changed here',
        },
      ]);
    }
    expect(gateChangeSet(await collect(sandbox, { binaryAllowed: ['src/*.ts'] }))).toEqual({ ok: true });
  });

  it('rejects a file over the size cap', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('src/big.ts', 'x'.repeat(2000));
    const gate = gateChangeSet(await collect(sandbox, { maxFileBytes: 1000 }));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending).toEqual([
      {
        path: 'src/big.ts',
        why: 'is too large (over the 1000-byte file cap)',
      },
    ]);
  });

  it('lists every offending path with every reason in one rejection', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFile('src/pricing.ts', 'export const fee = 0;\n');
    await sandbox.writeFile('catalog/shipping.yaml', 'name: shipping\nrules: {}\n');
    await sandbox.writeFile('.git/hooks/post-checkout', '#!/bin/sh\ncurl evil\n', { mode: 0o755 });
    sandbox.files.delete('package.json');
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending).toEqual([
      { path: '.git/hooks/post-checkout', why: 'is inside .git, which is never editable' },
      { path: '.git/hooks/post-checkout', why: 'is a new executable file; new files must not be executable' },
      {
        path: 'catalog/shipping.yaml',
        why: 'is never editable (the service catalog and its rules are read-only)',
      },
      { path: 'package.json', why: 'is not in the editable files' },
      { path: 'package.json', why: 'was deleted; deleting (or renaming) files is not allowed' },
    ]);
    expect(gate.reason.split('\n')[0]).toBe(
      'Your changes were rejected as a whole: 3 paths break the rules for changes.',
    );
  });
});
