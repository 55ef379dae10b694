/**
 * The verification step of an attempt: a fresh sandbox from the pristine image, exactly the
 * allowed change written into it, then, before anything else runs there, the invariant:
 * that sandbox's own change set equals the allowed one, path by path and byte for byte.
 * Only then the catalog's tests (held-out ones included). A difference is a harness error
 * with both sets on record, never a pass.
 */
import { VerificationMismatch } from '../errors.js';
import { hostMode, impliedFolders, type ChangeSet } from '../changes/change-set.js';
import { sha256 } from '../changes/hash.js';
import type { Sandbox, WorkspaceTree } from '../sandbox/types.js';
import type { Run } from './types.js';
import { runTestLayers, type TestLayer, type TestRun } from './test-layers.js';
import { clearTestReport, readTestReport, type ReportReading } from '../test-results/read.js';
import { judgeNamedTests, type NamedVerdict } from '../test-results/verdict.js';
import { LOG_LIMITS } from '../test-results/test-log.js';
import { clearReward, readReward, REWARD_TO_PASS, type RewardReading } from '../test-results/reward.js';

/** What the test command's report said, test by test (catalog `agent.testReport`). */
export interface VerificationResults {
  reading: ReportReading;
  /** With named tests (failToPass/passToPass): the SWE-bench verdict. */
  named?: NamedVerdict;
  /** The test command's own exit code (0 when every layer passed), kept next to the verdict. */
  exitCode: number;
}

export interface Verification {
  /**
   * Whether the change is verified: the test command passed or, when the catalog names the
   * tests that decide (failToPass/passToPass), every named test passed in the report.
   */
  passed: boolean;
  tests: TestRun;
  results?: VerificationResults;
  /**
   * With held-out tests: `passed` when everything passed, `failed` when the visible tests
   * pass without them (the verdict came from the held-out tests); absent otherwise.
   */
  heldOut?: 'passed' | 'failed';
  /**
   * With held-out tests that failed: the same change tested without them, the only output
   * the maker and the checker may see (the run with them names their files and values).
   */
  visible?: TestRun;
  /** With catalog `agent.reward`: what the verifier scored; it decides, not the exit code. */
  reward?: RewardReading;
}

interface Expected {
  sha256: string;
  mode: number;
}

export interface InvariantReport {
  expected: Record<string, Expected>;
  observed: Record<string, Expected | { type: string; kind: string }>;
  differences: string[];
}

/**
 * Compares what the sandbox says changed (scan + export, read by programs of the pristine
 * image before any program of the agent ran there) with what was written.
 */
export async function checkInvariant(
  box: Sandbox,
  changeSet: ChangeSet,
  tree: WorkspaceTree,
  signal?: AbortSignal,
): Promise<InvariantReport> {
  const expected = new Map<string, Expected>();
  for (const entry of changeSet.entries) {
    if (entry.content)
      expected.set(entry.path, { sha256: sha256(entry.content), mode: hostMode(entry.mode ?? 0o644) });
  }
  const folders = impliedFolders(
    changeSet.entries.filter((e) => e.kind === 'added').map((e) => e.path),
    tree,
  );
  const scan = await box.changes({
    maxEntries: expected.size + folders.size + 1000,
    ...(signal ? { signal } : {}),
  });
  const differences: string[] = [];
  if (!scan.complete) differences.push('the verification sandbox changed more paths than were written');
  const observed: InvariantReport['observed'] = {};
  const files = scan.changes.filter((c) => c.kind !== 'deleted' && c.type === 'file').map((c) => c.path);
  const exported =
    files.length > 0 ? await box.exportFiles(files, { ...(signal ? { signal } : {}) }) : undefined;
  const contents = new Map((exported?.files ?? []).map((f) => [f.path, f]));
  for (const change of scan.changes) {
    if (change.kind === 'added' && change.type === 'directory' && folders.has(change.path)) continue;
    const file = contents.get(change.path);
    if (file) {
      const seen = { sha256: sha256(file.content), mode: hostMode(file.mode) };
      observed[change.path] = seen;
      const want = expected.get(change.path);
      if (!want) differences.push(`${change.path} changed but was not written`);
      else if (want.sha256 !== seen.sha256)
        differences.push(`${change.path} holds other bytes than were written`);
      else if (want.mode !== seen.mode) differences.push(`${change.path} has another mode than was written`);
    } else {
      observed[change.path] = { type: change.type ?? 'gone', kind: change.kind };
      differences.push(`${change.path} ${change.kind} (${change.type ?? 'deleted'}) was not written`);
    }
  }
  for (const path of expected.keys()) {
    if (!(path in observed)) differences.push(`${path} was written but is not there as written`);
  }
  return { expected: Object.fromEntries(expected), observed, differences };
}

export async function verifyChange(
  run: Run,
  n: number,
  changeSet: ChangeSet,
  tree: WorkspaceTree,
  layers: readonly TestLayer[],
  heldOut: readonly string[],
  /** A step's verification (catalog `agent.steps`): its sandbox's role (its verifier files) and its time. */
  step?: { role: string; testSec: number },
  /**
   * The sandbox the change was written into by the harness itself, from the pristine image
   * (`patchIntoVerification`): the tests run there when its own scan is exactly the change,
   * else in a fresh sandbox as always.
   */
  inPlace?: Sandbox,
): Promise<Verification> {
  const role = step?.role ?? `verify-${n}`;
  let box = inPlace;
  let report = inPlace ? await checkInvariant(inPlace, changeSet, tree, run.signal) : undefined;
  // Something more changed where the harness wrote the change (a path the change set leaves
  // out as build output): verified in a fresh sandbox instead, as any agent's change is.
  if (!box || !report || report.differences.length > 0) {
    box = await run.sandboxes.create(role);
    run.journal.append({
      kind: 'sandbox',
      attempt: n,
      container: { role, id: box.id, kept: false, engine: box.where ?? run.deps.backend.engine },
    });
    await writeAllowed(box, changeSet, run.signal);
    report = await checkInvariant(box, changeSet, tree, run.signal);
  }
  if (report.differences.length > 0) {
    const file = `attempts/${n}/${step ? `${role}-` : ''}verification-mismatch.json`;
    await run.dir.writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    throw new VerificationMismatch(
      `the verification sandbox does not hold exactly the allowed change (${report.differences.slice(0, 3).join('; ')}${report.differences.length > 3 ? '; ...' : ''}); both sets are in ${file}`,
    );
  }
  const timeoutMs = (step?.testSec ?? run.catalog.catalog.sandbox.timeouts.testSec) * 1000;
  const reportConfig = run.catalog.catalog.agent.testReport;
  if (reportConfig) await clearTestReport(box, reportConfig, run.signal);
  const rewardConfig = run.catalog.catalog.agent.reward;
  if (rewardConfig) await clearReward(box, rewardConfig.dir, run.signal);
  // A freeze follows the tests (below): root's look for it starts beside them.
  if (rewardConfig || reportConfig) box.watchFreeze?.();
  const tests = await runTestLayers(box, layers, {
    timeoutMs,
    signal: run.signal,
    // Results read from the output need all of it that fits the parser's own cap.
    ...(reportConfig && reportConfig.format !== 'junit' ? { maxOutputBytes: LOG_LIMITS.maxBytes } : {}),
    onLayer: (layer) =>
      run.journal.append({ kind: 'verify_layer', attempt: n, layer: layer.name, command: layer.command }),
  });
  if (rewardConfig) {
    // Nothing the tests started may rewrite the reward while it is read; the reward decides.
    await box.freeze({ signal: run.signal });
    const reward = await readReward(box, rewardConfig.dir, run.signal);
    return { passed: reward.ok && reward.reward.score >= REWARD_TO_PASS, tests, reward };
  }
  if (reportConfig) {
    // Nothing the tests started may rewrite the report while it is read.
    await box.freeze({ signal: run.signal });
    const exitCode = tests.failingLayer?.exitCode ?? 0;
    const output = tests.layers.map((l) => l.output).join('\n');
    const reading = await readTestReport(box, reportConfig, { output, exitCode }, run.signal);
    if (reportConfig.failToPass !== undefined || reportConfig.passToPass !== undefined) {
      const named = judgeNamedTests(
        {
          failToPass: reportConfig.failToPass ?? [],
          passToPass: reportConfig.passToPass ?? [],
          quarantined: reportConfig.quarantined,
        },
        reading.ok ? reading.report : undefined,
        reading.ok ? undefined : reading.reason,
      );
      // The named tests decide; held-out or not, there is no second verdict to tell apart.
      return { passed: named.verdict === 'resolved', tests, results: { reading, named, exitCode } };
    }
    if (heldOut.length === 0) return { passed: tests.passed, tests, results: { reading, exitCode } };
    const results = { reading, exitCode };
    if (tests.passed) return { passed: true, tests, results, heldOut: 'passed' };
    return withHeldOutVerdict(run, n, changeSet, layers, heldOut, timeoutMs, {
      passed: false,
      tests,
      results,
    });
  }
  if (heldOut.length === 0) return { passed: tests.passed, tests };
  if (tests.passed) return { passed: true, tests, heldOut: 'passed' };
  return withHeldOutVerdict(run, n, changeSet, layers, heldOut, timeoutMs, { passed: false, tests });
}

async function withHeldOutVerdict(
  run: Run,
  n: number,
  changeSet: ChangeSet,
  layers: readonly TestLayer[],
  heldOut: readonly string[],
  timeoutMs: number,
  failed: Verification,
): Promise<Verification> {
  // Which verdict came from the held-out tests: the same change, in a sandbox without them.
  const visibleBox = await run.sandboxes.create(`verify-${n}-visible`, { hidden: heldOut }, true);
  try {
    await writeAllowed(visibleBox, changeSet, run.signal);
    const visible = await runTestLayers(visibleBox, layers, { timeoutMs, signal: run.signal });
    return visible.passed ? { ...failed, heldOut: 'failed', visible } : { ...failed, visible };
  } finally {
    await run.sandboxes.release(visibleBox);
  }
}

/**
 * The allowed change, written into a sandbox made from the pristine image: over its command
 * channel (started when the sandbox was made ahead; nothing of the agent runs there).
 */
async function writeAllowed(box: Sandbox, changeSet: ChangeSet, signal: AbortSignal): Promise<void> {
  const files = changeSet.entries.filter((e) => e.content !== undefined);
  await box.writeFiles(
    files.map((e) => ({ path: e.path, content: e.content!, mode: hostMode(e.mode ?? 0o644) & 0o777 })),
    { signal, fast: true },
  );
}
