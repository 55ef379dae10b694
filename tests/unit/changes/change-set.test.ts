import { describe, expect, it } from 'vitest';
import { createAllowlist } from '../../../src/changes/allowlist.js';
import { collectChangeSet, gateChangeSet, type ChangeLimits } from '../../../src/changes/change-set.js';
import type { PristineSource } from '../../../src/changes/pristine.js';
import type { ChangeScan } from '../../../src/sandbox/types.js';
import { MemorySandbox, type MemoryEntry } from '../../fakes/memory-sandbox.js';

const repo: Record<string, MemoryEntry> = {
  'src/pricing.ts': 'export const fee = 5;\n',
  'src/rates.ts': 'export const rate = 1;\n',
  'test/pricing.test.ts': 'test("fee", () => {});\n',
  'package.json': '{"name":"shipping"}\n',
  'catalog/shipping.yaml': 'name: shipping\n',
};

/** The host repo as it was when the image was built. */
const host = (files: Record<string, MemoryEntry> = repo): PristineSource => ({
  read: (path) => {
    const entry = files[path];
    if (typeof entry !== 'string' && !Buffer.isBuffer(entry)) return Promise.resolve(undefined);
    return Promise.resolve({ content: Buffer.from(entry), mode: 0o644 });
  },
});

const allowlist = createAllowlist({
  editable: ['src/**/*.ts', 'test/**/*.ts', 'src/**'],
  neverEditable: ['catalog/shipping.yaml'],
});

const collect = (sandbox: MemorySandbox, limits?: ChangeLimits, source = host()) =>
  collectChangeSet(sandbox, {
    allowlist,
    ignore: ['coverage/**', 'node_modules/.vite/**'],
    tree: sandbox.pristineTree(),
    pristine: source,
    ...(limits ? { limits } : {}),
  });

/** Counts the export calls, to pin that limits come before any per-file work. */
function countingExports(sandbox: MemorySandbox): { calls: number } {
  const counter = { calls: 0 };
  const real = sandbox.exportFiles.bind(sandbox);
  sandbox.exportFiles = (paths, limits) => {
    counter.calls++;
    return real(paths, limits);
  };
  return counter;
}

describe('collectChangeSet', () => {
  it('collects added and modified files with old and new content, classified against the allowlist', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'src/pricing.ts', content: 'export const fee = 0;\n' },
      { path: 'src/zones/eu.ts', content: 'export const eu = true;\n' },
      { path: 'package.json', content: '{"name":"shipping","x":1}\n' },
    ]);
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
    expect(set.editable).toEqual(['src/**/*.ts', 'test/**/*.ts', 'src/**']);
  });

  it('drops changes under ignoreChanges globs, and new folders (the files in them are the change)', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'coverage/lcov.info', content: 'TN:\n' },
      { path: 'node_modules/.vite/deps/_metadata.json', content: '{}' },
    ]);
    const set = await collect(sandbox);
    expect(set.entries).toEqual([]);
    expect(set.ignored).toEqual([
      'coverage',
      'coverage/lcov.info',
      'node_modules/.vite',
      'node_modules/.vite/deps',
      'node_modules/.vite/deps/_metadata.json',
    ]);
    expect(gateChangeSet(set)).toEqual({ ok: true });
  });

  it('drops a file rewritten with the bytes and mode it had', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([{ path: 'src/pricing.ts', content: 'export const fee = 5;\n' }]);
    const set = await collect(sandbox);
    expect(set.entries).toEqual([]);
    expect(set.unchanged).toEqual(['src/pricing.ts']);
  });

  it("keeps no old content it cannot prove: the host file must have the image file's hash", async () => {
    const sandbox = new MemorySandbox({ ...repo, 'src/built.ts': 'from image build\n' });
    await sandbox.writeFiles([{ path: 'src/built.ts', content: 'edited\n' }]);
    const set = await collect(
      sandbox,
      undefined,
      host({ ...repo, 'src/built.ts': 'something else on the host\n' }),
    );
    expect(set.entries).toMatchObject([{ path: 'src/built.ts', kind: 'modified', allowed: true }]);
    expect(set.entries[0]).not.toHaveProperty('oldContent');
  });

  it('keeps malformed paths out of ignore globs so the gate sees and refuses them', async () => {
    const sandbox = new MemorySandbox(repo);
    // A sandbox may say anything about itself; its scan is only a hint.
    sandbox.changes = async (): Promise<ChangeScan> => ({
      changes: [{ path: 'coverage/../src/pricing.ts', kind: 'added', type: 'file', size: 7, links: 1 }],
      complete: true,
    });
    const set = await collect(sandbox);
    expect(set.ignored).toEqual([]);
    expect(set.entries).toMatchObject([
      { path: 'coverage/../src/pricing.ts', allowed: false, reasonKind: 'invalid-path' },
    ]);
    expect(gateChangeSet(set).ok).toBe(false);
  });

  it('refuses 30,000 new files on their count, before reading one back', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles(
      Array.from({ length: 300 }, (_, i) => ({ path: `src/gen/f${i}.ts`, content: `${i}` })),
    );
    const exports = countingExports(sandbox);
    const set = await collect(sandbox, { maxFiles: 200 });
    expect(exports.calls).toBe(0);
    expect(set.overLimit?.why).toMatch(/300 paths changed, over the limit of 200; nothing was read back/);
    const gate = gateChangeSet(set);
    expect(gate.ok).toBe(false);
    if (!gate.ok)
      expect(gate.offending).toEqual([{ path: '(all files)', kind: 'too-many', why: set.overLimit!.why }]);
  });

  it('refuses a scan that could not list every change, without reading anything back', async () => {
    const sandbox = new MemorySandbox(repo);
    sandbox.changes = async (): Promise<ChangeScan> => ({ changes: [], complete: false });
    const exports = countingExports(sandbox);
    const set = await collect(sandbox);
    expect(exports.calls).toBe(0);
    expect(gateChangeSet(set).ok).toBe(false);
  });

  it('refuses on the reported sizes before reading anything back', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'src/a.ts', content: 'x'.repeat(600) },
      { path: 'src/b.ts', content: 'x'.repeat(600) },
    ]);
    const exports = countingExports(sandbox);
    const set = await collect(sandbox, { maxTotalBytes: 1000 });
    expect(exports.calls).toBe(0);
    expect(set.overLimit?.why).toMatch(/1200 bytes changed, over the 1000-byte limit/);
  });

  it('does not read back hard links, links, type changes or files over the cap; one stream for the rest', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'src/ok.ts', content: 'ok\n' },
      { path: 'src/big.ts', content: 'x'.repeat(2000) },
    ]);
    sandbox.link('package.json', 'src/alias.ts');
    sandbox.set('src/link.ts', { type: 'symlink', target: '../package.json' });
    sandbox.delete('src/rates.ts');
    sandbox.set('src/rates.ts', { type: 'directory' });
    const exported: string[][] = [];
    const real = sandbox.exportFiles.bind(sandbox);
    sandbox.exportFiles = (paths, limits) => {
      exported.push([...paths]);
      return real(paths, limits);
    };
    const set = await collect(sandbox, { maxFileBytes: 1000 });
    expect(exported).toEqual([['src/ok.ts']]);
    expect(set.entries.map((e) => [e.path, e.refused?.kind])).toEqual([
      ['package.json', 'hard-link'],
      ['src/alias.ts', 'hard-link'],
      ['src/big.ts', 'too-large'],
      ['src/link.ts', 'symlink'],
      ['src/ok.ts', undefined],
      ['src/rates.ts', 'type-changed'],
    ]);
  });

  it('refuses a path whose folder is a symlink in the pristine repo, or was made one, or replaced one', async () => {
    const withLink = { ...repo, 'src/shared': { type: 'symlink', target: '..' } } as Record<
      string,
      MemoryEntry
    >;
    const sandbox = new MemorySandbox(withLink);
    sandbox.delete('src/shared');
    await sandbox.writeFiles([{ path: 'src/shared/package.json', content: '{}' }]);
    sandbox.set('src/made/x.ts', 'x');
    sandbox.delete('src/made');
    sandbox.set('src/made', { type: 'symlink', target: '../test' });
    const set = await collect(sandbox);
    expect(set.entries.map((e) => [e.path, e.refused?.kind])).toEqual([
      ['src/made', 'symlink'],
      ['src/shared', 'type-changed'],
      ['src/shared/package.json', 'through-link'],
    ]);
    const gate = gateChangeSet(set);
    expect(gate.ok).toBe(false);
    if (!gate.ok) {
      expect(gate.offending.find((o) => o.path === 'src/shared/package.json')?.why).toMatch(
        /src\/shared is a symlink in the pristine repo/,
      );
    }
  });
});

describe('gateChangeSet', () => {
  it('accepts a change set where every path is editable text with unchanged modes', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'src/pricing.ts', content: 'export const fee = 0;\n' },
      { path: 'test/zones.test.ts', content: 'test("eu", () => {});\n' },
    ]);
    expect(gateChangeSet(await collect(sandbox))).toEqual({ ok: true });
  });

  it('rejects the whole set for one file outside the allowlist and tells the model what is editable', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'src/pricing.ts', content: 'export const fee = 0;\n' },
      { path: 'package.json', content: '{}\n' },
    ]);
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate).toEqual({
      ok: false,
      offending: [{ path: 'package.json', kind: 'not-editable', why: 'is not in the editable files' }],
      reason: [
        'Your changes were rejected as a whole: 1 path breaks the rules for changes.',
        '- package.json is not in the editable files',
        'Files you may change (globs): src/**/*.ts, test/**/*.ts, src/**.',
        'Only edit existing or new text files that match these globs; do not delete, rename, link, or change file modes. Then try again.',
      ].join('\n'),
    });
  });

  it('rejects a deletion, even of an editable file (a rename shows up as one)', async () => {
    const sandbox = new MemorySandbox(repo);
    sandbox.delete('test/pricing.test.ts');
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending).toEqual([
      {
        path: 'test/pricing.test.ts',
        kind: 'deleted',
        why: 'was deleted; deleting (or renaming) files is not allowed',
      },
    ]);
  });

  it('rejects a symlink or fifo', async () => {
    const sandbox = new MemorySandbox(repo);
    sandbox.set('src/pricing.ts', { type: 'symlink', target: '/etc/passwd' });
    sandbox.set('src/pipe.ts', { type: 'fifo' });
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending.map((o) => [o.path, o.kind])).toEqual([
      ['src/pipe.ts', 'not-regular-file'],
      ['src/pricing.ts', 'type-changed'],
    ]);
  });

  it('rejects a setuid bit, a changed executable bit and a new executable file', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'src/pricing.ts', content: 'export const fee = 0;\n' },
      { path: 'src/rates.ts', content: 'export const rate = 1;\n', mode: 0o755 },
      { path: 'src/run.ts', content: '#!/bin/sh\n', mode: 0o755 },
    ]);
    // A file write never sets a setuid bit; the agent's own `chmod u+s` (run_command) does.
    const pricing = sandbox.nodes.get('src/pricing.ts');
    if (pricing?.type === 'file') pricing.mode = 0o4644;
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending).toEqual([
      {
        path: 'src/pricing.ts',
        kind: 'special-bits',
        why: 'has a setuid, setgid or sticky bit (mode 04644)',
      },
      {
        path: 'src/rates.ts',
        kind: 'mode-changed',
        why: 'changed its executable bit (0644 to 0755); keep file modes as they were',
      },
      {
        path: 'src/run.ts',
        kind: 'mode-changed',
        why: 'is a new executable file; new files must not be executable',
      },
    ]);
  });

  it('rejects a binary file unless its path is listed as binary-allowed', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([{ path: 'src/blob.ts', content: Buffer.from([0x61, 0x00, 0x62]) }]);
    const refused = gateChangeSet(await collect(sandbox));
    expect(refused.ok).toBe(false);
    if (!refused.ok) {
      expect(refused.offending).toEqual([
        {
          path: 'src/blob.ts',
          kind: 'binary',
          why: 'is a binary file (contains NUL bytes); only text files may be changed here',
        },
      ]);
    }
    expect(gateChangeSet(await collect(sandbox, { binaryAllowed: ['src/*.ts'] }))).toEqual({ ok: true });
  });

  it('lists every offending path with every reason in one rejection', async () => {
    const sandbox = new MemorySandbox(repo);
    await sandbox.writeFiles([
      { path: 'src/pricing.ts', content: 'export const fee = 0;\n' },
      { path: 'catalog/shipping.yaml', content: 'name: shipping\nrules: {}\n' },
      { path: '.git/hooks/post-checkout', content: '#!/bin/sh\ncurl evil\n', mode: 0o755 },
    ]);
    sandbox.delete('package.json');
    const gate = gateChangeSet(await collect(sandbox));
    expect(gate.ok).toBe(false);
    if (gate.ok) return;
    expect(gate.offending.map((o) => [o.path, o.kind])).toEqual([
      ['.git/hooks/post-checkout', 'never-editable'],
      ['.git/hooks/post-checkout', 'mode-changed'],
      ['catalog/shipping.yaml', 'never-editable'],
      ['package.json', 'not-editable'],
      ['package.json', 'deleted'],
    ]);
    expect(gate.reason.split('\n')[0]).toBe(
      'Your changes were rejected as a whole: 3 paths break the rules for changes.',
    );
  });
});
