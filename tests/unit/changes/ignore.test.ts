import { describe, expect, it } from 'vitest';
import { createAllowlist } from '../../../src/changes/allowlist.js';
import { collectChangeSet, gateChangeSet } from '../../../src/changes/change-set.js';
import type { PristineSource } from '../../../src/changes/pristine.js';
import {
  createChangeIgnore,
  ignoreSettings,
  pristineGitignores,
  testOutputsOf,
  withTestOutputs,
  type IgnoreChangesSetting,
} from '../../../src/changes/ignore.js';
import { catalogSchema } from '../../../src/catalog/schema.js';
import type { WorkspaceTree } from '../../../src/sandbox/types.js';
import { MemorySandbox, type MemoryEntry } from '../../fakes/memory-sandbox.js';

const repo: Record<string, MemoryEntry> = {
  '.gitignore': 'dist/\nnode_modules\n*.log\n!keep.log\n',
  'src/app.py': 'LIMIT = 10\n',
  'src/index.ts': 'export const limit = 10;\n',
  'tests/test_app.py': 'def test(): pass\n',
  'dist/tracked.js': 'tracked despite the ignore rule\n',
  'coverage/README.md': 'a tracked folder named like a cache\n',
  'node_modules/dep/index.js': 'module.exports = 1;\n',
  'pkg/.gitignore': 'out/\n',
  'build/keep.txt': 'a tracked folder\n',
};

const hostOf = (files: Record<string, MemoryEntry>): PristineSource => ({
  read: (path) => {
    const entry = files[path];
    if (typeof entry !== 'string' && !Buffer.isBuffer(entry)) return Promise.resolve(undefined);
    return Promise.resolve({ content: Buffer.from(entry), mode: 0o644 });
  },
});

async function collect(
  sandbox: MemorySandbox,
  options: {
    setting?: IgnoreChangesSetting;
    editable?: string[];
    files?: Record<string, MemoryEntry>;
    tree?: WorkspaceTree;
  } = {},
) {
  const editable = options.editable ?? ['src/**', 'pkg/**'];
  const tree = options.tree ?? sandbox.pristineTree();
  const pristine = hostOf(options.files ?? repo);
  const gitignores = await pristineGitignores(tree, pristine);
  const ignore = createChangeIgnore({
    settings: ignoreSettings(options.setting),
    gitignore: gitignores.matcher,
    editable,
    tree,
  });
  const set = await collectChangeSet(sandbox, {
    allowlist: createAllowlist({ editable }),
    ignore,
    tree,
    pristine,
  });
  return { set, gate: gateChangeSet(set), paths: set.entries.map((e) => e.path) };
}

const write = (sandbox: MemorySandbox, files: Record<string, string>) =>
  sandbox.writeFiles(Object.entries(files).map(([path, content]) => ({ path, content })));

describe("what is not the agent's change", () => {
  it("pytest's and Node's caches, anywhere (dependency folders too), under an editable glob too", async () => {
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, {
      'src/app.py': 'LIMIT = 12\n',
      '.pytest_cache/v/cache/lastfailed': '{}',
      'src/__pycache__/app.cpython-312.pyc': '\0binary',
      'tests/__pycache__/test_app.cpython-312.pyc': '\0binary',
      'node_modules/.cache/esm/x.json': '{}',
      'node_modules/dep/node_modules/.cache/y': 'y',
      'tsconfig.tsbuildinfo': '{}',
      '.coverage': 'x',
    });
    const { set, gate, paths } = await collect(sandbox);
    expect(paths).toEqual(['src/app.py']);
    expect(gate).toEqual({ ok: true });
    expect(set.ignored).toEqual(
      expect.arrayContaining([
        '.pytest_cache/v/cache/lastfailed',
        'src/__pycache__/app.cpython-312.pyc',
        'node_modules/.cache/esm/x.json',
        'node_modules/dep/node_modules/.cache/y',
        'tsconfig.tsbuildinfo',
        '.coverage',
      ]),
    );
  });

  it("the repo's pristine .gitignore files: root and nested, with negation", async () => {
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, {
      'dist/index.js': 'built',
      'dist/types/index.d.ts': 'built',
      'pkg/out/bundle.js': 'built',
      'src/debug.log': 'log',
      'src/keep.log': 'kept by the negation',
    });
    const { set, paths } = await collect(sandbox);
    expect(paths).toEqual(['src/keep.log']);
    expect(set.ignored).toEqual(
      expect.arrayContaining([
        'dist/index.js',
        'dist/types/index.d.ts',
        'pkg/out/bundle.js',
        'src/debug.log',
      ]),
    );
  });

  it('a path of the pristine tree is never ignored: a tracked file under an ignored or cache-named folder still counts', async () => {
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, { 'dist/tracked.js': 'changed', 'node_modules/dep/index.js': 'patched' });
    sandbox.nodes.delete('coverage/README.md');
    const { gate, paths } = await collect(sandbox);
    expect(paths).toEqual(['coverage/README.md', 'dist/tracked.js', 'node_modules/dep/index.js']);
    expect(gate.ok).toBe(false);
  });

  it('a .gitignore the agent writes or edits changes nothing, and is itself a change that is gated', async () => {
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, {
      'tests/.gitignore': '*\n',
      'tests/test_new.py': 'def test_x(): pass\n',
      '.gitignore': 'dist/\nnode_modules\n*.log\n!keep.log\ntests/\n',
    });
    const { gate, paths } = await collect(sandbox);
    expect(paths).toEqual(['.gitignore', 'tests/.gitignore', 'tests/test_new.py']);
    expect(gate.ok).toBe(false);
  });

  it('a pristine folder replaced by a link with an ignored name is a type change, and its files deletions', async () => {
    const sandbox = new MemorySandbox({ ...repo, '.gitignore': 'build\n' });
    sandbox.nodes.delete('build/keep.txt');
    sandbox.nodes.set('build', { type: 'symlink', target: 'src' });
    const { gate, paths } = await collect(sandbox, { files: { ...repo, '.gitignore': 'build\n' } });
    expect(paths).toEqual(['build', 'build/keep.txt']);
    expect(gate.ok).toBe(false);
  });

  it('a link under an ignored folder that points at an editable file is dropped, never exported', async () => {
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, { 'dist/x.js': 'x' });
    sandbox.nodes.set('dist/link.js', { type: 'symlink', target: '../src/index.ts' });
    const { set, gate, paths } = await collect(sandbox);
    expect(paths).toEqual([]);
    expect(set.ignored).toContain('dist/link.js');
    expect(gate).toEqual({ ok: true });
  });

  it('case and Unicode tricks do not match a rule: DIST/ is a change', async () => {
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, { 'DIST/index.js': 'x', 'src/ＤＩＳＴ.js': 'x' });
    const { paths } = await collect(sandbox);
    expect(paths).toEqual(['DIST/index.js', 'src/ＤＩＳＴ.js']);
  });

  it('an editable entry that names an ignored path literally is gated; a glob does not protect', async () => {
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, { 'src/generated.log': 'wanted', 'src/other.log': 'build output' });
    const { paths, set } = await collect(sandbox, { editable: ['src/**', 'src/generated.log'] });
    expect(paths).toEqual(['src/generated.log']);
    expect(set.ignored).toEqual(['src/other.log']);
  });

  it('the catalog adds globs, turns a default off, or turns .gitignore off', async () => {
    const files = { 'tmp/x': 'x', 'coverage/lcov.info': 'TN:', 'dist/index.js': 'built' };
    const run = async (setting: IgnoreChangesSetting) => {
      const sandbox = new MemorySandbox(repo);
      await write(sandbox, files);
      return (await collect(sandbox, { setting })).paths;
    };
    expect(await run(['tmp/**'])).toEqual([]);
    expect(await run({ add: ['tmp/**'], disable: ['coverage'] })).toEqual(['coverage/lcov.info']);
    expect(await run({ gitignore: false })).toEqual(['dist/index.js', 'tmp/x']);
  });

  it("git's own files under the root .git are never the agent's change; a nested .git is", async () => {
    const withGit = { ...repo, '.git/HEAD': 'ref: refs/heads/main\n', '.git/index': 'old' };
    const sandbox = new MemorySandbox(withGit);
    await write(sandbox, { '.git/index': 'refreshed', '.git/ORIG_HEAD': 'x', 'src/sub/.git/HEAD': 'x' });
    const { set, paths } = await collect(sandbox, { files: withGit });
    expect(paths).toEqual(['src/sub/.git/HEAD']);
    expect(set.ignored).toEqual(expect.arrayContaining(['.git/index', '.git/ORIG_HEAD']));
  });

  it('a held-out test the agent recreates is a pristine path: gated, never ignored', async () => {
    // The image's tree has it; the attempt sandbox had it removed before anything ran.
    const tree = new MemorySandbox(repo).pristineTree();
    const sandbox = new MemorySandbox(repo, undefined, undefined, ['tests/test_app.py']);
    await write(sandbox, { 'tests/test_app.py': 'def test(): pass  # rewritten\n' });
    const { paths } = await collect(sandbox, { setting: ['tests/**'], tree });
    expect(paths).toEqual(['tests/test_app.py']);
  });
});

describe('what the tests wrote on the untouched repo', () => {
  async function withBaseline(written: Record<string, string>, byAgent: Record<string, string>) {
    const editable = ['src/**'];
    const baseline = new MemorySandbox(repo);
    await write(baseline, written);
    const outputs = testOutputsOf((await baseline.changes()).changes);
    const sandbox = new MemorySandbox(repo);
    await write(sandbox, byAgent);
    const tree = sandbox.pristineTree();
    const allowlist = createAllowlist({ editable });
    const ignore = withTestOutputs(
      createChangeIgnore({ settings: ignoreSettings(undefined), editable, tree }),
      outputs,
      { tree, isEditable: (path) => allowlist.check(path).allowed },
    );
    const set = await collectChangeSet(sandbox, { allowlist, ignore, tree, pristine: hostOf(repo) });
    return { set, gate: gateChangeSet(set), paths: set.entries.map((e) => e.path) };
  }

  it('is left aside: the same files, and anything below a folder the tests made', async () => {
    const { set, gate, paths } = await withBaseline(
      { 'test-output/result.json': '{"sum":-1}', 'report.txt': 'failed' },
      {
        'src/index.ts': 'export const limit = 12;\n',
        'test-output/result.json': '{"sum":3}',
        'test-output/more/other.json': '{}',
        'report.txt': 'passed',
      },
    );
    expect(paths).toEqual(['src/index.ts']);
    expect(gate).toEqual({ ok: true });
    expect(set.ignored).toEqual(
      expect.arrayContaining(['test-output/result.json', 'test-output/more/other.json', 'report.txt']),
    );
  });

  it('never an editable path, a file of the repo, or a new file the tests did not write', async () => {
    const { gate, paths } = await withBaseline(
      { 'src/generated.ts': 'x', 'report.txt': 'failed' },
      {
        'src/generated.ts': 'export const y = 1;\n',
        'tests/test_app.py': 'def test(): assert False\n',
        'report2.txt': 'not the tests',
      },
    );
    expect(paths).toEqual(['report2.txt', 'src/generated.ts', 'tests/test_app.py']);
    expect(gate.ok).toBe(false);
  });
});

describe('agent.ignoreChanges in the catalog', () => {
  const base = {
    name: 'svc',
    owner: 'team',
    repo: '.',
    rules: {},
    agent: { editableFiles: ['src/**'], testCommand: 'npm test' },
  };
  it('takes the old list form (it adds) and the object form', () => {
    expect(
      catalogSchema.parse({ ...base, agent: { ...base.agent, ignoreChanges: ['tmp/**'] } }).agent
        .ignoreChanges,
    ).toEqual(['tmp/**']);
    expect(ignoreSettings(['tmp/**'])).toEqual({ add: ['tmp/**'], disable: [], gitignore: true });
    expect(ignoreSettings(undefined)).toEqual({ add: [], disable: [], gitignore: true });
    const parsed = catalogSchema.parse({
      ...base,
      agent: { ...base.agent, ignoreChanges: { disable: ['coverage'], gitignore: false } },
    });
    expect(ignoreSettings(parsed.agent.ignoreChanges)).toEqual({
      add: [],
      disable: ['coverage'],
      gitignore: false,
    });
  });

  it('refuses an unknown default name, naming the known ones', () => {
    const result = catalogSchema.safeParse({
      ...base,
      agent: { ...base.agent, ignoreChanges: { disable: ['pytest'] } },
    });
    expect(result.success).toBe(false);
    expect(JSON.stringify(result.error?.issues)).toMatch(/\.pytest_cache/);
  });
});
