/**
 * The two fast change lists, the scan inside the sandbox (against the start marker and the
 * host's copy of the pristine tree) and, on a local overlay2 engine, the walk of the
 * container's writable layer from the host, must agree with each other and with the engine's
 * own diff on every case here: the engine's diff is the cross-check, kept off the hot path
 * because its cost grows with the image.
 */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine, EngineExec } from '../../src/sandbox/docker/engine/index.js';
import type { Sandbox, TreeEntry } from '../../src/sandbox/types.js';
import { fixtureImage } from '../helpers/docker.js';

const made: Sandbox[] = [];
afterAll(async () => {
  await Promise.all(made.map((s) => s.dispose()));
});

/**
 * The engine's diff in the scan's terms: under the workspace only, without the folders it
 * lists because something inside them changed (a folder that is still the folder it was).
 */
async function engineView(sandbox: Sandbox, tree: ReadonlyMap<string, TreeEntry>): Promise<string[]> {
  const raw = await dockerEngine().containers.changes(sandbox.id);
  const under = raw
    .filter((c) => c.path.startsWith('/workspace/'))
    .map((c) => ({ path: c.path.slice('/workspace/'.length), kind: c.kind }));
  const out = new Set<string>();
  for (const change of under) {
    if (tree.get(change.path)?.type === 'directory') {
      const now = await sandbox.exec(`[ -d '${change.path}' ] && [ ! -L '${change.path}' ] && echo dir`);
      if (now.stdout.trim() === 'dir') {
        if (change.kind === 'modified') continue;
      } else {
        // The engine names a folder that went away (or became something else) once; the
        // scan names everything that was in it.
        for (const path of tree.keys()) if (path.startsWith(`${change.path}/`)) out.add(`deleted ${path}`);
      }
    }
    out.add(`${change.kind === 'added' && tree.has(change.path) ? 'modified' : change.kind} ${change.path}`);
  }
  return [...out].sort();
}

afterEach(() => {
  vi.restoreAllMocks();
});

const view = (changes: { kind: string; path: string }[]) => changes.map((c) => `${c.kind} ${c.path}`).sort();

/** What `changes()` says, and proof of which way it found out: how many execs it started. */
async function changesOf(sandbox: Sandbox): Promise<{ view: string[]; execs: number }> {
  const execs = vi.spyOn(EngineExec.prototype, 'start');
  try {
    return { view: view((await sandbox.changes()).changes), execs: execs.mock.calls.length };
  } finally {
    execs.mockRestore();
  }
}

/**
 * Both fast ways on one sandbox: the one its backend made it with (the writable layer, on
 * this machine's engine) and the in-sandbox scan (what a sandbox re-attached by id uses: it
 * has no proof that layers on this host are its own).
 */
async function fastViews(sandbox: Sandbox, runId: string): Promise<{ layer: string[]; scan: string[] }> {
  const layer = await changesOf(sandbox);
  // The overlay walk runs nothing in the sandbox; the scan is one exec.
  expect(layer.execs).toBe(0);
  const attached = await dockerBackend().attach({ id: sandbox.id, runId });
  const scan = await changesOf(attached);
  expect(scan.execs).toBe(1);
  return { layer: layer.view, scan: scan.view };
}

async function scanView(sandbox: Sandbox, runId: string): Promise<string[]> {
  const { layer, scan } = await fastViews(sandbox, runId);
  expect(layer).toEqual(scan);
  return scan;
}

const cases: [string, string][] = [
  ['nothing (reads only)', 'cat README.md src/greeting.txt > /dev/null; ls -R > /dev/null'],
  ['a modified file', 'echo more >> src/greeting.txt'],
  ['a new file in a new folder', 'mkdir -p lib/deep && echo new > lib/deep/new.txt'],
  ['a deleted file', 'rm src/obsolete.txt'],
  ['the last file of a folder deleted', 'rm src/nested/deep.txt'],
  ['a deleted folder', 'rm -r src/nested'],
  ['a rename', 'mv src/greeting.txt src/hello.txt'],
  ['a symlink added', 'ln -s ../README.md src/readme'],
  ['a file replaced by a folder', 'rm README.md && mkdir README.md && echo x > README.md/inner.txt'],
  ['a folder replaced by a link', 'rm -r src/nested && ln -s .. src/nested'],
  ['a mode change', 'chmod 755 src/greeting.txt'],
  ['a file rewritten with the same bytes', 'cp src/greeting.txt /tmp/g && cat /tmp/g > src/greeting.txt'],
];

describe('the change scan agrees with the engine diff', () => {
  it.each(cases)('%s', async (_name, command) => {
    const image = await fixtureImage('conformance');
    const runId = `scan-vs-engine-${made.length}`;
    const sandbox = await dockerBackend().create({ image, role: 'scan-vs-engine', runId });
    made.push(sandbox);
    const run = await sandbox.exec(command);
    expect(run.exitCode, run.stderr).toBe(0);
    const tree = await dockerBackend().workspaceTree(image);
    expect(await scanView(sandbox, runId)).toEqual(await engineView(sandbox, tree));
  });
});

describe('where the scan is stricter than the engine diff', () => {
  it('a new hard link also marks the file it shares data with (the engine diff lists only the new name)', async () => {
    const image = await fixtureImage('conformance');
    const runId = 'scan-vs-engine-hard-link';
    const sandbox = await dockerBackend().create({ image, role: 'scan-vs-engine', runId });
    made.push(sandbox);
    await sandbox.exec('ln src/greeting.txt src/alias.txt');
    const tree = await dockerBackend().workspaceTree(image);
    expect(await engineView(sandbox, tree)).toEqual(['added src/alias.txt']);
    const attached = await dockerBackend().attach({ id: sandbox.id, runId });
    for (const box of [sandbox, attached]) {
      const scan = (await box.changes()).changes;
      expect(scan.map((c) => [c.path, c.kind, c.links])).toEqual([
        ['src/alias.txt', 'added', 2],
        ['src/greeting.txt', 'modified', 2],
      ]);
    }
  });
});

describe('the writable layer, read from the host', () => {
  it("is used only with proof that it is this sandbox's own, and never follows a link the sandbox made", async () => {
    const image = await fixtureImage('conformance');
    const runId = 'scan-vs-engine-links';
    const sandbox = await dockerBackend().create({ image, role: 'scan-vs-engine', runId });
    made.push(sandbox);
    // Folders that lead out of the workspace, to the container's root and to a path that is
    // the host's own root when resolved on the host: a walk that followed them would list them.
    const run = await sandbox.exec(
      'rm -r src/nested && ln -s / src/nested && mkdir -p lib && ln -s /etc lib/etc && ln -s ../../../../../../.. lib/up',
    );
    expect(run.exitCode, run.stderr).toBe(0);
    const { layer, scan } = await fastViews(sandbox, runId);
    expect(layer).toEqual(scan);
    expect(layer).toEqual(
      expect.arrayContaining(['added lib', 'added lib/etc', 'added lib/up', 'modified src/nested']),
    );
    expect(layer.filter((line) => /^added (src\/nested|lib\/(etc|up))\//.test(line))).toEqual([]);
  });

  it('a stopped sandbox is not read from its layers: changes() says it is gone, as the scan would', async () => {
    const image = await fixtureImage('conformance');
    const sandbox = await dockerBackend().create({ image, role: 'scan-vs-engine' });
    made.push(sandbox);
    await sandbox.exec('echo x > new.txt');
    await dockerEngine().containers.stop(sandbox.id, 0);
    await expect(sandbox.changes()).rejects.toMatchObject({ code: 'SANDBOX_DEAD' });
  });

  it('exports what the in-sandbox export exports, refuses what it refuses, and runs nothing there', async () => {
    const image = await fixtureImage('conformance');
    const runId = 'scan-vs-engine-export';
    const sandbox = await dockerBackend().create({ image, role: 'scan-vs-engine', runId });
    made.push(sandbox);
    const run = await sandbox.exec(
      [
        'echo more >> src/greeting.txt',
        'mkdir -p lib/deep && printf new > lib/deep/new.txt && chmod 755 lib/deep/new.txt',
        'ln -s ../README.md lib/readme',
        'mkfifo lib/pipe',
        'ln lib/deep/new.txt lib/alias.txt',
        'head -c 3000 /dev/zero > lib/big.bin',
        'ln -s / lib/root',
      ].join(' && '),
    );
    expect(run.exitCode, run.stderr).toBe(0);
    const paths = [
      'src/greeting.txt',
      'lib/deep/new.txt',
      'lib/readme',
      'lib/pipe',
      'lib/alias.txt',
      'lib/big.bin',
      'lib/deep',
      'lib/gone.txt',
      'lib/root/etc/passwd',
    ];
    const exportOf = async (box: Sandbox) => {
      const execs = vi.spyOn(EngineExec.prototype, 'start');
      try {
        const result = await box.exportFiles(paths, { maxFileBytes: 2048 });
        return {
          execs: execs.mock.calls.length,
          files: result.files.map((f) => [f.path, f.content.toString('utf8'), f.mode]).sort(),
          refused: result.refused.map((r) => [r.path, r.kind]).sort(),
        };
      } finally {
        execs.mockRestore();
      }
    };
    const fromLayers = await exportOf(sandbox);
    const inside = await exportOf(await dockerBackend().attach({ id: sandbox.id, runId }));
    expect(fromLayers.execs).toBe(0);
    expect(inside.execs).toBe(1);
    expect(fromLayers.files).toEqual([['src/greeting.txt', expect.stringMatching(/more\n$/), 0o644]]);
    expect(fromLayers.refused).toEqual([
      ['lib/alias.txt', 'hard-link'],
      ['lib/big.bin', 'too-large'],
      ['lib/deep', 'directory'],
      ['lib/deep/new.txt', 'hard-link'],
      ['lib/gone.txt', 'missing'],
      ['lib/pipe', 'special-file'],
      ['lib/readme', 'symlink'],
      // Through a link to the container's root: never read, whatever it leads to.
      ['lib/root/etc/passwd', 'symlink'],
    ]);
    // The in-sandbox export follows a linked folder (the change set refuses such paths
    // before any export); on everything else the two agree.
    expect(inside.files.filter(([path]) => path !== 'lib/root/etc/passwd')).toEqual(fromLayers.files);
    expect(inside.refused).toEqual(fromLayers.refused.filter(([path]) => path !== 'lib/root/etc/passwd'));
  });
});
