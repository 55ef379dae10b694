import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAllowlist } from '../../../src/changes/allowlist.js';
import { collectChangeSet, type ChangeEntry } from '../../../src/changes/change-set.js';
import type { PristineSource } from '../../../src/changes/pristine.js';
import { changeSetPatch } from '../../../src/changes/patch.js';
import { MemorySandbox } from '../../fakes/memory-sandbox.js';

const pristineFiles: Record<string, string> = {
  'src/pricing.ts': Array.from({ length: 20 }, (_, i) => `export const line${i} = ${i};`).join('\n') + '\n',
  'src/no-newline.ts': 'export const a = 1;',
  'src/name with spaces.ts': 'export const s = "x";\n',
  'README.md': '# Shipping\n',
};

const pristine: PristineSource = {
  read: (p) =>
    Promise.resolve(
      pristineFiles[p] === undefined ? undefined : { content: Buffer.from(pristineFiles[p]), mode: 0o644 },
    ),
};

let repo: string;

beforeEach(async () => {
  repo = await mkdtemp(path.join(tmpdir(), 'patch-'));
  execFileSync('git', ['init', '-q'], { cwd: repo });
  for (const [file, content] of Object.entries(pristineFiles)) {
    await mkdir(path.dirname(path.join(repo, file)), { recursive: true });
    await writeFile(path.join(repo, file), content);
  }
});

afterEach(async () => {
  await rm(repo, { recursive: true, force: true });
});

async function gitApply(patch: string): Promise<void> {
  await writeFile(path.join(repo, '..', `${path.basename(repo)}.patch`), patch);
  const file = path.join(repo, '..', `${path.basename(repo)}.patch`);
  try {
    execFileSync('git', ['apply', '--check', file], { cwd: repo, stdio: 'pipe' });
    execFileSync('git', ['apply', file], { cwd: repo, stdio: 'pipe' });
  } finally {
    await rm(file, { force: true });
  }
}

describe('changeSetPatch', () => {
  it('produces a git-style patch that git apply accepts and that reproduces the sandbox files', async () => {
    const sandbox = new MemorySandbox(pristineFiles);
    const edited = (pristineFiles['src/pricing.ts'] ?? '')
      .replace('line3 = 3', 'line3 = 33')
      .replace('line17 = 17', 'line17 = 0');
    await sandbox.writeFiles([{ path: 'src/pricing.ts', content: edited }]);
    await sandbox.writeFiles([{ path: 'src/no-newline.ts', content: 'export const a = 2;' }]);
    await sandbox.writeFiles([{ path: 'src/name with spaces.ts', content: 'export const s = "y";\n' }]);
    await sandbox.writeFiles([{ path: 'src/zones/eu/rates.ts', content: 'export const eu = 1;\n' }]);
    await sandbox.writeFiles([{ path: 'src/empty.ts', content: '' }]);
    const set = await collectChangeSet(sandbox, {
      allowlist: createAllowlist({ editable: ['src/**'] }),
      ignore: [],
      tree: sandbox.pristineTree(),
      pristine,
    });

    const patch = changeSetPatch(set);
    expect(patch).toContain(
      'diff --git a/src/zones/eu/rates.ts b/src/zones/eu/rates.ts\nnew file mode 100644\n--- /dev/null\n+++ b/src/zones/eu/rates.ts\n@@ -0,0 +1,1 @@\n+export const eu = 1;\n',
    );
    expect(patch).toContain('\\ No newline at end of file');

    await gitApply(patch);
    for (const file of [
      'src/pricing.ts',
      'src/no-newline.ts',
      'src/name with spaces.ts',
      'src/zones/eu/rates.ts',
      'src/empty.ts',
    ]) {
      expect(await readFile(path.join(repo, file), 'utf8')).toBe((await sandbox.readFile(file)).toString());
    }
    expect(await readFile(path.join(repo, 'README.md'), 'utf8')).toBe('# Shipping\n');
  });

  it('writes deletions and executable-bit changes as git extended headers that git apply honours', async () => {
    const entries: ChangeEntry[] = [
      {
        path: 'README.md',
        kind: 'deleted',
        type: 'file',
        oldContent: Buffer.from('# Shipping\n'),
        oldMode: 0o644,
        binary: false,
        modeChanged: false,
        allowed: true,
      },
      {
        path: 'src/no-newline.ts',
        kind: 'modified',
        type: 'file',
        content: Buffer.from('export const a = 1;'),
        mode: 0o755,
        oldContent: Buffer.from('export const a = 1;'),
        oldMode: 0o644,
        binary: false,
        modeChanged: true,
        allowed: true,
      },
    ];
    const patch = changeSetPatch({ entries });
    expect(patch).toContain('diff --git a/README.md b/README.md\ndeleted file mode 100644\n');
    expect(patch).toContain(
      'diff --git a/src/no-newline.ts b/src/no-newline.ts\nold mode 100644\nnew mode 100755\n',
    );
    await gitApply(patch);
    await expect(stat(path.join(repo, 'README.md'))).rejects.toThrow();
    expect((await stat(path.join(repo, 'src/no-newline.ts'))).mode & 0o111).not.toBe(0);
  });

  it('notes binary and non-UTF-8 files instead of diffing their bytes', () => {
    const entries: ChangeEntry[] = [
      {
        path: 'assets/logo.png',
        kind: 'added',
        type: 'file',
        content: Buffer.from([0x89, 0x50, 0x00, 0x01]),
        mode: 0o644,
        binary: true,
        modeChanged: false,
        allowed: true,
      },
      {
        path: 'src/latin1.txt',
        kind: 'modified',
        type: 'file',
        content: Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]),
        mode: 0o644,
        oldContent: Buffer.from('cafe\n'),
        oldMode: 0o644,
        binary: false,
        modeChanged: false,
        allowed: true,
      },
    ];
    expect(changeSetPatch({ entries })).toBe(
      [
        'diff --git a/assets/logo.png b/assets/logo.png',
        'new file mode 100644',
        'Binary files /dev/null and b/assets/logo.png differ',
        'diff --git a/src/latin1.txt b/src/latin1.txt',
        'Binary files a/src/latin1.txt and b/src/latin1.txt differ',
        '',
      ].join('\n'),
    );
  });

  it('is empty for an empty change set and skips entries the export refused', () => {
    expect(changeSetPatch({ entries: [] })).toBe('');
    expect(
      changeSetPatch({
        entries: [
          {
            path: 'src/link.ts',
            kind: 'modified',
            type: 'file',
            refused: { kind: 'symlink', reason: 'a symlink' },
            binary: false,
            modeChanged: false,
            allowed: false,
          },
        ],
      }),
    ).toBe('');
  });
});
