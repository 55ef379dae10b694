import { createHash } from 'node:crypto';
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyChangeSet, nodeApplyFs, pristineHashes, type ApplyFs } from '../../../src/changes/apply.js';
import { sha256 } from '../../../src/changes/hash.js';
import type { ChangeEntry } from '../../../src/changes/change-set.js';
import { ApplyError } from '../../../src/errors.js';

let root: string;
let repo: string;

const hostFiles: Record<string, string> = {
  'src/pricing.ts': 'export const fee = 5;\n',
  'src/rates.ts': 'export const rate = 1;\n',
  'README.md': '# Shipping\n',
};

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'apply-'));
  repo = path.join(root, 'repo');
  for (const [file, content] of Object.entries(hostFiles)) {
    await mkdir(path.dirname(path.join(repo, file)), { recursive: true });
    await writeFile(path.join(repo, file), content);
    await chmod(path.join(repo, file), 0o644);
  }
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Every entry under `dir` (links not followed) with its kind, permission bits and content hash. */
async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (current: string): Promise<void> => {
    for (const name of (await readdir(current)).sort()) {
      const full = path.join(current, name);
      const rel = path.relative(dir, full);
      const info = await lstat(full);
      if (info.isSymbolicLink()) out[rel] = `link -> ${await readlink(full)}`;
      else if (info.isDirectory()) {
        out[rel] = `dir ${(info.mode & 0o777).toString(8)}`;
        await walk(full);
      } else {
        const hash = createHash('sha256')
          .update(await readFile(full))
          .digest('hex');
        out[rel] = `file ${(info.mode & 0o777).toString(8)} ${hash}`;
      }
    }
  };
  await walk(dir);
  return out;
}

function modified(file: string, content: string, mode = 0o644): ChangeEntry {
  return {
    path: file,
    kind: 'modified',
    type: 'file',
    content: Buffer.from(content),
    mode,
    oldContent: Buffer.from(hostFiles[file] ?? ''),
    oldMode: 0o644,
    binary: false,
    modeChanged: false,
    allowed: true,
  };
}

function added(file: string, content: string, mode = 0o644): ChangeEntry {
  return {
    path: file,
    kind: 'added',
    type: 'file',
    content: Buffer.from(content),
    mode,
    binary: false,
    modeChanged: false,
    allowed: true,
  };
}

async function applyError(promise: Promise<unknown>): Promise<ApplyError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApplyError);
  return error as ApplyError;
}

describe('applyChangeSet', () => {
  it('writes modified and added files, creating folders, with modes normalised to 0644/0755', async () => {
    const entries = [
      modified('src/pricing.ts', 'export const fee = 0;\n', 0o664),
      added('src/zones/eu/rates.ts', 'export const eu = 1;\n'),
      added('scripts/check.sh', '#!/bin/sh\n', 0o775),
    ];
    const result = await applyChangeSet(repo, { entries }, { expected: pristineHashes({ entries }) });
    expect(result.written).toEqual(['src/pricing.ts', 'src/zones/eu/rates.ts', 'scripts/check.sh']);
    expect(await readFile(path.join(repo, 'src/pricing.ts'), 'utf8')).toBe('export const fee = 0;\n');
    expect(await readFile(path.join(repo, 'src/zones/eu/rates.ts'), 'utf8')).toBe('export const eu = 1;\n');
    expect((await lstat(path.join(repo, 'src/pricing.ts'))).mode & 0o7777).toBe(0o644);
    expect((await lstat(path.join(repo, 'scripts/check.sh'))).mode & 0o7777).toBe(0o755);
    expect((await readdir(path.join(repo, 'src'))).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('rolls back when the second of three writes fails: the host tree is identical afterwards', async () => {
    const before = await tree(root);
    let writes = 0;
    const failing: ApplyFs = {
      ...nodeApplyFs,
      async writeNewFile(file, content, mode) {
        writes += 1;
        if (writes === 2) {
          // Leave a partial temp file behind, as a full disk would.
          await nodeApplyFs.writeNewFile(file, content.subarray(0, 3), mode);
          throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
        }
        return nodeApplyFs.writeNewFile(file, content, mode);
      },
    };
    const entries = [
      modified('src/pricing.ts', 'export const fee = 0;\n'),
      added('src/zones/eu.ts', 'export const eu = 1;\n'),
      modified('src/rates.ts', 'export const rate = 2;\n'),
    ];
    const error = await applyError(
      applyChangeSet(repo, { entries }, { expected: pristineHashes({ entries }), fs: failing }),
    );
    expect(error.message).toBe(
      'could not write src/zones/eu.ts: ENOSPC: no space left on device; restored the 1 file(s) already written; the host repo is as it was',
    );
    expect(await tree(root)).toEqual(before);
  });

  it('rolls back when the last rename fails, removing created folders too', async () => {
    const before = await tree(root);
    let renames = 0;
    const failing: ApplyFs = {
      ...nodeApplyFs,
      rename: (from, to) => {
        renames += 1;
        return renames === 3 ? Promise.reject(new Error('EIO: i/o error')) : nodeApplyFs.rename(from, to);
      },
    };
    const entries = [
      added('new/deep/a.ts', 'a\n'),
      modified('src/pricing.ts', 'export const fee = 0;\n'),
      modified('README.md', '# Shipping!\n'),
    ];
    await applyError(
      applyChangeSet(repo, { entries }, { expected: pristineHashes({ entries }), fs: failing }),
    );
    expect(await tree(root)).toEqual(before);
  });

  it('refuses when a host file changed since the snapshot, names it, and writes nothing', async () => {
    const entries = [
      modified('src/pricing.ts', 'export const fee = 0;\n'),
      modified('src/rates.ts', 'export const rate = 2;\n'),
    ];
    const expected = pristineHashes({ entries });
    await writeFile(path.join(repo, 'src/rates.ts'), 'export const rate = 3; // edited by the developer\n');
    const before = await tree(root);
    const error = await applyError(applyChangeSet(repo, { entries }, { expected }));
    expect(error.message).toBe(
      `nothing was written to ${repo}: src/rates.ts changed on the host since the sandbox was built`,
    );
    expect(error.hint).toMatch(/patch was kept/);
    expect(await tree(root)).toEqual(before);
  });

  it('refuses an added file that now exists on the host', async () => {
    const entries = [added('src/new.ts', 'x\n')];
    const expected = pristineHashes({ entries });
    await writeFile(path.join(repo, 'src/new.ts'), 'created meanwhile\n');
    const error = await applyError(applyChangeSet(repo, { entries }, { expected }));
    expect(error.message).toContain('src/new.ts was created on the host since the sandbox was built');
  });

  it('refuses to write through a symlinked folder in the host repo', async () => {
    const outside = path.join(root, 'outside');
    await mkdir(outside);
    await writeFile(path.join(outside, 'eu.ts'), 'outside\n');
    await symlink(outside, path.join(repo, 'src', 'zones'));
    const before = await tree(root);
    const entries = [
      modified('src/pricing.ts', 'export const fee = 0;\n'),
      added('src/zones/eu.ts', 'pwned\n'),
    ];
    const error = await applyError(
      applyChangeSet(
        repo,
        { entries },
        {
          expected: new Map([
            ['src/pricing.ts', sha256(Buffer.from(hostFiles['src/pricing.ts'] ?? ''))],
            ['src/zones/eu.ts', null],
          ]),
        },
      ),
    );
    expect(error.message).toContain(
      'src/zones/eu.ts would be written through a symlink (src/zones is a symlink in the host repo)',
    );
    expect(await tree(root)).toEqual(before);
    expect(await readFile(path.join(outside, 'eu.ts'), 'utf8')).toBe('outside\n');
  });

  it('refuses to replace a file that is a symlink in the host repo', async () => {
    await symlink(path.join(root, 'elsewhere.ts'), path.join(repo, 'src', 'link.ts'));
    const entries = [added('src/link.ts', 'x\n')];
    const error = await applyError(
      applyChangeSet(repo, { entries }, { expected: new Map([['src/link.ts', null]]) }),
    );
    expect(error.message).toContain(
      'src/link.ts is a symlink in the host repo; refusing to write through it',
    );
  });

  it('refuses a change set that did not pass the gate (a deletion or a path outside the allowlist)', async () => {
    const deletion: ChangeEntry = {
      path: 'README.md',
      kind: 'deleted',
      type: 'file',
      binary: false,
      modeChanged: false,
      allowed: true,
    };
    await applyError(
      applyChangeSet(repo, { entries: [deletion] }, { expected: new Map([['README.md', null]]) }),
    );
    const outside: ChangeEntry = {
      ...modified('README.md', 'x\n'),
      allowed: false,
      reason: 'is not in the editable files',
    };
    await applyError(
      applyChangeSet(repo, { entries: [outside] }, { expected: pristineHashes({ entries: [outside] }) }),
    );
    const traversal = added('../escape.ts', 'x\n');
    await applyError(
      applyChangeSet(repo, { entries: [traversal] }, { expected: new Map([['../escape.ts', null]]) }),
    );
    expect(await readFile(path.join(repo, 'README.md'), 'utf8')).toBe('# Shipping\n');
  });

  it('refuses an entry without a recorded pristine hash', async () => {
    const error = await applyError(
      applyChangeSet(repo, { entries: [added('src/a.ts', 'a\n')] }, { expected: new Map() }),
    );
    expect(error.message).toContain('src/a.ts has no recorded pristine state to compare against');
  });
});
