/**
 * The attempt's change set, read without waiting for the baseline where the baseline could not
 * change it. What the tests wrote on the untouched repo (the baseline's `testOutputs`) is only
 * ever left aside from a path the gate would refuse: one outside the pristine tree that is not
 * editable (`withTestOutputs`). So the change is read at once with what is known now, and
 * read again once the baseline has settled only when it has such a path, or was too large to
 * read at all. A trial that runs the baseline beside its attempt then pays for the baseline
 * only when the baseline can matter, not on every attempt.
 */
import type { Allowlist } from '../changes/allowlist.js';
import { collectChangeSet, type ChangeSet } from '../changes/change-set.js';
import type { PristineSource } from '../changes/pristine.js';
import { NO_TEST_OUTPUTS, withTestOutputs, type ChangeIgnore, type TestOutputs } from '../changes/ignore.js';
import type { Sandbox, WorkspaceTree } from '../sandbox/types.js';

export interface CollectPlan {
  allowlist: Allowlist;
  tree: WorkspaceTree;
  pristine: PristineSource;
  ignore: ChangeIgnore;
  /** Settles with the baseline, never rejects; absent: there are none to know. */
  testOutputs?: Promise<TestOutputs> | undefined;
}

const PENDING = Symbol('pending');

/** The value of `promise` if it has settled already, else undefined (never waits). */
async function settledNow<T>(promise: Promise<T> | undefined): Promise<T | undefined> {
  if (!promise) return undefined;
  const first = await Promise.race([promise, Promise.resolve(PENDING)]);
  return first === PENDING ? undefined : (first as T);
}

/** Whether knowing what the tests wrote could make `changeSet` another set. */
function testOutputsMatter(changeSet: ChangeSet, plan: CollectPlan): boolean {
  if (changeSet.overLimit) return true;
  return changeSet.entries.some((e) => !plan.tree.has(e.path) && !plan.allowlist.check(e.path).allowed);
}

export async function collectChange(
  box: Sandbox,
  plan: CollectPlan,
  signal: AbortSignal,
): Promise<ChangeSet> {
  const collect = (outputs: TestOutputs) =>
    collectChangeSet(box, {
      allowlist: plan.allowlist,
      ignore: withTestOutputs(plan.ignore, outputs, {
        tree: plan.tree,
        isEditable: (path) => plan.allowlist.check(path).allowed,
      }),
      tree: plan.tree,
      pristine: plan.pristine,
      signal,
    });
  const known = await settledNow(plan.testOutputs);
  const changeSet = await collect(known ?? NO_TEST_OUTPUTS);
  if (known !== undefined || !plan.testOutputs || !testOutputsMatter(changeSet, plan)) return changeSet;
  return collect(await plan.testOutputs);
}
