/** `inspect <run>`: summary, attempts, a diff, test output and kept containers of a run. */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { HarnessError, UsageError } from '../../errors.js';
import { costKnown, formatCost, formatDuration, formatUsd } from '../../format.js';
import type { AttemptRecord, RunRecord, StoredRun } from '../../runs/record.js';
import { attemptOfContainer } from '../../runs/attempt-roles.js';
import type { SandboxBackend } from '../../sandbox/types.js';
import type { byAttention as ByAttention, StoredResults } from '../../test-results/stored.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { attemptOption, withEngineLookup, withRunsLocation } from '../shared-options.js';

function declaration() {
  return withEngineLookup(
    withRunsLocation(
      new Command('inspect').description(
        'summary, attempts (gate decisions, reviews), a diff, test output and kept containers of a run',
      ),
    ),
    'look for its containers',
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .addOption(
      attemptOption(
        'show the diff and test output of attempt n (default: the final patch, else the last attempt)',
      ),
    )
    .option('--json', 'JSON output');
}

export type InspectOptions = OptionsOf<typeof declaration>;

async function attemptFiles(run: StoredRun): Promise<string[]> {
  try {
    return (await readdir(join(run.dir, 'attempts'))).sort((a, b) => Number(a) - Number(b));
  } catch {
    return [];
  }
}

export async function inspectCommand(ctx: CliContext, ref: string, options: InspectOptions): Promise<number> {
  const { readRunFile, resolveRun } = await import('../../runs/record.js');
  const { byAttention, parseStoredResults } = await import('../../test-results/stored.js');
  const { backendOfRun, removedStatus, runsDirOf } = await import('../run-lookup.js');
  const { formatEgressLine, readEgressLogs } = await import('../egress-log-lines.js');
  const { ticketHeading } = await import('../../catalog/ticket.js');
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const record = run.record;
  const kept = record.containers.filter((c) => c.kept);
  // The record is worth reading even when its engine is out of reach; the state says why.
  let backend: SandboxBackend | undefined;
  let unreachable = 'no engine';
  if (kept.length > 0) {
    try {
      backend = await backendOfRun(ctx, record, options);
    } catch (error) {
      if (!(error instanceof HarnessError)) throw error;
      unreachable = error.message;
    }
  }
  const containers = await Promise.all(
    kept.map(async (c) => ({
      ...c,
      ...(backend === undefined
        ? { exists: false, running: false, status: `unknown (${unreachable})` }
        : await backend.state({ id: c.id, runId: record.id }).catch((error: unknown) => ({
            exists: false,
            running: false,
            status:
              error instanceof UsageError ? `refused: ${error.message}` : 'unknown (engine not reachable)',
          }))),
    })),
  );
  const attemptDirs = await attemptFiles(run);
  let shown: string | undefined = attemptDirs[attemptDirs.length - 1];
  if (options.attempt !== undefined) {
    shown = String(options.attempt);
    if (!attemptDirs.includes(shown)) {
      throw new UsageError(
        `run ${record.id} has no attempt ${shown} (attempts: ${attemptDirs.join(', ') || 'none'})`,
      );
    }
  }
  const finalPatch = options.attempt === undefined ? await readRunFile(run, 'patch.diff') : undefined;
  const attemptPatch = shown ? await readRunFile(run, `attempts/${shown}/patch.diff`) : undefined;
  const testOutput = shown ? await readRunFile(run, `attempts/${shown}/test-output.txt`) : undefined;
  const rejection = shown ? await readRunFile(run, `attempts/${shown}/rejection.txt`) : undefined;
  const testResults = shown
    ? parseStoredResults(await readRunFile(run, `attempts/${shown}/test-results.json`))
    : undefined;
  const egress = await readEgressLogs(run);
  if (options.json) {
    printJson(ctx, {
      dir: run.dir,
      record,
      egress,
      containers,
      attempt: shown === undefined ? undefined : Number(shown),
      patch: finalPatch ?? attemptPatch,
      testOutput,
      rejection,
      ...(testResults ? { testResults } : {}),
    });
    return 0;
  }
  const lines = [
    `run ${record.id}  (${run.dir})`,
    `  ticket    ${ticketHeading(record.ticket)}`,
    `  catalog   ${record.catalog.name} (${record.catalog.hash.slice(0, 12)})`,
    `  model     ${record.provider.name} ${record.provider.model}${record.checker ? `; checker ${record.checker.name} ${record.checker.model}` : ''}`,
    `  image     ${record.image ? `${record.image.tag} ${record.image.id.slice(7, 19)}${record.image.buildNetwork ? ' (built with network)' : ''}` : '-'}`,
    `  engine    ${record.engine ?? 'local'} (${record.backend ?? 'docker'}), runtime ${record.runtime ?? '-'}`,
    `  baseline  ${record.baseline ? `${record.baseline.brokenCommand ? `the test command did not run the tests: ${record.baseline.brokenCommand.reason}` : record.baseline.failing ? 'tests fail' : 'tests pass'}${record.baseline.reusedFrom ? ` (reused from ${record.baseline.reusedFrom})` : ''}` : '-'}`,
    `  outcome   ${record.outcome}${record.message ? ` — ${record.message}` : ''}`,
    `  duration  ${record.durationMs === undefined ? '-' : formatDuration(record.durationMs)}, ${record.turns} turns, ${record.tokens.input}+${record.tokens.output} tokens`,
    `  cost      ${costLine(record.cost)}`,
    '',
    'attempts:',
  ];
  for (const a of record.attempts) {
    const changed = a.changedFiles.slice(0, 5).join(', ');
    const more = (a.changedCount ?? a.changedFiles.length) - Math.min(5, a.changedFiles.length);
    lines.push(
      `  ${a.n}. ${a.verdict.padEnd(17)} ${String(a.turns).padStart(3)} turns  ${formatDuration(a.durationMs).padStart(7)}  ${changed || '(no changes)'}${more > 0 ? ` and ${more} more` : ''}${a.failingLayer ? `  failing layer: ${a.failingLayer}` : ''}${a.heldOut ? `  held-out tests: ${a.heldOut}` : ''}`,
    );
    if (a.message) lines.push(`       ${a.message}`);
    lines.push(...testReportLines(a));
    for (const o of a.gate?.ok === false ? a.gate.offences.slice(0, 5) : [])
      lines.push(`       refused: ${o.path} ${o.why}`);
    for (const review of a.reviews ?? []) {
      lines.push(`       review ${review.round}: ${review.verdict} — ${review.summary}`);
      for (const reason of review.reasons.slice(0, 5)) {
        lines.push(
          `         - ${[reason.file, reason.rule].filter(Boolean).join(', ')}${reason.file || reason.rule ? ': ' : ''}${reason.text}`,
        );
      }
    }
  }
  if (record.attempts.length === 0) lines.push('  (none)');
  if (egress.length > 0) {
    lines.push('', 'egress (proxy logs; `sandbox-harness logs` lists every request):');
    for (const log of egress) {
      const denied = log.entries.filter((e) => !e.allowed);
      lines.push(
        `  ${log.role.padEnd(12)} ${log.entries.length - denied.length} allowed, ${denied.length} denied`,
      );
      for (const e of denied.slice(0, 5)) lines.push(`    ${formatEgressLine(log.role, e)}`);
    }
  }
  lines.push('', 'containers kept:');
  if (containers.length === 0) lines.push('  (none)');
  for (const c of containers)
    lines.push(
      `  ${c.role.padEnd(12)} ${c.id.slice(0, 12)}  ${c.exists ? c.status : removedStatus(c.status)}`,
    );
  // Only a container that is still there can take a shell or a test run.
  for (const c of containers.filter((k) => k.exists)) {
    const n = attemptOfContainer(c, record.containers);
    if (n === undefined) continue;
    lines.push(
      `  attempt ${n}: sandbox-harness shell ${record.id} --attempt ${n}    sandbox-harness rerun-tests ${record.id} --attempt ${n}`,
    );
  }
  print(ctx, lines.join('\n'));
  const diff = finalPatch ?? attemptPatch;
  if (diff) print(ctx, `\n${finalPatch ? 'final patch' : `patch of attempt ${shown}`}:\n${diff}`);
  if (rejection) print(ctx, `\nwhy attempt ${shown} was rejected:\n${rejection}`);
  if (testResults) print(ctx, `\n${testResultLines(testResults, shown ?? '?', byAttention).join('\n')}`);
  if (testOutput) {
    const tailText = testOutput.length > 3000 ? `...\n${testOutput.slice(-3000)}` : testOutput;
    print(ctx, `\ntest output (attempt ${shown}):\n${tailText}`);
  }
  return 0;
}

/** The run's cost, and each role's part when more than one model role spent. */
function costLine(cost: RunRecord['cost']): string {
  const roles = Object.entries(cost?.byRole ?? {});
  if (!costKnown(cost) || roles.length < 2) return formatCost(cost);
  return `${formatCost(cost)} (${roles.map(([role, usd]) => `${role} ${formatUsd(usd)}`).join(', ')})`;
}

/** An attempt's per-test summary: the report's counts, and the named tests' verdict next to the exit code. */
function testReportLines(a: AttemptRecord): string[] {
  const lines: string[] = [];
  const r = a.testReport;
  if (r?.status === 'read' && r.counts)
    lines.push(
      `       tests: ${r.counts.passed} passed, ${r.counts.failed} failed, ${r.counts.skipped} skipped`,
    );
  if (r?.status === 'refused') lines.push(`       test report refused: ${r.reason ?? ''}`);
  const t = a.namedTests;
  if (t) {
    lines.push(
      `       ${t.verdict}: FAIL_TO_PASS ${t.failToPass.passed}/${t.failToPass.total}, PASS_TO_PASS ${t.passToPass.passed}/${t.passToPass.total} (test command exit code ${t.exitCode})${t.quarantined.length ? `; ${t.quarantined.length} quarantined` : ''}`,
    );
  }
  return lines;
}

const SHOWN_TESTS = 20;

/** The tests a reader looks at first: named ones that did not pass, then failed ones. */
function testResultLines(results: StoredResults, attempt: string, byAttention: typeof ByAttention): string[] {
  const lines = [`tests (attempt ${attempt}):`];
  if (results.refused) lines.push(`  report refused: ${results.refused}`);
  const named = results.named;
  if (named) {
    for (const [list, label] of [
      [named.failToPass, 'FAIL_TO_PASS'],
      [named.passToPass, 'PASS_TO_PASS'],
    ] as const) {
      const bad = list.filter((t) => t.status !== 'passed');
      lines.push(`  ${label}: ${list.length - bad.length}/${list.length} passed`);
      for (const t of bad.slice(0, SHOWN_TESTS)) lines.push(`    ${t.status.padEnd(8)} ${t.id}`);
      if (bad.length > SHOWN_TESTS) lines.push(`    ... and ${bad.length - SHOWN_TESTS} more`);
    }
  }
  const failed = results.tests.filter((t) => t.status === 'failed');
  lines.push(`  ${results.tests.length} test(s) in the report, ${failed.length} failed`);
  for (const t of byAttention(failed).slice(0, SHOWN_TESTS))
    lines.push(`    failed   ${t.id}${t.message ? `: ${t.message.slice(0, 160)}` : ''}`);
  if (failed.length > SHOWN_TESTS) lines.push(`    ... and ${failed.length - SHOWN_TESTS} more`);
  return lines;
}

export const inspect = declareCommand(declaration, inspectCommand);
