/**
 * `fix`: from a ticket to a verified, allowlisted patch (or to a kept container and a run
 * record that show what happened). The steps follow DESIGN.md's flow: validate, image,
 * baseline, attempts (agent -> change set -> gate -> verification in a fresh container),
 * outcome, apply. Every dependency that touches the outside world is injected so that the
 * loop itself is unit-testable; the CLI passes the real ones.
 */
import { lstat, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { HarnessError, Interrupted, errorMessage, exitCodeFor, EXIT_CODES } from '../errors.js';
import {
  loadCatalog,
  catalogSandboxFile,
  catalogSandboxEnv,
  catalogPathsInRepo,
  resourcesFromCatalog,
  CATALOG_SANDBOX_PATH,
} from '../catalog/load.js';
import type { LoadedCatalog } from '../catalog/load.js';
import { testLayers, type Catalog } from '../catalog/schema.js';
import { loadTicket, type Ticket } from '../catalog/ticket.js';
import { readRepoFile } from '../repo-files.js';
import { createAllowlist } from '../changes/allowlist.js';
import {
  collectChangeSet,
  gateChangeSet,
  normalisedMode,
  type ChangeSet,
  type PristineSource,
} from '../changes/change-set.js';
import { changeSetPatch } from '../changes/patch.js';
import { applyChangeSet, sha256 } from '../changes/apply.js';
import { chooseProvider, contextWindowTokens, createProvider } from '../llm/registry.js';
import { RecordingProvider } from '../llm/recording.js';
import type { Message, ModelProvider } from '../llm/types.js';
import { runAgentLoop, type AgentLoopResult } from '../agent/loop.js';
import { buildFirstUserMessage, buildSystemPrompt } from '../agent/prompt.js';
import { createDefaultToolRegistry } from '../agent/tools/index.js';
import { JsonlEventSink, fanOut, type EventSink } from '../agent/events.js';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../sandbox/types.js';
import { shellQuote } from '../sandbox/shell.js';
import {
  RunDir,
  runsDirFor,
  type AttemptRecord,
  type AttemptVerdict,
  type Outcome,
  type RunRecord,
} from '../runs/record.js';
import { silentProgress, type ProgressSink } from './progress.js';
import { failureFeedback, formatTestRun, runTestLayers, type TestRun } from './test-layers.js';
import { harnessVersion } from '../version.js';

export type KeepPolicy = 'on-failure' | 'always' | 'never';

export interface RepoImage {
  tag: string;
  imageId: string;
  reused: boolean;
  /** Repo-relative path -> sha256 and mode of what the image holds at /workspace. */
  snapshot: ReadonlyMap<string, SnapshotFile>;
}

export interface SnapshotFile {
  sha256: string;
  mode: number;
  /** A symlink's sha256 is of its target text; its content is never read through it. */
  type?: 'file' | 'symlink';
}

export interface ImageRequest {
  repoDir: string;
  catalog: LoadedCatalog;
  rebuild: boolean;
  logFile: string;
  onProgress: (line: string) => void;
  signal?: AbortSignal;
}

export interface FixDeps {
  backend: SandboxBackend;
  /** Checks the engine answers before anything is written. */
  ping: () => Promise<void>;
  image: (request: ImageRequest) => Promise<RepoImage>;
  /** Default: the registry's createProvider. */
  createProvider?: typeof createProvider;
}

export interface FixOptions {
  ticket: string;
  catalogFile: string;
  repoDir?: string;
  provider?: string;
  model?: string;
  cassette?: string;
  record?: string;
  maxAttempts?: number;
  keep: KeepPolicy;
  apply: boolean;
  force: boolean;
  rebuild: boolean;
  /** Where run records go; default `<repo>/.sandbox-harness/runs`. */
  runsDir?: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  progress?: ProgressSink;
  readStdin: () => Promise<string>;
  /** Bytes of failing test output fed back to the model. */
  feedbackBytes?: number;
  /** Extra events sink (evals use it to time trials). */
  events?: EventSink;
  /** Run id to use (evals choose their own). */
  runId?: string;
}

export interface FixResult {
  runId: string;
  runDir: string;
  outcome: Outcome;
  exitCode: number;
  record: RunRecord;
  patch?: string;
  error?: HarnessError;
}

const DEFAULT_FEEDBACK_BYTES = 4096;

function agentVerdict(status: AgentLoopResult['status']): AttemptVerdict | undefined {
  switch (status) {
    case 'max_turns':
      return 'max-turns';
    case 'token_budget':
      return 'token-budget';
    case 'timeout':
      return 'timeout';
    case 'interrupted':
      return 'interrupted';
    default:
      return undefined;
  }
}

/** Everything before the first write: catalog, ticket, provider. Errors here leave no trace. */
async function prepare(options: FixOptions, deps: FixDeps) {
  const catalog = await loadCatalog(options.catalogFile, { cwd: options.cwd });
  const repoDir = options.repoDir ? resolve(options.cwd, options.repoDir) : catalog.repoDir;
  const ticket = await loadTicket(options.ticket, {
    catalogDir: catalog.dir,
    repoDir,
    readStdin: options.readStdin,
    cwd: options.cwd,
  });
  const choice = chooseProvider({
    flagProvider: options.provider ?? (options.cassette ? 'replay' : undefined),
    flagModel: options.model,
    env: options.env,
    catalogProvider: catalog.catalog.provider?.name,
    catalogModel: catalog.catalog.provider?.model,
  });
  const make = deps.createProvider ?? createProvider;
  // The event log does not exist yet; retries are reported to it once it does.
  const retries: { sink?: EventSink } = {};
  let provider: ModelProvider = await make({
    onRetry: (info) =>
      retries.sink?.emit({
        kind: 'model_retry',
        message: `try ${info.attempt} failed (${info.error.message}); retrying in ${info.delayMs} ms`,
        durationMs: info.delayMs,
      }),
    name: choice.name,
    ...(choice.model ? { model: choice.model } : {}),
    ...(options.cassette ? { cassette: resolve(options.cwd, options.cassette) } : {}),
    env: options.env,
  });
  let recorder: RecordingProvider | undefined;
  if (options.record) {
    recorder = new RecordingProvider(provider);
    provider = recorder;
  }
  return { catalog, repoDir, ticket, provider, recorder, retries };
}

export async function runFix(options: FixOptions, deps: FixDeps): Promise<FixResult> {
  const progress = options.progress ?? silentProgress;
  progress.phase('validate', 'checking catalog, ticket and model provider');
  const { catalog, repoDir, ticket, provider, recorder, retries } = await prepare(options, deps);
  await deps.ping();
  progress.end(`${catalog.catalog.name}: ticket ${ticket.id}, ${provider.name} ${provider.model}`);

  const run = await RunDir.create(options.runsDir ?? runsDirFor(repoDir), options.runId);
  const started = Date.now();
  const layers = testLayers(catalog.catalog);
  const agentConfig = catalog.catalog.agent;
  const maxAttempts = options.maxAttempts ?? agentConfig.maxAttempts;
  const record: RunRecord = {
    id: run.id,
    version: 1,
    harnessVersion: harnessVersion(),
    startedAt: new Date(started).toISOString(),
    outcome: 'running',
    ticket: {
      id: ticket.id,
      title: ticket.title,
      source: ticket.source,
      ...(ticket.file ? { file: ticket.file } : {}),
    },
    catalog: { name: catalog.catalog.name, file: catalog.file, hash: catalog.hash },
    repoDir,
    provider: { name: provider.name, model: provider.model },
    keep: options.keep,
    apply: options.apply,
    attempts: [],
    tokens: { input: 0, output: 0 },
    turns: 0,
    containers: [],
    testCommand: layers.map((l) => ({ name: l.name, command: l.command })),
  };
  await run.writeRecord(record);
  await run.writeFile('ticket.md', `# ${ticket.id}: ${ticket.title}\n\n${ticket.body}\n`);

  const events = fanOut(
    new JsonlEventSink(run.path('events.jsonl')),
    ...(options.events ? [options.events] : []),
    {
      emit(event) {
        if (event.kind === 'tool_call' && event.tool)
          progress.detail(`turn ${event.turn ?? '?'}: ${event.tool}`);
        else if (event.kind === 'model_call') progress.detail(`turn ${event.turn ?? '?'}: model answered`);
      },
    },
  );

  retries.sink = events;

  // The run-wide deadline and Ctrl-C share one signal.
  const controller = new AbortController();
  const onAbort = () => controller.abort(new Interrupted());
  if (options.signal.aborted) onAbort();
  options.signal.addEventListener('abort', onAbort, { once: true });
  const runTimer = setTimeout(
    () => controller.abort(new HarnessError('RUN_TIMEOUT', 'usage', 'run time limit passed')),
    catalog.catalog.sandbox.timeouts.runSec * 1000,
  );
  const signal = controller.signal;

  const live: { sandbox: Sandbox; role: string }[] = [];
  const transcript: { attempt: number; system: string; messages: Message[] }[] = [];
  let finalChangeSet: ChangeSet | undefined;
  let error: HarnessError | undefined;

  const finish = async (outcome: Outcome, message: string): Promise<FixResult> => {
    clearTimeout(runTimer);
    options.signal.removeEventListener('abort', onAbort);
    const failed = outcome !== 'ready-for-review' && outcome !== 'nothing-to-fix';
    const keep = options.keep === 'always' || (options.keep === 'on-failure' && failed);
    for (const { sandbox, role } of live) {
      try {
        await sandbox.dispose({ keep });
        record.containers.push({ role, id: sandbox.id, kept: keep });
      } catch (disposeError) {
        events.emit({ kind: 'cleanup_failed', message: `${role}: ${errorMessage(disposeError)}` });
      }
    }
    const lastAttempt = record.attempts[record.attempts.length - 1];
    if (lastAttempt) {
      for (const c of lastAttempt.containers)
        c.kept = record.containers.find((k) => k.id === c.id)?.kept ?? false;
    }
    record.outcome = outcome;
    record.message = message;
    record.finishedAt = new Date().toISOString();
    record.durationMs = Date.now() - started;
    let exitCode: number;
    if (error) exitCode = exitCodeFor(error);
    else if (outcome === 'interrupted') exitCode = EXIT_CODES.interrupted;
    else if (outcome === 'ready-for-review')
      exitCode = record.applyError ? EXIT_CODES.taskFailed : EXIT_CODES.ok;
    else if (outcome === 'nothing-to-fix') exitCode = EXIT_CODES.ok;
    else exitCode = EXIT_CODES.taskFailed;
    record.exitCode = exitCode;
    await run.writeFile('transcript.json', `${JSON.stringify(transcript, null, 2)}\n`);
    if (recorder && options.record) await recorder.save(resolve(options.cwd, options.record));
    await run.writeRecord(record);
    events.emit({ kind: 'run_end', status: outcome, durationMs: record.durationMs, message });
    const patch = finalChangeSet ? changeSetPatch(finalChangeSet) : undefined;
    return {
      runId: run.id,
      runDir: run.dir,
      outcome,
      exitCode,
      record,
      ...(patch ? { patch } : {}),
      ...(error ? { error } : {}),
    };
  };

  const disposeNow = async (sandbox: Sandbox) => {
    const index = live.findIndex((l) => l.sandbox === sandbox);
    if (index >= 0) {
      const [entry] = live.splice(index, 1);
      await sandbox.dispose({ keep: options.keep === 'always' });
      record.containers.push({ role: entry!.role, id: sandbox.id, kept: options.keep === 'always' });
    }
  };

  try {
    // ---- image --------------------------------------------------------------------
    progress.phase('image', 'sandbox image');
    const image = await deps.image({
      repoDir,
      catalog,
      rebuild: options.rebuild,
      logFile: run.path('image-build.log'),
      onProgress: (line) => progress.detail(line.slice(0, 120)),
      signal,
    });
    record.image = { tag: image.tag, id: image.imageId, reused: image.reused };
    progress.end(`${image.tag}${image.reused ? ' (cached)' : ' (built)'}`);
    events.emit({ kind: 'image', message: image.tag, status: image.reused ? 'reused' : 'built' });

    const catalogFile = catalogSandboxFile(catalog);
    const sandboxSpec = (role: string): SandboxSpec => ({
      image: image.tag,
      runId: run.id,
      role,
      env: { ...catalog.catalog.sandbox.env, ...catalogSandboxEnv() },
      resources: resourcesFromCatalog(catalog.catalog),
      files: [catalogFile],
      extraLabels: { 'sandbox-harness.keep': options.keep },
    });
    const create = async (role: string) => {
      const sandbox = await deps.backend.create(sandboxSpec(role));
      live.push({ sandbox, role });
      return sandbox;
    };
    const testTimeoutMs = catalog.catalog.sandbox.timeouts.testSec * 1000;

    // ---- baseline -----------------------------------------------------------------
    progress.phase('baseline', 'baseline: running the tests on the untouched repo');
    const baselineBox = await create('baseline');
    const baseline = await runTestLayers(baselineBox, layers, { timeoutMs: testTimeoutMs, signal });
    await run.writeFile('baseline-test-output.txt', formatTestRun(baseline));
    events.emit({
      kind: 'baseline',
      status: baseline.passed ? 'passing' : 'failing',
      durationMs: baseline.durationMs,
      exitCode: baseline.failingLayer?.exitCode ?? 0,
    });
    await disposeNow(baselineBox);
    record.baseline = {
      failing: !baseline.passed,
      ...(baseline.failingLayer ? { failingLayer: baseline.failingLayer.name } : {}),
      durationMs: baseline.durationMs,
    };
    progress.end(
      baseline.passed
        ? 'tests pass already'
        : `tests fail (${baseline.failingLayer?.name}), as the ticket says`,
    );
    if (baseline.passed && !options.force) {
      return await finish(
        'nothing-to-fix',
        'The tests already pass on the untouched repo, so there is nothing to verify a fix against. Use --force to run the agent anyway.',
      );
    }

    // ---- attempts -----------------------------------------------------------------
    const repoAgentsMd = (
      await readRepoFile(repoDir, 'AGENTS.md', 'AGENTS.md', { optional: true })
    )?.toString('utf8');
    const system = buildSystemPrompt({
      ...(repoAgentsMd ? { repoAgentsMd } : {}),
      rules: Object.entries(catalog.catalog.rules).map(([name, rule]) => ({ name, ...rule })),
      editableFiles: agentConfig.editableFiles,
      testCommands: layers.map((l) => l.command),
      catalogPathInSandbox: CATALOG_SANDBOX_PATH,
    });
    const allowlist = createAllowlist({
      editable: agentConfig.editableFiles,
      neverEditable: await catalogPathsInRepo(catalog),
    });
    const pristine = pristineSource(repoDir, image.snapshot);
    const tools = createDefaultToolRegistry({
      isEditable: (path) => allowlist.check(path).allowed,
      editableGlobs: agentConfig.editableFiles,
      limits: {
        defaultCommandTimeoutSec: catalog.catalog.sandbox.timeouts.commandSec,
      },
    });
    const tokenBudget = agentConfig.tokenBudget;
    const contextWindow = contextWindowTokens(provider.name, options.env);
    let feedback: string | undefined;
    let lastVerdict: AttemptVerdict | undefined;

    for (let n = 1; n <= maxAttempts; n++) {
      // Containers of earlier attempts are not needed any more.
      for (const { sandbox } of [...live]) await disposeNow(sandbox);
      const attemptStarted = Date.now();
      progress.phase('attempt', `attempt ${n}/${maxAttempts}`);
      events.emit({ kind: 'attempt_start', attempt: n });
      const box = await create(`attempt-${n}`);
      const attempt: AttemptRecord = {
        n,
        verdict: 'error',
        turns: 0,
        inputTokens: 0,
        outputTokens: 0,
        durationMs: 0,
        changedFiles: [],
        containers: [{ role: `attempt-${n}`, id: box.id, kept: false }],
      };
      record.attempts.push(attempt);
      const usedTokens = record.tokens.input + record.tokens.output;
      const firstUserMessage = buildFirstUserMessage({
        ticket: { id: ticket.id, title: ticket.title, body: ticket.body },
        ...(feedback ? { feedback } : {}),
      });
      const loop = await runAgentLoop({
        sandbox: box,
        provider,
        tools,
        system,
        firstUserMessage,
        limits: {
          maxTurns: agentConfig.maxTurns,
          ...(tokenBudget ? { tokenBudget: Math.max(0, tokenBudget - usedTokens) } : {}),
          attemptDeadlineMs: catalog.catalog.sandbox.timeouts.attemptSec * 1000,
        },
        events,
        signal,
        attempt: n,
        ...(contextWindow ? { contextWindowTokens: contextWindow } : {}),
      });
      transcript.push({ attempt: n, system, messages: loop.messages });
      attempt.turns = loop.turns;
      attempt.agentStatus = loop.status;
      attempt.inputTokens = loop.usage.inputTokens;
      attempt.outputTokens = loop.usage.outputTokens;
      record.turns += loop.turns;
      record.tokens.input += loop.usage.inputTokens;
      record.tokens.output += loop.usage.outputTokens;
      if (loop.status === 'interrupted' || signal.aborted) {
        attempt.verdict = 'interrupted';
        attempt.durationMs = Date.now() - attemptStarted;
        throw signal.reason instanceof HarnessError ? signal.reason : new Interrupted();
      }
      progress.end(`agent ${loop.status} after ${loop.turns} turns`);

      // ---- change set and gate ----------------------------------------------------
      progress.phase('verify', `attempt ${n}: checking the change`);
      const changeSet = await collectChangeSet(box, {
        allowlist,
        ignore: agentConfig.ignoreChanges,
        pristine,
      });
      attempt.changedFiles = changeSet.entries.map((e) => e.path);
      const patch = changeSetPatch(changeSet);
      if (patch) await run.writeFile(`attempts/${n}/patch.diff`, patch);
      const gate = gateChangeSet(changeSet);
      events.emit({
        kind: 'gate',
        attempt: n,
        status: gate.ok ? 'allowed' : 'rejected',
        message: gate.ok
          ? `${changeSet.entries.length} changed file(s)`
          : gate.offending.map((o) => `${o.path}: ${o.why}`).join('; '),
      });
      const finishAttempt = (verdict: AttemptVerdict, nextFeedback?: string) => {
        attempt.verdict = verdict;
        attempt.durationMs = Date.now() - attemptStarted;
        if (nextFeedback) attempt.feedback = nextFeedback;
        lastVerdict = verdict;
        feedback = nextFeedback;
        events.emit({ kind: 'attempt_end', attempt: n, status: verdict, durationMs: attempt.durationMs });
      };
      if (!gate.ok) {
        await run.writeFile(`attempts/${n}/rejection.txt`, `${gate.reason}\n`);
        progress.end(`rejected: ${gate.offending.map((o) => o.path).join(', ')}`);
        finishAttempt('rejected', gate.reason);
        await run.writeRecord(record);
        continue;
      }
      if (changeSet.entries.length === 0) {
        const limitVerdict = agentVerdict(loop.status);
        const text =
          limitVerdict === undefined
            ? `You made no change to the editable files (${agentConfig.editableFiles.join(', ')}), so there was nothing to verify. The tests still fail.`
            : `You stopped (${loop.status.replace('_', ' ')}) without changing any editable file (${agentConfig.editableFiles.join(', ')}). Work in smaller steps and edit the code sooner.`;
        progress.end('no change to verify');
        finishAttempt(limitVerdict ?? 'no-changes', text);
        await run.writeRecord(record);
        continue;
      }

      // ---- verification in a fresh container from the pristine image --------------
      progress.detail(`attempt ${n}: verifying in a fresh sandbox`);
      const verifyBox = await create(`verify-${n}`);
      attempt.containers.push({ role: `verify-${n}`, id: verifyBox.id, kept: false });
      for (const entry of changeSet.entries) {
        if (entry.kind === 'deleted') {
          await verifyBox.exec(`rm -f -- ${shellQuote(entry.path)}`, { timeoutMs: 30_000, signal });
        } else if (entry.content) {
          await verifyBox.writeFile(entry.path, entry.content, { mode: normalisedMode(entry.mode ?? 0o644) });
        }
      }
      const verification: TestRun = await runTestLayers(verifyBox, layers, {
        timeoutMs: testTimeoutMs,
        signal,
        onLayer: (layer) => progress.detail(`attempt ${n}: verifying (${layer.name}: ${layer.command})`),
      });
      await run.writeFile(`attempts/${n}/test-output.txt`, formatTestRun(verification));
      events.emit({
        kind: 'verify',
        attempt: n,
        status: verification.passed ? 'passed' : 'failed',
        durationMs: verification.durationMs,
        exitCode: verification.failingLayer?.exitCode ?? 0,
        ...(verification.failingLayer ? { message: `failing layer ${verification.failingLayer.name}` } : {}),
      });
      if (verification.passed) {
        progress.end(`verified: ${changeSet.entries.length} file(s), tests pass in a fresh sandbox`);
        finishAttempt('passed');
        finalChangeSet = changeSet;
        break;
      }
      attempt.failingLayer = verification.failingLayer?.name;
      progress.end(`tests fail in a fresh sandbox (${verification.failingLayer?.name})`);
      finishAttempt(
        'tests-failed',
        failureFeedback(verification, options.feedbackBytes ?? DEFAULT_FEEDBACK_BYTES, layers.length),
      );
      await run.writeRecord(record);
    }

    if (!finalChangeSet) {
      const outcome: Outcome = lastVerdict === 'rejected' ? 'rejected' : 'failed';
      return await finish(
        outcome,
        `No verified fix after ${record.attempts.length} attempt(s); the last was ${lastVerdict ?? 'not made'}.`,
      );
    }

    // ---- outcome --------------------------------------------------------------------
    const patch = changeSetPatch(finalChangeSet);
    record.patchFile = await run.writeFile('patch.diff', patch);
    if (options.apply) {
      progress.phase('apply', 'applying the verified patch to the host repo');
      const expected = new Map<string, string | null>();
      for (const entry of finalChangeSet.entries)
        expected.set(entry.path, image.snapshot.get(entry.path)?.sha256 ?? null);
      try {
        await applyChangeSet(repoDir, finalChangeSet, { expected });
        record.applied = true;
        progress.end(`${finalChangeSet.entries.length} file(s) written`);
      } catch (applyError) {
        record.applied = false;
        record.applyError = errorMessage(applyError);
        progress.end(`not applied: ${record.applyError}`);
      }
    } else {
      record.applied = false;
    }
    return await finish(
      'ready-for-review',
      record.applyError
        ? `Verified, but not applied: ${record.applyError}. The patch is saved at ${record.patchFile}.`
        : options.apply
          ? 'Verified fix applied to the working tree for review (nothing committed).'
          : `Verified fix saved at ${record.patchFile} (not applied: --no-apply).`,
    );
  } catch (caught) {
    const interrupted =
      caught instanceof Interrupted || (signal.aborted && signal.reason instanceof Interrupted);
    if (interrupted) {
      const last = record.attempts[record.attempts.length - 1];
      if (last && last.verdict === 'error') last.verdict = 'interrupted';
      return await finish('interrupted', 'Interrupted; the host repo was not touched.');
    }
    error =
      caught instanceof HarnessError
        ? caught
        : new HarnessError('INTERNAL', 'internal', errorMessage(caught), { cause: caught });
    if (signal.aborted && signal.reason instanceof HarnessError && signal.reason.code === 'RUN_TIMEOUT') {
      error = signal.reason;
    }
    return await finish('error', error.message);
  }
}

/**
 * What the sandbox was built from: the host file when it still has the snapshot's hash,
 * else nothing (the apply step refuses such a file anyway, naming it).
 */
function pristineSource(repoDir: string, snapshot: ReadonlyMap<string, SnapshotFile>): PristineSource {
  return {
    async read(path) {
      const entry = snapshot.get(path);
      if (!entry || entry.type === 'symlink') return undefined;
      const stats = await lstat(join(repoDir, path)).catch(() => undefined);
      if (!stats?.isFile()) return undefined;
      const content = await readFile(join(repoDir, path)).catch(() => undefined);
      if (!content || sha256(content) !== entry.sha256) return undefined;
      return { content, mode: entry.mode };
    },
  };
}

export type { Ticket, Catalog };
