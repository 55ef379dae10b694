import {
  applyChangeSet,
  nodeApplyFs,
  pristineHashes,
  type ApplyFs,
} from '../../src/changes/apply-change-set.js';
import type { ChangeEntry } from '../../src/changes/change-set.js';

/**
 * Starts an apply of `entries` to `repo` whose `atRename`-th rename into the repo never
 * returns, as if the process died right there: what came before is written, the rest is
 * not, and no rollback runs. Resolves once it is stuck.
 */
export async function applyThatDies(
  repo: string,
  entries: ChangeEntry[],
  options: { journalDir?: string; atRename?: number } = {},
): Promise<void> {
  let renames = 0;
  let reached!: () => void;
  const stuck = new Promise<void>((resolve) => (reached = resolve));
  const dying: ApplyFs = {
    ...nodeApplyFs,
    rename: (from, to) => {
      if (to.startsWith(repo) && ++renames === (options.atRename ?? 2)) {
        reached();
        return new Promise<void>(() => undefined);
      }
      return nodeApplyFs.rename(from, to);
    },
  };
  void applyChangeSet(
    repo,
    { entries },
    {
      expected: pristineHashes({ entries }),
      fs: dying,
      ...(options.journalDir ? { journalDir: options.journalDir } : {}),
    },
  );
  await stuck;
}
