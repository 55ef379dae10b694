import { describe, expect, it } from 'vitest';
import { changesFromScan, parseScan } from '../../../src/sandbox/posix/scan.js';
import type { TreeEntry } from '../../../src/sandbox/types.js';

const tree = new Map<string, TreeEntry>([
  ['src', { type: 'directory', mode: 0o755, size: 0 }],
  ['src/a.ts', { type: 'file', mode: 0o644, size: 1, sha256: 'a' }],
  ['test', { type: 'directory', mode: 0o755, size: 0 }],
  ['test/only.test.ts', { type: 'file', mode: 0o644, size: 1, sha256: 'b' }],
  ['lib', { type: 'directory', mode: 0o755, size: 0 }],
  ['lib/deep', { type: 'directory', mode: 0o755, size: 0 }],
  ['lib/deep/x.ts', { type: 'file', mode: 0o644, size: 1, sha256: 'c' }],
]);

function output(records: string[]): Buffer {
  return Buffer.from(records.map((r) => `${r}\0`).join(''));
}

describe('changesFromScan', () => {
  it('sees the deletion of the last file of a folder (a changed folder with no children left)', () => {
    const scan = parseScan(output(['C\td\t755\t2\t4096\ttest']));
    expect(changesFromScan(scan, tree, 100).changes).toEqual([
      { path: 'test/only.test.ts', kind: 'deleted' },
    ]);
  });

  it('sees a whole folder deleted from the listing of its parent', () => {
    const scan = parseScan(output(['C\td\t755\t2\t4096\t', 'E\t./src', 'E\t./test']));
    expect(changesFromScan(scan, tree, 100).changes.map((c) => [c.path, c.kind])).toEqual([
      ['lib', 'deleted'],
      ['lib/deep', 'deleted'],
      ['lib/deep/x.ts', 'deleted'],
    ]);
  });

  it('keeps tabs in paths, and says a folder that became a file took its content with it', () => {
    const scan = parseScan(
      output([
        'C\tf\t644\t1\t3\tsrc/we\tird.ts',
        'C\tf\t644\t1\t3\tlib',
        'C\td\t755\t2\t4096\t',
        'E\t./lib',
        'E\t./src',
        'E\t./test',
      ]),
    );
    expect(changesFromScan(scan, tree, 100).changes.map((c) => [c.path, c.kind, c.type])).toEqual([
      ['lib', 'modified', 'file'],
      ['lib/deep', 'deleted', undefined],
      ['lib/deep/x.ts', 'deleted', undefined],
      ['src/we\tird.ts', 'added', 'file'],
    ]);
  });

  it('ignores a folder whose only change is an entry inside it, and hidden paths', () => {
    const scan = parseScan(output(['C\td\t755\t2\t4096\tsrc', 'E\t./src/a.ts', 'C\td\t755\t2\t4096\ttest']));
    expect(changesFromScan(scan, tree, 100, new Set(['test/only.test.ts'])).changes).toEqual([]);
  });

  it('is incomplete past its limit and then claims no deletions', () => {
    const scan = parseScan(
      output(['C\tf\t644\t1\t1\tn1', 'C\tf\t644\t1\t1\tn2', 'C\td\t755\t2\t4096\ttest']),
    );
    const result = changesFromScan(scan, tree, 2);
    expect(result.complete).toBe(false);
    expect(result.changes.every((c) => c.kind !== 'deleted')).toBe(true);
  });
});
