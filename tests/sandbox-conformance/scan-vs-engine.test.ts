/**
 * The fast change scan (inside the sandbox, against the start marker and the host's copy of
 * the pristine tree) and the engine's own diff must agree on every case here: the engine's
 * diff is the cross-check, kept off the hot path because its cost grows with the image.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine } from '../../src/sandbox/docker/engine.js';
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
  const raw = await dockerEngine().containerChanges(sandbox.id);
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

async function scanView(sandbox: Sandbox): Promise<string[]> {
  return (await sandbox.changes()).changes.map((c) => `${c.kind} ${c.path}`).sort();
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
    const sandbox = await dockerBackend().create({ image, role: 'scan-vs-engine' });
    made.push(sandbox);
    const run = await sandbox.exec(command);
    expect(run.exitCode, run.stderr).toBe(0);
    const tree = await dockerBackend().workspaceTree(image);
    expect(await scanView(sandbox)).toEqual(await engineView(sandbox, tree));
  });
});

describe('where the scan is stricter than the engine diff', () => {
  it('a new hard link also marks the file it shares data with (the engine diff lists only the new name)', async () => {
    const image = await fixtureImage('conformance');
    const sandbox = await dockerBackend().create({ image, role: 'scan-vs-engine' });
    made.push(sandbox);
    await sandbox.exec('ln src/greeting.txt src/alias.txt');
    const tree = await dockerBackend().workspaceTree(image);
    expect(await engineView(sandbox, tree)).toEqual(['added src/alias.txt']);
    const scan = (await sandbox.changes()).changes;
    expect(scan.map((c) => [c.path, c.kind, c.links])).toEqual([
      ['src/alias.txt', 'added', 2],
      ['src/greeting.txt', 'modified', 2],
    ]);
  });
});
