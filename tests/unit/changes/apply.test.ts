import { execFile } from 'node:child_process';
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
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  applyChangeSet,
  nodeApplyFs,
  pristineHashes,
  recoverInterruptedApply,
  type ApplyFs,
} from '../../../src/changes/apply-change-set.js';
import { sha256 } from '../../../src/changes/hash.js';
import type { ChangeEntry } from '../../../src/changes/change-set.js';
import { ApplyError } from '../../../src/errors.js';
import { ROOT } from '../../helpers/cli.js';
import { applyThatDies } from '../../helpers/apply.js';

let root: string;
let repo: string;

const hostFiles: Record<string, string> = {
  'src/pricing.ts': 'export const fee = 5;\n',
  'src/rates.ts': 'export const rate = 1;\n',
  'README.md': '# Shipping\n',
};

/** The host repo as the tests start from it (again). */
async function resetRepo(): Promise<void> {
  await rm(repo, { recursive: true, force: true });
  for (const [file, content] of Object.entries(hostFiles)) {
    await mkdir(path.dirname(path.join(repo, file)), { recursive: true });
    await writeFile(path.join(repo, file), content);
    await chmod(path.join(repo, file), 0o644);
  }
}

let state: string;
const savedState = process.env.XDG_STATE_HOME;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'apply-'));
  repo = path.join(root, 'repo');
  await resetRepo();
  // Apply journals go to the user's state folder; here, a scratch one outside the compared tree.
  state = await mkdtemp(path.join(tmpdir(), 'apply-state-'));
  process.env.XDG_STATE_HOME = state;
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
  await rm(state, { recursive: true, force: true });
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
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
        // Writes into the repo only: the apply's journal is written first, outside it.
        if (file.startsWith(repo)) writes += 1;
        if (writes === 2 && file.startsWith(repo)) {
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

/** Every operation `fs` is asked for, in order, each going to `onOp` first (which may throw). */
function instrumented(onOp: (n: number, name: string) => void | Promise<void>): ApplyFs {
  let n = 0;
  const wrapped = {} as Record<string, unknown>;
  for (const [name, op] of Object.entries(nodeApplyFs) as [
    string,
    (...args: unknown[]) => Promise<unknown>,
  ][]) {
    wrapped[name] = async (...args: unknown[]) => {
      await onOp(++n, name);
      return op(...args);
    };
  }
  return wrapped as unknown as ApplyFs;
}

describe('applyChangeSet against a failure at any step', () => {
  const entries = () => [
    modified('src/pricing.ts', 'export const fee = 0;\n'),
    added('src/zones/eu/rates.ts', 'export const eu = 1;\n'),
    modified('README.md', '# Shipping, fixed\n', 0o755),
    modified('src/rates.ts', 'export const rate = 2;\n'),
  ];

  /** The tree as it is before and after a complete apply, and how many fs operations that takes. */
  async function endStates() {
    const before = await tree(root);
    const ops: string[] = [];
    await applyChangeSet(
      repo,
      { entries: entries() },
      {
        expected: pristineHashes({ entries: entries() }),
        fs: instrumented((_n, name) => void ops.push(name)),
      },
    );
    const after = await tree(root);
    await resetRepo();
    expect(await tree(root)).toEqual(before);
    return { before, after, ops };
  }

  it('an I/O error at any one operation leaves the repo as it was (or, at the final sync, fully applied)', async () => {
    const { before, after, ops } = await endStates();
    expect(ops.length).toBeGreaterThan(20);
    for (let failAt = 1; failAt <= ops.length; failAt++) {
      const fs = instrumented((n) => {
        if (n === failAt) throw Object.assign(new Error(`EIO: injected at operation ${n}`), { code: 'EIO' });
      });
      const outcome = await applyChangeSet(
        repo,
        { entries: entries() },
        { expected: pristineHashes({ entries: entries() }), fs },
      ).then(
        () => 'applied',
        () => 'failed',
      );
      const now = JSON.stringify(await tree(root));
      const state =
        now === JSON.stringify(before) ? 'as it was' : now === JSON.stringify(after) ? 'applied' : 'HALF';
      // Applied only when the call says so; after any failure, exactly as it was.
      expect(`operation ${failAt} (${ops[failAt - 1]}): ${outcome}, repo ${state}`).toMatch(
        outcome === 'applied' ? /: applied, repo applied$/ : /: failed, repo as it was$/,
      );
      if (state === 'applied') await resetRepo();
    }
  });
  // A crash skips the in-memory rollback; the journal written before the first rename lets
  // the next run (here: recoverInterruptedApply, as `fix` and the next apply call it) undo it.
  it('a process killed at any operation leaves the repo, once recovered, as it was or fully applied', async () => {
    const { before, after, ops } = await endStates();
    const scratch = await mkdtemp(path.join(tmpdir(), 'apply-kill-'));
    const plan = path.join(scratch, 'entries.json');
    await writeFile(
      plan,
      JSON.stringify(
        entries().map((e) => ({
          ...e,
          content: e.content?.toString('base64'),
          oldContent: e.oldContent?.toString('base64'),
        })),
      ),
    );
    const journals = path.join(scratch, 'journals');
    const child = path.join(scratch, 'apply-and-die.mjs');
    await writeFile(
      child,
      `import { readFileSync } from 'node:fs';
import { applyChangeSet, nodeApplyFs, pristineHashes } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist', 'changes', 'apply-change-set.js')).href)};
const [repo, plan, killAt, journalDir] = process.argv.slice(2);
const entries = JSON.parse(readFileSync(plan, 'utf8')).map((e) => ({
  ...e,
  content: e.content === undefined ? undefined : Buffer.from(e.content, 'base64'),
  oldContent: e.oldContent === undefined ? undefined : Buffer.from(e.oldContent, 'base64'),
}));
let n = 0;
const fs = Object.fromEntries(Object.entries(nodeApplyFs).map(([name, op]) => [name, async (...args) => {
  if (++n === Number(killAt)) process.kill(process.pid, 'SIGKILL');
  return op(...args);
}]));
await applyChangeSet(repo, { entries }, { expected: pristineHashes({ entries }), fs, journalDir });
`,
    );
    const states: string[] = [];
    try {
      // Killed right before each operation that changes the disk: every state a crash can leave.
      const mutating = new Set(['writeNewFile', 'rename', 'unlink', 'mkdir', 'rmdir']);
      const killPoints = ops.flatMap((name, i) => (mutating.has(name) ? [i + 1] : []));
      for (const killAt of [...killPoints, ops.length + 1]) {
        await new Promise<void>((resolve, reject) => {
          execFile(process.execPath, [child, repo, plan, String(killAt), journals], (error) =>
            error && (error as { signal?: string }).signal !== 'SIGKILL' ? reject(error) : resolve(),
          );
        });
        const recovered = await recoverInterruptedApply(repo, { journalDir: journals });
        const now = JSON.stringify(await tree(root));
        expect(await readdir(journals)).toEqual([]);
        if (recovered) expect(recovered.leftAlone).toEqual([]);
        states.push(
          `${killAt} ${ops[killAt - 1] ?? 'none'}: ${now === JSON.stringify(before) ? 'as it was' : now === JSON.stringify(after) ? 'applied' : 'HALF'}`,
        );
        await resetRepo();
      }
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
    expect(states.at(-1)).toMatch(/: applied$/);
    expect(states.filter((line) => line.endsWith('HALF'))).toEqual([]);
  });
});

describe('recoverInterruptedApply', () => {
  const entries = () => [
    modified('src/pricing.ts', 'export const fee = 0;\n'),
    added('src/zones/eu/rates.ts', 'export const eu = 1;\n'),
    modified('README.md', '# Shipping, fixed\n'),
  ];

  /** src/pricing.ts written, then the process dies at the second rename. */
  const crashMidway = () => applyThatDies(repo, entries());

  /** The one journal in the state folder, and what it says. */
  async function theJournal<T>(): Promise<{ file: string; journal: T }> {
    const journals = path.join(state, 'sandbox-harness', 'apply');
    const [name] = await readdir(journals);
    const file = path.join(journals, name!);
    return { file, journal: JSON.parse(await readFile(file, 'utf8')) as T };
  }

  it('puts back what a crashed apply wrote, removes its folders and temp files, and its journal', async () => {
    const before = await tree(root);
    await crashMidway();
    expect(await readFile(path.join(repo, 'src/pricing.ts'), 'utf8')).toBe('export const fee = 0;\n');
    expect(await readdir(path.join(repo, 'src/zones/eu'))).toContainEqual(expect.stringMatching(/\.tmp$/));
    const recovered = await recoverInterruptedApply(repo);
    expect(recovered?.restored.sort()).toEqual(['src/pricing.ts']);
    expect(recovered?.leftAlone).toEqual([]);
    expect(await tree(root)).toEqual(before);
    expect(await readdir(path.join(state, 'sandbox-harness', 'apply'))).toEqual([]);
    // Nothing left to do the second time.
    expect(await recoverInterruptedApply(repo)).toBeUndefined();
  });

  it('runs that start together on the repo (an eval’s trials) undo it once', async () => {
    const before = await tree(root);
    await crashMidway();
    const all = await Promise.all([1, 2, 3].map(() => recoverInterruptedApply(repo)));
    for (const recovered of all) expect(recovered?.restored).toEqual(['src/pricing.ts']);
    expect(await tree(root)).toEqual(before);
  });

  it('a planted journal whose folder entries go through a repo symlink removes no folder outside the repo', async () => {
    await crashMidway();
    const outside = path.join(root, 'outside');
    await mkdir(path.join(outside, 'empty', 'deeper'), { recursive: true });
    await symlink(outside, path.join(repo, 'escape'));
    const { file, journal } = await theJournal<{ createdDirs: string[] }>();
    journal.createdDirs.push('escape/empty', 'escape/empty/deeper', 'escape');
    await writeFile(file, JSON.stringify(journal));
    const recovered = await recoverInterruptedApply(repo);
    expect(await readdir(path.join(outside, 'empty'))).toEqual(['deeper']);
    expect((await lstat(path.join(repo, 'escape'))).isSymbolicLink()).toBe(true);
    expect(recovered?.leftAlone).toEqual(
      expect.arrayContaining([expect.stringMatching(/^escape\/empty\/deeper\/ .*symlink/)]),
    );
  });

  it('leaves a file the user changed after the crash as it is, and names it', async () => {
    await crashMidway();
    await writeFile(path.join(repo, 'src/pricing.ts'), 'export const fee = 7; // by hand\n');
    const recovered = await recoverInterruptedApply(repo);
    expect(recovered?.leftAlone).toEqual(['src/pricing.ts (changed since the interrupted apply)']);
    expect(await readFile(path.join(repo, 'src/pricing.ts'), 'utf8')).toBe(
      'export const fee = 7; // by hand\n',
    );
  });

  it('the next apply recovers first, then applies on the repo as it was', async () => {
    await crashMidway();
    const result = await applyChangeSet(
      repo,
      { entries: entries() },
      { expected: pristineHashes({ entries: entries() }) },
    );
    expect(result.written).toEqual(['src/pricing.ts', 'src/zones/eu/rates.ts', 'README.md']);
    expect(await readFile(path.join(repo, 'README.md'), 'utf8')).toBe('# Shipping, fixed\n');
  });

  it('does not touch a repo while the process that is applying to it is alive', async () => {
    await crashMidway();
    const { file, journal } = await theJournal<{ pid: number }>();
    // The parent of this test process is alive and is not this process.
    await writeFile(file, JSON.stringify({ ...journal, pid: process.ppid }));
    const error = await applyError(recoverInterruptedApply(repo));
    expect(error.message).toMatch(
      new RegExp(`another process \\(pid ${process.ppid}\\) is applying a change`),
    );
    expect(await readFile(path.join(repo, 'src/pricing.ts'), 'utf8')).toBe('export const fee = 0;\n');
  });

  it('refuses a journal that is not one, or is another repo’s, and changes nothing', async () => {
    await crashMidway();
    const { file, journal } = await theJournal<Record<string, unknown>>();
    await writeFile(file, JSON.stringify({ ...journal, root: '/etc' }));
    expect((await applyError(recoverInterruptedApply(repo))).message).toMatch(
      /cannot be used: it belongs to \/etc/,
    );
    await writeFile(file, '{"version": 1}');
    expect((await applyError(recoverInterruptedApply(repo))).message).toMatch(
      /cannot be used: it is not a journal/,
    );
    expect(await readFile(path.join(repo, 'src/pricing.ts'), 'utf8')).toBe('export const fee = 0;\n');
  });
});
