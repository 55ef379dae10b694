/**
 * `fix`: from a ticket to a verified, allowlisted patch, or to kept sandboxes and a run
 * record that show what happened. The flow, one function per step:
 *
 *   prepare -> openRun -> resolveImage -> planAttempts -> (baseline || attempts) -> applyVerified -> closeRun
 *
 * Every dependency that touches the outside world comes in through `FixDeps`, so the flow is
 * unit-testable with fakes; the CLI passes the real ones. `closeRun` runs exactly once,
 * whatever happened, and exit codes are the CLI's business (`cli/exit-codes.ts`).
 */
import type { Recovery } from '../changes/apply-change-set.js';
import { resolve } from 'node:path';
import { JsonlEventSink, fanOut } from '../agent/events.js';
import { buildSystemPrompt } from '../agent/prompt.js';
import { createDefaultToolRegistry } from '../agent/tools/index.js';
import {
  catalogSandboxEnv,
  catalogSandboxFile,
  CATALOG_SANDBOX_PATH,
  resourcesFromCatalog,
} from '../catalog/load.js';
import { testLayers, verificationLayers } from '../catalog/schema.js';
import { ticketHeading } from '../catalog/ticket.js';
import { catalogAllowlist } from './catalog-allowlist.js';
import {
  createChangeIgnore,
  gitExcludes,
  ignoreSettings,
  NO_TEST_OUTPUTS,
  pristineGitignores,
} from '../changes/ignore.js';
import { changeSetPatch } from '../changes/patch.js';
import {
  HarnessError,
  Interrupted,
  RunTimeout,
  SandboxUnavailable,
  TestCommandBroken,
  errorMessage,
} from '../errors.js';
import { contextWindowTokens } from '../llm/provider-registry.js';
import type { RunOutcome } from '../outcomes.js';
import { RunDir, runsDirFor, type ContainerRecord, type RunRecord } from '../runs/record.js';
import { RunJournal } from '../runs/journal.js';
import { harnessVersion } from '../version.js';
import { formatUsd } from '../format.js';
import { patchIntoVerification, runAttempt, type AttemptPlan, type AttemptResult } from './attempt.js';
import { baselineKey, runBaseline, testCommandError } from './baseline.js';
import type { BaselineResult } from './baseline-cache.js';
import type { Ending, FixDeps, FixOptions, FixResult, Prepared, Run } from './types.js';
import type { RepoImage } from '../image-context/request.js';
import { catalogImageOptions } from './deps.js';
import { applyVerified } from './apply.js';
import { heldOutPaths, pristineFromHost, readAgentsMd } from './repo-reads.js';
import { prepare } from './prepare.js';
import { loadLibrary } from './read-library.js';
import { continuationFeedback } from './continue.js';
import { buildLines, progressOfEvents, silentProgress, type ProgressSink } from './progress.js';
import { PoolStatusFile } from '../sandbox/pool/pool-status.js';
import { WarmPool, poolCapacity } from '../sandbox/pool/warm-pool.js';
import { SandboxPool } from './sandboxes.js';
import type { InjectedFile, WorkspaceGit } from '../sandbox/types.js';
import { planSteps, stepOfRole } from './steps.js';
import { layerCliAgent } from './cli-agent-step.js';
import { egressSpec } from './egress-phases.js';
import { getsVerifierFiles, loadVerifierFiles } from './verifier-files.js';
import { parallelRound } from './parallel-attempts.js';
import { adoptFork, dropFork, forkKeptSandbox, forkSpec } from './continue-fork.js';
import { dropSetup, prepareSetup, setupSpec } from './setup.js';
import { SetupStates } from './setup-states.js';

export type { FixDeps, FixOptions, FixResult, KeepPolicy } from './types.js';
export type { HostFileState, RepoImage, RepoImageRequest } from '../image-context/request.js';

/** The first attempt stops when the baseline shows the tests already pass. */
class BaselinePasses extends Interrupted {
  constructor() {
    super('the tests already pass on the untouched repo');
  }
}

export async function runFix(options: FixOptions, deps: FixDeps): Promise<FixResult> {
  const progress = options.progress ?? silentProgress;
  // Said directly, not from events: the checks decide whether there is a run (and a journal) at all.
  progress.phase('validate', 'checking catalog, ticket and model provider');
  const prepared = await prepare(options, deps);
  progress.end(
    `${prepared.catalog.catalog.name}: ticket ${prepared.ticket.id}, ${prepared.provider.name} ${prepared.provider.model}`,
  );
  if (prepared.recovered) reportRecovery(prepared.recovered, progress);
  const { run, stopTimer } = await openRun(prepared, options, deps, progress);
  let ending: Ending;
  try {
    ending = await fixTicket(run);
  } catch (error) {
    ending = endingOfError(run, await blameTheEngine(run, error));
  }
  stopTimer();
  return closeRun(run, ending);
}

/** Said directly, not from events: the recovery happens before the run (and its journal) opens. */
function reportRecovery(recovered: Recovery, progress: ProgressSink): void {
  progress.phase('apply', 'undoing an earlier apply to this repo that was interrupted');
  const left = recovered.leftAlone.length > 0 ? `; left as they are: ${recovered.leftAlone.join(', ')}` : '';
  progress.end(`put back ${recovered.restored.length} file(s) as they were${left}`);
}

/** Step 2: the run record, the event log, and one signal for Ctrl-C and the run time limit. */
async function openRun(prepared: Prepared, options: FixOptions, deps: FixDeps, progress: ProgressSink) {
  const { catalog, ticket, repoDir } = prepared;
  // Read before the run folder exists: a bad folder is a configuration error, not a run.
  const verifier = catalog.catalog.agent.verifierFiles;
  const verifierFiles = verifier ? await loadVerifierFiles(catalog.file, verifier) : [];
  const steps = await planSteps(prepared);
  const dir = await RunDir.create(options.runsDir ?? runsDirFor(repoDir), options.runId);
  const started = Date.now();
  const events = fanOut(
    new JsonlEventSink(dir.path('events.jsonl')),
    ...(options.events ? [options.events] : []),
    progressOfEvents(progress),
  );
  prepared.retries.sink = events;
  const journal = new RunJournal(events, dir, openingRecord(prepared, options, deps, dir.id, started));
  const record = journal.record;
  await journal.save();
  await dir.writeFile('ticket.md', `# ${ticketHeading(ticket)}\n\n${ticket.body}\n`);

  const { signal, stopTimer } = runSignal(options, catalog.catalog.sandbox.timeouts.runSec);
  const attemptImage: Run['attemptImage'] = {};
  const run: Run = {
    ...prepared,
    options,
    deps,
    dir,
    record,
    journal,
    events,
    progress,
    signal,
    sandboxes: sandboxPool(prepared, options, deps, {
      current: () => run,
      runId: dir.id,
      record,
      attemptImage,
      verifierFiles: (role) => {
        const step = stepOfRole(role);
        return (step !== undefined ? steps?.[step - 1]?.verifierFiles : undefined) ?? verifierFiles;
      },
    }),
    attemptImage,
    ownSetups: new SetupStates(),
    ...(steps ? { steps } : {}),
    transcript: [],
    started,
  };
  return { run, stopTimer };
}

/** The run's record as it opens: its inputs, providers and settings; nothing measured yet. */
function openingRecord(
  prepared: Prepared,
  options: FixOptions,
  deps: FixDeps,
  id: string,
  started: number,
): RunRecord {
  const { catalog, ticket, provider, repoDir } = prepared;
  return {
    id,
    version: 2,
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
    backend: deps.backend.name,
    engine: deps.backend.engine,
    ...(deps.engineRef ? { engineRef: deps.engineRef } : {}),
    ...(prepared.runtime ? { runtime: prepared.runtime.name } : {}),
    provider: { name: provider.name, model: provider.model },
    agent: prepared.agent.kind.name,
    ...(prepared.checker ? { checker: { name: prepared.checker.name, model: prepared.checker.model } } : {}),
    keep: options.keep,
    apply: options.apply,
    ...(prepared.continuation
      ? {
          continuedFrom: {
            runId: prepared.continuation.runId,
            attempts: prepared.continuation.attemptsBefore,
            ...(prepared.continuation.messages
              ? { seededMessages: prepared.continuation.messages.length }
              : {}),
          },
        }
      : {}),
    ...(prepared.laneProviders ? { parallelAttempts: prepared.laneProviders.length } : {}),
    attempts: [],
    tokens: { input: 0, output: 0 },
    turns: 0,
    containers: [],
    // What the verifications run: the setup's layer first when the catalog has one.
    testCommand: verificationLayers(catalog.catalog).map((l) => ({ name: l.name, command: l.command })),
  };
}

/** One signal for the whole run: the caller's (Ctrl-C, an eval trial's budget) or the run time limit. */
function runSignal(options: FixOptions, runSec: number): { signal: AbortSignal; stopTimer: () => void } {
  const controller = new AbortController();
  // A caller's own limit (an eval trial's time budget) keeps its name; anything else is Ctrl-C.
  const onAbort = () =>
    controller.abort(
      options.signal.reason instanceof HarnessError ? options.signal.reason : new Interrupted(),
    );
  if (options.signal.aborted) onAbort();
  options.signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(
    () => controller.abort(new RunTimeout(`the run time limit (${runSec}s) passed`)),
    runSec * 1000,
  );
  const stopTimer = () => {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', onAbort);
  };
  return { signal: controller.signal, stopTimer };
}

/** The run's sandboxes, each made from the spec of its role (attempt, verify, review, baseline). */
function sandboxPool(
  prepared: Prepared,
  options: FixOptions,
  deps: FixDeps,
  run: {
    /** The run, once it exists (the fork of `--from-sandbox` is made after the pool). */
    current: () => Run;
    runId: string;
    record: RunRecord;
    attemptImage: Run['attemptImage'];
    /** The verifier files of a sandbox role (a step's verification gets its step's). */
    verifierFiles: (role: string) => InjectedFile[];
  },
): SandboxPool {
  const { catalog } = prepared;
  const { record, attemptImage, verifierFiles } = run;
  const catalogFile = catalogSandboxFile(catalog);
  return new SandboxPool(
    options.sharedPool ??
      (options.pool
        ? new WarmPool(deps.backend, {
            capacity: poolCapacity(1, options.maxAttempts ?? 1),
            status: new PoolStatusFile('fix', deps.backend.engine),
          })
        : deps.backend),
    (role) => ({
      // The agent's sandboxes (and the setup's, which they start from) come from the image
      // with a git repository of the pristine tree.
      ...((role.startsWith('attempt-') || role === 'setup') && attemptImage.tag
        ? { image: attemptImage.tag, scanAgainst: record.image?.tag ?? '' }
        : { image: record.image?.tag ?? '' }),
      ...setupSpec(run.current(), role, record.image?.tag ?? ''),
      ...forkSpec(run.current(), role, record.image?.tag ?? ''),
      runId: run.runId,
      role,
      // The agent loop's calls go over it; a CLI agent runs its own process instead.
      ...(role.startsWith('attempt-') && !run.current().agent.cli ? { channel: true } : {}),
      env: { ...catalog.catalog.sandbox.env, ...catalogSandboxEnv() },
      resources: resourcesFromCatalog(catalog.catalog),
      files: [catalogFile, ...(getsVerifierFiles(role) ? verifierFiles(role) : [])],
      keep: options.keep,
      ...(prepared.runtime?.asked ? { runtime: prepared.runtime.asked } : {}),
      ...egressSpec(catalog.catalog.sandbox.egress, role),
    }),
    options.keep,
    (spec, sandbox) => adoptFork(run.current(), spec, sandbox),
    options.removals,
    (spec) => run.current().ownSetups.holds(spec.image),
  );
}

async function fixTicket(run: Run): Promise<Ending> {
  const image = await resolveImage(run);
  await forkKeptSandbox(run);
  // Without held-out tests the first attempt's sandbox needs the image alone: it starts
  // while the attempts are planned (the pristine tree read is as slow as a start-up). A
  // replayed patch is written into its verification sandbox, which never needs more.
  if (patchIntoVerification(run))
    run.sandboxes.makeAhead(`verify-${firstAttempt(run)}`, {}, { freezeWatch: false });
  else if (run.catalog.catalog.agent.heldOutTests.length === 0) {
    await prepareWorkspaceGit(run, image, []);
    await layerCliAgent(run, image);
    await prepareSetup(run, []);
    run.sandboxes.makeAhead(`attempt-${firstAttempt(run)}`, { hidden: [] });
  }
  const plan = await planAttempts(run, image);
  const result = await attemptsWithBaseline(run, plan, image);
  if (result === 'nothing-to-fix') {
    return {
      outcome: 'nothing-to-fix',
      message:
        'The tests already pass on the untouched repo, so there is nothing to verify a fix against. Use --force to run the agent anyway.',
    };
  }
  if (result.verdict !== 'passed' || !result.changeSet) return failedEnding(run, result);
  return applyVerified(run, image, result.changeSet);
}

/** Step 3: the sandbox image, built or reused, and its pristine tree. */
async function resolveImage(run: Run): Promise<RepoImage> {
  run.journal.append({ kind: 'image_start' });
  const image = await run.deps.image({
    repoDir: run.repoDir,
    ...catalogImageOptions(run.catalog),
    rebuild: run.options.rebuild,
    logFile: run.dir.path('image-build.log'),
    // The build's steps pass on a live line only (no event: its log file holds every line).
    onProgress: buildLines(run.progress),
    signal: run.signal,
  });
  run.journal.append({
    kind: 'image',
    message: image.tag,
    status: image.reused ? 'reused' : 'built',
    image: {
      tag: image.tag,
      id: image.imageId,
      reused: image.reused,
      buildNetwork: image.buildNetwork,
    },
  });
  return image;
}

/**
 * The image of the attempt sandboxes: the run's image plus a git repository of its pristine
 * tree without the held-out tests (made once per image and held-out set, then reused), so
 * `git status`/`git diff` work for the agent and in `shell`. Without git in the image, or
 * on a backend that cannot make one, the attempts use the run's image and the record says why.
 */
async function prepareWorkspaceGit(run: Run, image: RepoImage, heldOut: readonly string[]): Promise<void> {
  const backend = run.deps.backend;
  if (!backend.workspaceGitImage) return;
  const exclude = gitExcludes(ignoreSettings(run.catalog.catalog.agent.ignoreChanges));
  let git: WorkspaceGit;
  try {
    git = await backend.workspaceGitImage(image.tag, { hidden: heldOut, exclude, signal: run.signal });
  } catch (error) {
    if (run.signal.aborted || error instanceof SandboxUnavailable) throw error;
    git = { state: 'failed', note: `making the workspace a git repository failed: ${errorMessage(error)}` };
  }
  if (git.state === 'created') {
    run.attemptImage.tag = git.image;
    run.journal.append({ kind: 'workspace_git', workspaceGit: { state: git.state, image: git.image } });
  } else {
    run.journal.append({ kind: 'workspace_git', workspaceGit: { state: git.state, note: git.note } });
  }
}

/** Step 4: what every attempt shares: prompt, tools, allowlist, pristine tree, held-out tests. */
async function planAttempts(run: Run, image: RepoImage): Promise<AttemptPlan> {
  const { catalog } = run;
  const agent = catalog.catalog.agent;
  const layers = verificationLayers(catalog.catalog);
  const tree = await run.deps.backend.workspaceTree(image.tag, { signal: run.signal });
  const heldOut = heldOutPaths(tree, agent.heldOutTests);
  if (heldOut.length > 0) run.journal.append({ kind: 'held_out', paths: heldOut.slice(0, 200) });
  // A replayed patch needs neither git nor an agent's layer: it never runs in an attempt's image.
  if (agent.heldOutTests.length > 0 && !patchIntoVerification(run)) {
    await prepareWorkspaceGit(run, image, heldOut);
    await layerCliAgent(run, image);
    await prepareSetup(run, heldOut);
  }
  const repoAgentsMd = await readAgentsMd(run.repoDir);
  const pristine = pristineFromHost(run.repoDir);
  const { library, skipped } = await loadLibrary(tree, pristine, { docs: agent.docs, skills: agent.skills });
  if (library.docs.length > 0 || library.skills.length > 0 || skipped.length > 0) {
    run.journal.append({
      kind: 'library',
      library: {
        docs: library.docs.map((d) => d.path),
        skills: library.skills.map((s) => s.name),
        ...(skipped.length > 0 ? { skipped: skipped.slice(0, 50) } : {}),
      },
    });
  }
  const system = buildSystemPrompt({
    ...(repoAgentsMd ? { repoAgentsMd } : {}),
    library,
    rules: Object.entries(catalog.catalog.rules).map(([name, rule]) => ({ name, ...rule })),
    editableFiles: agent.editableFiles,
    // The agent's sandbox starts from the setup's result: it is told the tests alone.
    testCommands: testLayers(catalog.catalog).map((l) => l.command),
    catalogPathInSandbox: CATALOG_SANDBOX_PATH,
    workspaceGit: run.attemptImage.tag !== undefined,
  });
  const allowlist = await catalogAllowlist(catalog);
  const gitignores = await pristineGitignores(tree, pristine);
  const ignore = createChangeIgnore({
    settings: ignoreSettings(agent.ignoreChanges),
    gitignore: gitignores.matcher,
    editable: agent.editableFiles,
    tree,
  });
  const tools = createDefaultToolRegistry({
    delegate: agent.delegate,
    library,
    isEditable: (path) => allowlist.check(path).allowed,
    editableGlobs: agent.editableFiles,
    limits: { defaultCommandTimeoutSec: catalog.catalog.sandbox.timeouts.commandSec },
  });
  const contextWindow = contextWindowTokens(run.provider.name, run.options.env);
  return {
    system,
    tools,
    allowlist,
    tree,
    pristine,
    ignore,
    layers,
    heldOut,
    ...(contextWindow ? { contextWindow } : {}),
    // Each round of parallel attempts counts as one of maxAttempts.
    maxAttempts: (run.options.maxAttempts ?? agent.maxAttempts) * (run.laneProviders?.length ?? 1),
    ...(run.steps ? { steps: run.steps } : {}),
    ...(run.checker
      ? {
          review: {
            checker: run.checker,
            maxRounds: agent.review?.maxRounds ?? 2,
            used: 0,
            ...(repoAgentsMd ? { agentsMd: repoAgentsMd } : {}),
          },
        }
      : {}),
  };
}

/**
 * How long the first attempt's agent waits for the baseline's test command, counted from the
 * moment that command starts, before its first model call. A broken test command (no such
 * script, runner not installed, no tests) fails within seconds of starting: waiting that long
 * means such a run ends before a single token is spent, while the attempt's sandbox still
 * starts beside the baseline's. A slower test suite is not waited for. Counting from the
 * command's start keeps a slow sandbox start (a loaded engine) out of the head start; 30 s
 * leaves room for a loaded machine (seen here: \`npm test\` without a package.json took over
 * 10 s to fail at a load average of 30 on 2 cores).
 */
export const BASELINE_HEAD_START_MS = 30_000;
/** The longest the agent ever waits, whatever the baseline is doing (another trial measuring it). */
const BASELINE_WAIT_CAP_MS = 60_000;

/**
 * Step 5: the baseline runs while the first attempt starts (it takes as long as the tests);
 * when it shows the tests already pass, the attempt is stopped and the run has nothing to fix.
 * When it shows the test command itself did not run the tests, the run stops with a
 * configuration error: no attempt could ever be verified.
 */
async function attemptsWithBaseline(
  run: Run,
  plan: AttemptPlan,
  image: RepoImage,
): Promise<AttemptResult | 'nothing-to-fix'> {
  const force = run.options.force;
  const gate = new AbortController();
  const headStart = run.options.baselineHeadStartMs ?? BASELINE_HEAD_START_MS;
  const timers: NodeJS.Timeout[] = [];
  let letAgentGo: () => void = () => undefined;
  const baselineOrHeadStart = new Promise<void>((resolve) => {
    letAgentGo = resolve;
    timers.push(setTimeout(resolve, Math.max(headStart, BASELINE_WAIT_CAP_MS)));
  });
  void baselineOrHeadStart.then(() => timers.forEach(clearTimeout));
  const onCommandStart = () => timers.push(setTimeout(letAgentGo, headStart));
  const key = baselineKey(run, image, plan.layers);
  const failingBaselines = run.deps.failingBaselines;
  // Known to fail on this very image and command: the verdict cannot save the agent's money.
  const knownFailing = (await failingBaselines?.known(key)) === true;
  // A patch the harness replays (an oracle, a predictions file) spends nothing either.
  const hold = !knownFailing && run.options.patchOnly !== true;
  const baseline: Promise<BaselineResult> = runBaseline(run, image, plan.layers, onCommandStart).then(
    (result) => {
      if (!result.broken && !result.passed && !knownFailing) void failingBaselines?.remember(key);
      if (result.broken) {
        const error = testCommandError(result.broken, run.catalog, plan.layers.length, result.hints);
        gate.abort(error);
        throw error;
      }
      // Harbor's rule (a reward, `unchanged: verify`): the agent always gets its turn.
      if (result.passed && !force && run.catalog.catalog.agent.reward?.unchanged !== 'verify')
        gate.abort(new BaselinePasses());
      return result;
    },
    (error: unknown) => {
      gate.abort(
        error instanceof HarnessError ? error : new HarnessError('INTERNAL', 'internal', errorMessage(error)),
      );
      throw error;
    },
  );
  baseline.catch(() => undefined);
  void baseline.then(letAgentGo, letAgentGo);
  // The gate leaves aside what the tests write on the untouched repo, so it waits for the baseline.
  plan.testOutputs = baseline.then(
    (result) => result.testOutputs ?? NO_TEST_OUTPUTS,
    () => NO_TEST_OUTPUTS,
  );
  // A continued run starts from the earlier run's feedback, and numbers its attempts on.
  let feedback: string | undefined = run.continuation ? continuationFeedback(run.continuation) : undefined;
  let last: AttemptResult | undefined;
  const first = firstAttempt(run);
  const lanes = run.laneProviders?.length ?? 1;
  for (let n = first; n < first + plan.maxAttempts; n += lanes) {
    const signal = n === first ? AbortSignal.any([run.signal, gate.signal]) : run.signal;
    const ready = n === 1 && hold ? baselineOrHeadStart : undefined;
    const round = Array.from({ length: lanes }, (_, i) => n + i);
    try {
      last =
        lanes > 1
          ? await parallelRound(run, plan, n, lanes, feedback, signal, ready)
          : await runAttempt(run, plan, n, feedback, signal, ready);
    } catch (error) {
      if (error instanceof TestCommandBroken) {
        for (const a of round) {
          // Stopped before its first model call, it spent nothing: it was never an attempt.
          const attempt = run.record.attempts.find((r) => r.n === a);
          if (attempt && attempt.turns === 0)
            run.journal.append({ kind: 'attempt_dropped', attempt: attempt.n });
          else if (attempt)
            run.journal.append({
              kind: 'attempt_note',
              attempt: attempt.n,
              message: 'stopped: the test command itself failed to run',
            });
        }
        throw error;
      }
      if (error instanceof BaselinePasses) {
        // Stopped because there is nothing to fix: not an attempt that was interrupted. What
        // its turns spent stays in the run's turns, tokens and cost, its words in the transcript.
        for (const a of round) run.journal.append({ kind: 'attempt_dropped', attempt: a });
        return 'nothing-to-fix';
      }
      throw error;
    }
    const measured = await baseline;
    if (measured.passed && !force) return 'nothing-to-fix';
    if (last.verdict === 'passed') return last;
    // The run's money is spent: no later attempt could call the model.
    if (run.costs.exceeded()) break;
    // Every review round spent: no later attempt could be approved.
    if (last.verdict === 'changes-requested' && plan.review && plan.review.used >= plan.review.maxRounds)
      break;
    feedback = last.feedback;
  }
  return last!;
}

/** The number of a run's first attempt: 1, or the one after those of the run it continues. */
function firstAttempt(run: Run): number {
  return (run.continuation?.attemptsBefore ?? 0) + 1;
}

function failedEnding(run: Run, last: AttemptResult): Ending {
  if (run.costs.exceeded()) {
    return {
      outcome: 'budget',
      message: `The cost limit ($${run.costs.limitUsd}) was reached after ${run.record.attempts.length} attempt(s) (${formatUsd(run.costs.totalUsd)} spent) without a verified fix; the last was ${last.verdict}.`,
    };
  }
  const outcome: RunOutcome =
    last.verdict === 'rejected'
      ? 'rejected'
      : last.verdict === 'changes-requested'
        ? 'not-approved'
        : 'failed';
  return {
    outcome,
    message: `No verified fix after ${run.record.attempts.length} attempt(s); the last was ${last.verdict}.`,
  };
}

/**
 * An unexpected failure (not one of ours) while the engine no longer answers is the engine
 * failing (a broken stream, a cut connection surface as anything), not the run: it is
 * infrastructure, which an eval retries elsewhere, rather than an error of the run.
 */
async function blameTheEngine(run: Run, caught: unknown): Promise<unknown> {
  if (caught instanceof HarnessError || run.signal.aborted) return caught;
  try {
    await run.deps.ping();
    return caught;
  } catch (unreachable) {
    if (!(unreachable instanceof HarnessError) || unreachable.category !== 'infrastructure') return caught;
    return new SandboxUnavailable(`${errorMessage(caught)} (${unreachable.message})`, { cause: caught });
  }
}

function endingOfError(run: Run, caught: unknown): Ending {
  // The signal's reason is the truth: a cancelled call surfaces as whatever the callee threw.
  const error =
    run.signal.aborted && run.signal.reason instanceof HarnessError
      ? run.signal.reason
      : caught instanceof HarnessError
        ? caught
        : new HarnessError('INTERNAL', 'internal', errorMessage(caught), { cause: caught });
  if (error instanceof Interrupted) {
    return { outcome: 'interrupted', message: 'Interrupted; the host repo was not touched.' };
  }
  if (error instanceof RunTimeout) {
    return { outcome: 'timeout', message: `${error.message}; the host repo was not touched.`, error };
  }
  return {
    outcome: error.category === 'infrastructure' ? 'infrastructure' : 'error',
    message: error.message,
    error,
  };
}

/** Each egress sandbox's proxy log into the run folder, its counts onto its container's record. */
async function recordEgress(run: Run, containers: readonly ContainerRecord[]): Promise<void> {
  for (const container of containers) {
    const entries = run.sandboxes.egressLogs.get(container.id);
    if (!entries) continue;
    const file = `egress/${container.role.replace(/[^A-Za-z0-9_.-]/g, '-')}.jsonl`;
    try {
      await run.dir.writeFile(file, entries.map((e) => JSON.stringify(e)).join('\n') + '\n');
    } catch (error) {
      run.events.emit({
        kind: 'cleanup_failed',
        message: `egress log of ${container.role}: ${errorMessage(error)}`,
      });
      continue;
    }
    const denied = entries.filter((e) => !e.allowed).length;
    container.egress = { allowed: entries.length - denied, denied, file };
  }
}

/** The last step, exactly once: sandboxes kept or removed, transcript, cassette, record. */
async function closeRun(run: Run, ending: Ending): Promise<FixResult> {
  const { record } = run;
  const failed =
    ending.outcome !== 'ready-for-review' &&
    ending.outcome !== 'not-applied' &&
    ending.outcome !== 'nothing-to-fix';
  await run.sandboxes.closeAll(
    failed,
    (role, message) => run.events.emit({ kind: 'cleanup_failed', message: `${role}: ${message}` }),
    ending.outcome === 'infrastructure',
  );
  await dropFork(run);
  await dropSetup(run);
  const containers = run.sandboxes.records;
  await recordEgress(run, containers);
  await run.dir.writeFile('transcript.json', `${JSON.stringify(run.transcript, null, 2)}\n`);
  if (run.recorder && run.options.record)
    await run.recorder.save(resolve(run.options.cwd, run.options.record));
  run.journal.append({
    kind: 'run_end',
    status: ending.outcome,
    durationMs: Date.now() - run.started,
    message: ending.message,
    finishedAt: new Date().toISOString(),
    containers,
    cost: run.costs.snapshot(),
    ...(ending.error
      ? {
          error: {
            code: ending.error.code,
            category: ending.error.category,
            message: ending.error.message,
          },
        }
      : {}),
  });
  await run.journal.save();
  const patch = ending.changeSet ? changeSetPatch(ending.changeSet) : undefined;
  return {
    runId: run.dir.id,
    runDir: run.dir.dir,
    outcome: ending.outcome,
    record,
    ...(patch ? { patch } : {}),
    ...(ending.error ? { error: ending.error } : {}),
  };
}
