/** `runs`, `inspect`, `logs`, `rerun-tests`: reading run records and the containers they kept. */
import type { EgressLogEntry } from '../../sandbox/egress/proxy.js';
import { resolve, join } from 'node:path';
import { readdir, stat } from 'node:fs/promises';
import { findCatalogIfAny } from '../../catalog/discover.js';
import { UsageError } from '../../errors.js';
import {
  listRuns,
  readRunFile,
  resolveRun,
  runsDirFor,
  type AttemptRecord,
  type RunRecord,
  type StoredRun,
} from '../../runs/record.js';
import { loadCatalog } from '../../catalog/load.js';
import {
  connectEngine,
  describeStoredEngine,
  resolveStoredEngine,
  sandboxProvider,
  type EngineSpec,
} from '../../sandbox/registry.js';
import type { AttachRequest, SandboxBackend } from '../../sandbox/types.js';
import { enginesNamed, resolveEngineFlags, type EngineFlags } from '../engine-flags.js';
import { HarnessError } from '../../errors.js';
import { formatTestRun, runTestLayers } from '../../fix/test-layers.js';
import { print, printJson, note, type CliContext } from '../context.js';
import { formatDuration, table } from '../format.js';
import { byAttention, parseStoredResults, type StoredResults } from '../../test-results/stored.js';
import { formatConversation } from '../conversation-text.js';

export interface RunsLocation {
  repo?: string;
  catalog?: string;
  runsDir?: string;
}

export interface AttemptChoice {
  /** Which attempt's kept sandbox; default the last one that kept one. */
  attempt?: string;
}

/** `--engines`/`--engine`: where to look for a run's containers instead of what its record says. */
export type EngineChoice = EngineFlags;

/**
 * The backend that holds a run's containers: on the engine its record names. That engine is
 * found among the engines the user names (`--engines`/`--engine`), else by the reference the
 * record keeps (an engines file entry, a context, a URL: resolved with the user's own files
 * and keys), else it is the local engine. Containers there are still only used when they
 * carry the run's id (`SandboxBackend.attach`).
 */
export async function backendOfRun(
  ctx: CliContext,
  record: RunRecord,
  choice: EngineChoice,
): Promise<SandboxBackend> {
  const name = record.engine ?? 'local';
  let spec: EngineSpec | undefined;
  if (enginesNamed(choice)) {
    const specs = await resolveEngineFlags(ctx, choice);
    spec = specs.find((s) => s.name === name);
    if (!spec) {
      throw new UsageError(
        `run ${record.id} ran on engine ${name}, which is not among the engines named (${specs.map((s) => s.name).join(', ')})`,
        {
          hint: `Name that engine: the engines file that lists it as \`${name}\`, or --engine with its context or URL.`,
        },
      );
    }
  } else if (record.engineRef) {
    try {
      spec = await resolveStoredEngine(record.engineRef, { env: ctx.env });
    } catch (error) {
      if (!(error instanceof HarnessError)) throw error;
      throw new UsageError(
        `run ${record.id} ran on engine ${name}, which cannot be reached as its record says (${describeStoredEngine(record.engineRef)}): ${error.message}`,
        {
          hint: `Name the engine again: --engines FILE (listing it as \`${name}\`) or --engine CONTEXT-OR-URL.`,
        },
      );
    }
  } else if (name !== 'local') {
    throw new UsageError(
      `run ${record.id} ran on engine ${name}, and its record does not say how to reach it`,
      {
        hint: `Name the engine: --engines FILE (listing it as \`${name}\`) or --engine CONTEXT-OR-URL.`,
      },
    );
  }
  if (!spec) return (await sandboxProvider()).backend;
  return (await sandboxProvider('docker', { engine: await connectEngine({ ...spec, name }) })).backend;
}

/** Where run records are: `--runs-dir`, else the repo of `--catalog`, else `--repo` or the working directory. */
export async function runsDirOf(ctx: CliContext, where: RunsLocation): Promise<string> {
  if (where.runsDir) return resolve(ctx.cwd, where.runsDir);
  if (where.catalog) return runsDirFor((await loadCatalog(where.catalog, { cwd: ctx.cwd })).repoDir);
  if (where.repo) return runsDirFor(resolve(ctx.cwd, where.repo));
  const here = runsDirFor(ctx.cwd);
  if (
    await stat(here).then(
      () => true,
      () => false,
    )
  )
    return here;
  // From a folder of catalogs, `fix` wrote into the service repo: look where it did. With
  // several catalogs there, which repo is meant is unknown: refused (exit 2), as `fix` does,
  // rather than "no runs" from a folder that was never the one.
  const catalog = await findCatalogIfAny(ctx.cwd);
  if (catalog) {
    const loaded = await loadCatalog(catalog, { cwd: ctx.cwd }).catch(() => undefined);
    if (loaded) return runsDirFor(loaded.repoDir);
  }
  return here;
}

function summaryRow(record: RunRecord) {
  return {
    id: record.id,
    ticket: record.ticket.id ?? '',
    outcome: record.outcome,
    attempts: String(record.attempts.length),
    duration: record.durationMs === undefined ? '-' : formatDuration(record.durationMs),
    tokens: String(record.tokens.input + record.tokens.output),
    applied: appliedCell(record),
  };
}

/**
 * `yes` (by fix, or `yes (apply)` later), `no` for a verified fix that is not in the working
 * tree (`sandbox-harness apply <run>` writes it), `-` for a run without one.
 */
export function appliedCell(record: Pick<RunRecord, 'outcome' | 'applied' | 'appliedAt'>): string {
  if (record.applied === true) return record.appliedAt ? 'yes (apply)' : 'yes';
  if (record.outcome === 'ready-for-review' || record.outcome === 'not-applied') return 'no';
  return '-';
}

export async function runsCommand(
  ctx: CliContext,
  options: RunsLocation & { json?: boolean },
): Promise<number> {
  const dir = await runsDirOf(ctx, options);
  const runs = await listRuns(dir);
  if (options.json) {
    printJson(
      ctx,
      runs.map((r) => ({ ...summaryRow(r.record), dir: r.dir })),
    );
    return 0;
  }
  if (runs.length === 0) {
    print(ctx, `No runs recorded in ${dir}.`);
    return 0;
  }
  print(
    ctx,
    table(
      runs.map((r) => summaryRow(r.record)),
      ['id', 'ticket', 'outcome', 'attempts', 'duration', 'tokens', 'applied'],
    ),
  );
  return 0;
}

async function attemptFiles(run: StoredRun): Promise<string[]> {
  try {
    return (await readdir(join(run.dir, 'attempts'))).sort((a, b) => Number(a) - Number(b));
  } catch {
    return [];
  }
}

export async function inspectCommand(
  ctx: CliContext,
  ref: string,
  options: RunsLocation & AttemptChoice & EngineChoice & { json?: boolean },
): Promise<number> {
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
    if (!attemptDirs.includes(options.attempt)) {
      throw new UsageError(
        `run ${record.id} has no attempt ${options.attempt} (attempts: ${attemptDirs.join(', ') || 'none'})`,
      );
    }
    shown = options.attempt;
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
    `  ticket    ${record.ticket.id}: ${record.ticket.title ?? ''}`,
    `  catalog   ${record.catalog.name} (${record.catalog.hash.slice(0, 12)})`,
    `  model     ${record.provider.name} ${record.provider.model}${record.checker ? `; checker ${record.checker.name} ${record.checker.model}` : ''}`,
    `  image     ${record.image ? `${record.image.tag} ${record.image.id.slice(7, 19)}${record.image.buildNetwork ? ' (built with network)' : ''}` : '-'}`,
    ...(record.engine && record.engine !== 'local' ? [`  engine    ${record.engine}`] : []),
    `  baseline  ${record.baseline ? `${record.baseline.brokenCommand ? `the test command did not run the tests: ${record.baseline.brokenCommand.reason}` : record.baseline.failing ? 'tests fail' : 'tests pass'}${record.baseline.reusedFrom ? ` (reused from ${record.baseline.reusedFrom})` : ''}` : '-'}`,
    `  outcome   ${record.outcome}${record.message ? ` — ${record.message}` : ''}`,
    `  duration  ${record.durationMs === undefined ? '-' : formatDuration(record.durationMs)}, ${record.turns} turns, ${record.tokens.input}+${record.tokens.output} tokens`,
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
  for (const c of containers.filter((k) => k.exists && /^attempt-\d+$/.test(k.role))) {
    const n = c.role.slice('attempt-'.length);
    lines.push(
      `  attempt ${n}: sandbox-harness shell ${record.id} --attempt ${n}    sandbox-harness rerun-tests ${record.id} --attempt ${n}`,
    );
  }
  print(ctx, lines.join('\n'));
  const diff = finalPatch ?? attemptPatch;
  if (diff) print(ctx, `\n${finalPatch ? 'final patch' : `patch of attempt ${shown}`}:\n${diff}`);
  if (rejection) print(ctx, `\nwhy attempt ${shown} was rejected:\n${rejection}`);
  if (testResults) print(ctx, `\n${testResultLines(testResults, shown ?? '?').join('\n')}`);
  if (testOutput) {
    const tailText = testOutput.length > 3000 ? `...\n${testOutput.slice(-3000)}` : testOutput;
    print(ctx, `\ntest output (attempt ${shown}):\n${tailText}`);
  }
  return 0;
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
function testResultLines(results: StoredResults, attempt: string): string[] {
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

export interface LoggedEvent {
  time: string;
  kind: string;
  attempt?: number;
  trial?: string;
  turn?: number;
  tool?: string;
  toolUseId?: string;
  durationMs?: number;
  exitCode?: number;
  isError?: boolean;
  tokens?: { input: number; output: number };
  status?: string;
  message?: string;
  agent?: string;
  parent?: string;
}

/** A call's identity in a log: tool-use ids repeat across attempts and trials (cassettes reuse them). */
function callKey(e: LoggedEvent, id: string | undefined): string {
  return JSON.stringify([e.trial ?? null, e.attempt ?? null, id ?? null]);
}

/**
 * The event log as text. A sub-agent's events (they carry `parent`, the id of the `delegate`
 * call that started it) are shown indented under that call's line, although they were
 * written before it (the call's line is written when it ends); those of a call that never
 * ended stay where they are, indented under a note.
 */
export function formatEventLog(events: readonly LoggedEvent[]): string[] {
  // A sub-agent's events belong to the next call with their key: ids can repeat in one log.
  const owner = new Map<number, number>();
  const pending = new Map<string, number[]>();
  events.forEach((e, i) => {
    if (e.kind === 'tool_call' && e.toolUseId !== undefined) {
      const key = callKey(e, e.toolUseId);
      for (const child of pending.get(key) ?? []) owner.set(child, i);
      pending.delete(key);
    }
    if (e.parent !== undefined) {
      const key = callKey(e, e.parent);
      pending.set(key, [...(pending.get(key) ?? []), i]);
    }
  });
  const children = new Map<number, number[]>();
  for (const [child, parent] of owner) children.set(parent, [...(children.get(parent) ?? []), child]);

  const start = events[0] ? Date.parse(events[0].time) : 0;
  const lines: string[] = [];
  const show = (i: number, depth: number): void => {
    const e = events[i]!;
    const since = Date.parse(e.time) - start;
    // `-` for a time that cannot be placed (unreadable, or before the first event).
    const offset = (since >= 0 ? `+${formatDuration(since)}` : '-').padStart(8);
    const where = [e.attempt !== undefined ? `a${e.attempt}` : '', e.turn !== undefined ? `t${e.turn}` : '']
      .filter(Boolean)
      .join(' ');
    const facts = [
      e.tool,
      e.status,
      e.exitCode !== undefined ? `exit ${e.exitCode}` : '',
      e.isError ? 'error' : '',
      e.durationMs !== undefined ? formatDuration(e.durationMs) : '',
      e.tokens ? `${e.tokens.input}+${e.tokens.output} tok` : '',
      e.message ?? '',
    ]
      .filter(Boolean)
      .join('  ');
    const indent = '  '.repeat(depth);
    lines.push(`${offset}  ${indent}${e.kind.padEnd(14)} ${where.padEnd(7)} ${facts}`);
    // Ownership only points forward, so this recursion ends.
    for (const child of children.get(i) ?? []) show(child, depth + 1);
  };
  let unfinished: string | undefined;
  events.forEach((e, i) => {
    if (owner.has(i)) return;
    if (e.parent === undefined) {
      unfinished = undefined;
      show(i, 0);
      return;
    }
    const key = callKey(e, e.parent);
    if (unfinished !== key) {
      lines.push(`${' '.repeat(10)}${e.agent ?? 'sub-agent'} of call ${e.parent} (the call did not finish):`);
      unfinished = key;
    }
    show(i, 1);
  });
  return lines;
}

/** A proxy log line as read back (the proxy's own shape, less the address it connected to). */
type EgressLine = Omit<EgressLogEntry, 'address'>;

/** An egress log line as recorded; anything else in the file (a torn line, junk) is skipped. */
function egressLine(value: unknown): EgressLine | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const text = (x: unknown) => (typeof x === 'string' ? x.slice(0, 300) : undefined);
  const count = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
  const time = text(v.time);
  const host = text(v.host);
  if (time === undefined || host === undefined || typeof v.allowed !== 'boolean') return undefined;
  const reason = text(v.reason);
  return {
    time,
    method: text(v.method) ?? '',
    host,
    port: count(v.port),
    allowed: v.allowed,
    rule: text(v.rule) ?? '',
    ...(reason !== undefined ? { reason } : {}),
    bytesOut: count(v.bytesOut),
    bytesIn: count(v.bytesIn),
  };
}

/** Every egress sandbox's proxy log of a run, in the order its sandboxes were made. */
export async function readEgressLogs(
  run: StoredRun,
): Promise<Array<{ role: string; entries: EgressLine[] }>> {
  const logs: Array<{ role: string; entries: EgressLine[] }> = [];
  for (const container of run.record.containers) {
    if (!container.egress) continue;
    const text = (await readRunFile(run, container.egress.file)) ?? '';
    const entries: EgressLine[] = [];
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      try {
        const entry = egressLine(JSON.parse(line));
        if (entry) entries.push(entry);
      } catch {
        // A torn line is skipped.
      }
    }
    logs.push({ role: container.role, entries });
  }
  return logs;
}

export function formatEgressLine(role: string, e: EgressLine): string {
  // eslint-disable-next-line no-control-regex
  const clean = (s: string) => s.replace(/[\x00-\x1f\x7f]/g, '?');
  const verdict = e.allowed ? 'allowed' : 'denied ';
  const what = `${clean(e.method)} ${clean(e.host)}${e.port ? `:${e.port}` : ''}`;
  const detail = e.allowed
    ? `${clean(e.rule)}, ${e.bytesOut} B out, ${e.bytesIn} B in`
    : clean(e.reason ?? e.rule);
  return `${e.time} [egress ${role}] ${verdict} ${what}  ${detail}`;
}

export async function logsCommand(
  ctx: CliContext,
  ref: string,
  options: RunsLocation & { json?: boolean; verbose?: boolean },
): Promise<number> {
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const text = (await readRunFile(run, 'events.jsonl')) ?? '';
  const events: LoggedEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line) as LoggedEvent);
    } catch {
      // A torn last line (the process was killed mid-write) is skipped.
    }
  }
  if (options.json) {
    printJson(ctx, events);
    return 0;
  }
  for (const line of formatEventLog(events)) print(ctx, line);
  for (const log of await readEgressLogs(run)) {
    for (const entry of log.entries) print(ctx, formatEgressLine(log.role, entry));
  }
  if (options.verbose) {
    const transcript = await readRunFile(run, 'transcript.json');
    let parsed: unknown;
    try {
      parsed = transcript === undefined ? undefined : JSON.parse(transcript);
    } catch {
      parsed = undefined;
    }
    print(ctx, '\nconversation:');
    for (const line of formatConversation(parsed)) print(ctx, line);
  }
  return 0;
}

/** The kept attempt sandbox of a run: of attempt N when asked, else of the last attempt that kept one. */
function keptAttemptSandbox(run: StoredRun, choice: AttemptChoice): AttachRequest {
  const kept = run.record.containers.filter((c) => c.kept && /^attempt-\d+$/.test(c.role));
  let container;
  if (choice.attempt !== undefined) {
    const n = Number(choice.attempt);
    if (!Number.isInteger(n) || n < 1) {
      throw new UsageError(`--attempt: expected an attempt number (1, 2, ...), got "${choice.attempt}"`);
    }
    container = kept.find((c) => c.role === `attempt-${n}`);
    if (!container) {
      const have = kept.map((c) => c.role.replace('attempt-', '')).join(', ') || 'none';
      throw new UsageError(`run ${run.record.id} kept no sandbox of attempt ${n} (kept attempts: ${have})`);
    }
  } else {
    container = kept[kept.length - 1];
  }
  if (!container) {
    throw new UsageError(
      `run ${run.record.id} kept no container (outcome ${run.record.outcome}, keep policy ${run.record.keep})`,
      {
        hint: 'Containers are kept for failed runs by default; run `fix` again with --keep always to keep them for every run.',
      },
    );
  }
  return { id: container.id, runId: run.record.id };
}

/** What inspect says of a kept container the engine no longer has. */
function removedStatus(status: string): string {
  return status === 'removed' ? REMOVED : status;
}

const REMOVED = 'removed (sandbox-harness gc, or by hand)';

/**
 * The kept container is still there, or a usage error that says it was removed: a container
 * `gc` took away is not the engine failing (exit 3), it is a request for what no longer is.
 */
async function keptContainerPresent(
  backend: SandboxBackend,
  request: AttachRequest,
  run: StoredRun,
): Promise<void> {
  const state = await backend.state(request);
  if (state.exists) return;
  throw new UsageError(
    `container ${request.id.slice(0, 12)} of run ${run.record.id} was ${REMOVED}; there is nothing to open`,
    {
      hint: '`sandbox-harness inspect` still shows the record, patches and test output; `fix --keep always` keeps containers of every run.',
    },
  );
}

export async function rerunTestsCommand(
  ctx: CliContext,
  ref: string,
  options: RunsLocation & AttemptChoice & EngineChoice & { json?: boolean },
): Promise<number> {
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const request = keptAttemptSandbox(run, options);
  const id = request.id;
  const backend = await backendOfRun(ctx, run.record, options);
  await keptContainerPresent(backend, request, run);
  const sandbox = await backend.attach(request);
  try {
    if (!options.json) note(ctx, `running the tests again in kept container ${id.slice(0, 12)} ...`);
    const result = await runTestLayers(sandbox, run.record.testCommand, {
      timeoutMs: 15 * 60_000,
      signal: ctx.signal,
    });
    if (options.json) {
      printJson(ctx, { run: run.record.id, container: id, passed: result.passed, layers: result.layers });
    } else {
      print(ctx, formatTestRun(result));
      print(
        ctx,
        result.passed
          ? 'tests pass in the kept container'
          : `tests fail (layer ${result.failingLayer?.name})`,
      );
    }
    return result.passed ? 0 : 1;
  } finally {
    await backend.release(request);
  }
}

export async function shellCommand(
  ctx: CliContext,
  ref: string,
  options: RunsLocation & AttemptChoice & EngineChoice,
): Promise<number> {
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const request = keptAttemptSandbox(run, options);
  const id = request.id;
  const backend = await backendOfRun(ctx, run.record, options);
  // The record is only a claim: the container must be this run's sandbox before anything else,
  // so a forged record learns nothing about someone else's container, terminal or not.
  await keptContainerPresent(backend, request, run);
  if (!process.stdin.isTTY) {
    throw new UsageError('`shell` needs an interactive terminal', {
      hint: `Use \`docker exec -it -u 1000 ${id.slice(0, 12)} sh\` from a script, or run it in a terminal.`,
    });
  }
  const where = backend.engine === 'local' ? '' : ` on engine ${backend.engine}`;
  note(
    ctx,
    `shell in kept container ${id.slice(0, 12)}${where} (run ${run.record.id}); no network; exit to leave`,
  );
  try {
    return await backend.interactiveShell(request, { stdin: process.stdin, stdout: process.stdout });
  } finally {
    await backend.release(request);
  }
}
