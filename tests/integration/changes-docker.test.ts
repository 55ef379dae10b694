/**
 * The allowlist gate and copy-back against real containers: what a command does inside a
 * sandbox comes back to the host only when every changed path is allowed, and then exactly.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dockerBackend } from '../../src/sandbox/docker/index.js';
import { DockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { buildRepoImage, type BuiltRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { createAllowlist } from '../../src/changes/allowlist.js';
import { collectChangeSet, gateChangeSet } from '../../src/changes/change-set.js';
import type { PristineSource } from '../../src/changes/pristine.js';
import { changeSetPatch } from '../../src/changes/patch.js';
import { applyChangeSet } from '../../src/changes/apply-change-set.js';
import { createChangeIgnore, ignoreSettings } from '../../src/changes/ignore.js';
import { FIXTURES } from '../helpers/docker.js';
import { treeHash } from '../helpers/cli.js';

async function copyRepo(): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), 'sandbox-harness-gate-')), 'gate-repo');
  await cp(join(FIXTURES, 'repos', 'gate'), dir, { recursive: true });
  return dir;
}

function pristineFrom(repo: string, image: BuiltRepoImage): PristineSource {
  return {
    async read(path) {
      const entry = image.hostFiles.get(path);
      if (!entry) return undefined;
      return { content: await readFile(join(repo, path)), mode: entry.mode };
    },
  };
}

async function treeOf(tag: string) {
  return dockerBackend().workspaceTree(tag);
}

describe('allowlist gate and copy-back with real Docker', () => {
  beforeAll(async () => {
    await ensureBaseImage('node', {});
  }, 900_000);

  async function afterCommand(command: string, backend = dockerBackend()) {
    const repo = await copyRepo();
    const before = treeHash(repo);
    const image = await buildRepoImage({ repoDir: repo });
    const sandbox = await backend.create({ image: image.tag, role: 'gate-it' });
    try {
      const run = await sandbox.exec(command);
      expect(run.exitCode, run.stderr).toBe(0);
      const tree = await treeOf(image.tag);
      const changeSet = await collectChangeSet(sandbox, {
        allowlist: createAllowlist({ editable: ['src/**'] }),
        ignore: createChangeIgnore({ settings: ignoreSettings(undefined), editable: ['src/**'], tree }),
        tree,
        pristine: pristineFrom(repo, image),
      });
      return { repo, before, image, changeSet, gate: gateChangeSet(changeSet) };
    } finally {
      await sandbox.dispose();
    }
  }

  it('rejects an edit of an allowed and a non-allowed file, and the host repo stays as it was', async () => {
    const { repo, before, gate } = await afterCommand("sed -i 's/10/12/' src/app.js test/app.test.js");
    expect(gate.ok).toBe(false);
    if (!gate.ok) {
      expect(gate.offending.map((o) => o.path)).toEqual(['test/app.test.js']);
      expect(gate.reason).toContain('test/app.test.js');
      expect(gate.reason).toContain('src/**');
    }
    expect(treeHash(repo)).toBe(before);
  });

  it('an edit of only the allowed file gives exactly that patch, applied exactly', async () => {
    const { repo, image, changeSet, gate } = await afterCommand("sed -i 's/10/12/' src/app.js");
    expect(gate.ok).toBe(true);
    expect(changeSet.entries.map((e) => [e.path, e.kind])).toEqual([['src/app.js', 'modified']]);
    const patch = changeSetPatch(changeSet);
    expect(patch).toContain('-export const limit = 10;');
    expect(patch).toContain('+export const limit = 12;');
    const expected = new Map(
      changeSet.entries.map((e) => [e.path, image.hostFiles.get(e.path)?.sha256 ?? null]),
    );
    const testBefore = await readFile(join(repo, 'test', 'app.test.js'), 'utf8');
    await applyChangeSet(repo, changeSet, { expected });
    expect(await readFile(join(repo, 'src', 'app.js'), 'utf8')).toBe('export const limit = 12;\n');
    expect(await readFile(join(repo, 'test', 'app.test.js'), 'utf8')).toBe(testBefore);
  });

  it('rejects an allowed file replaced by a symlink', async () => {
    const { gate } = await afterCommand('rm src/app.js && ln -s /etc/passwd src/app.js');
    expect(gate.ok).toBe(false);
    if (!gate.ok)
      expect(gate.offending[0]).toMatchObject({
        path: 'src/app.js',
        kind: 'type-changed',
        why: expect.stringMatching(/from a file to a symlink/),
      });
  });

  it('rejects the deletion of a test file', async () => {
    const { gate } = await afterCommand('rm test/app.test.js');
    expect(gate.ok).toBe(false);
    if (!gate.ok) {
      expect([...new Set(gate.offending.map((o) => o.path))]).toEqual(['test/app.test.js']);
      expect(gate.offending.map((o) => o.why).join(' ')).toMatch(/delet/);
    }
  });

  // A file and a folder (with a big file in it) whose names are not UTF-8, also under an
  // ignored cache folder: each must refuse the change, naming the raw bytes, on the host's
  // layer walk and on the in-sandbox scan alike; before, they were read as deletions.
  const NOT_UTF8 = [
    'printf x > "src/$(printf \'bad\\377name.js\')"',
    'mkdir "$(printf \'dir\\376\')"',
    'head -c 3000000 /dev/zero > "$(printf \'dir\\376\')/big"',
    'mkdir -p node_modules/.cache && printf x > "node_modules/.cache/$(printf \'c\\377\')"',
  ].join(' && ');
  for (const [how, backend] of [
    ['the layer walk', () => dockerBackend()],
    ['the in-sandbox scan', () => new DockerBackend(dockerEngine(), 'local', false)],
  ] as const) {
    it(`refuses names that are not UTF-8, never skipping them (${how})`, async () => {
      const { gate, changeSet } = await afterCommand(NOT_UTF8, backend());
      expect(gate.ok).toBe(false);
      const refused = changeSet.entries.filter((e) => e.refused?.kind === 'invalid-path').map((e) => e.path);
      expect(refused).toEqual(
        expect.arrayContaining(['src/bad\\xffname.js', 'dir\\xfe', 'node_modules/.cache/c\\xff']),
      );
      if (!gate.ok) expect(gate.reason).toContain('not valid UTF-8');
    });
  }

  it('writes only into ignored cache paths: an empty change set', async () => {
    const { changeSet, gate } = await afterCommand(
      'mkdir -p node_modules/.vite coverage .cache && echo x > node_modules/.vite/dep.js && echo y > coverage/lcov.info && echo z > .cache/blob',
    );
    expect(changeSet.entries).toEqual([]);
    expect(changeSet.ignored.length).toBeGreaterThan(0);
    expect(gate.ok).toBe(true);
  });
});
