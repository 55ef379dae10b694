/**
 * One journal per run: the typed domain events a `fix` run appends to its `events.jsonl` are
 * the one source of what happened; `run.json` is their fold. A step of the run reports what
 * it found as an event and never edits the record itself, so the record cannot disagree
 * with the log, and a reader of the log (the viewer, `inspect`) sees the same history.
 *
 * The log also holds the loop's facts (`model_call`, `tool_call`, ...): the fold passes over
 * every kind it does not know. Events of the same kinds as before keep their fields (an older
 * reader still finds `status`, `durationMs`, `message`); what the record needs rides along in
 * fields of its own.
 *
 * The fold applies each event in the order it happened, and sets a record's fields in that
 * same order: `run.json` comes out byte for byte as the steps used to write it.
 */
import type { EventInput, EventSink } from '../agent/events.js';
import type { AttemptVerdict, LoopStop, RunOutcome } from '../outcomes.js';
import type {
  AttemptRecord,
  ContainerRecord,
  ReviewRecord,
  RunDir,
  RunRecord,
  StepRecord,
} from './record.js';

type Defined<T> = Exclude<T, undefined>;

/**
 * Every event the record is folded from, and the steps' starts (`*_start`, `verify_layer`):
 * those say when a step began, for the log and the progress line, and leave the record as it
 * is (a run recorded before them folds the same).
 */
export type RunEvent =
  /** The run's record as it opens (inputs, providers, settings; nothing measured yet). */
  | { kind: 'run_start'; record: RunRecord }
  /** The image step began (a build can take minutes). */
  | { kind: 'image_start' }
  | {
      kind: 'image';
      /** The image's tag, and whether it was `reused` or `built` (as before). */
      message: string;
      status: 'reused' | 'built';
      image: Defined<RunRecord['image']>;
    }
  | { kind: 'workspace_git'; workspaceGit: Defined<RunRecord['workspaceGit']> }
  | { kind: 'held_out'; paths: string[] }
  | { kind: 'library'; library: Defined<RunRecord['library']> }
  | {
      kind: 'baseline';
      status: 'broken' | 'passing' | 'failing';
      durationMs: number;
      exitCode: number;
      message?: string | undefined;
      /** What the tests could not import that no agent can fix (`fix/import-hints.ts`). */
      hints?: string[];
      baseline: Defined<RunRecord['baseline']>;
    }
  /** `of`: the number of the last attempt the run may make (a continued run numbers on). */
  | { kind: 'attempt_start'; attempt: number; of?: number }
  /** A sandbox made for an attempt (its own, its verification's). */
  | { kind: 'sandbox'; attempt: number; container: ContainerRecord }
  /** The maker's loop ended: what it spent and why it stopped. */
  | {
      kind: 'agent_end';
      attempt: number;
      status: LoopStop;
      turns: number;
      inputTokens: number;
      outputTokens: number;
    }
  /**
   * The maker's loop ended with an error (a model API that failed, a cassette that ran out)
   * after some turns: what it spent until then, so the record does not say "0 turns".
   */
  | {
      kind: 'agent_error';
      attempt: number;
      turns: number;
      inputTokens: number;
      outputTokens: number;
    }
  /** The maker's loop and the freeze are over: the attempt's change is read and checked now. */
  | { kind: 'collect_start'; attempt: number }
  /** The change set read from the attempt's sandbox (paths cut to what a record keeps). */
  | {
      kind: 'change';
      attempt: number;
      changedFiles: string[];
      changedCount: number;
      ignoredFiles?: string[];
      ignoredCount?: number;
    }
  | {
      kind: 'gate';
      attempt: number;
      status: 'allowed' | 'rejected';
      message: string;
      gate: Defined<AttemptRecord['gate']>;
    }
  /** The allowed change goes into a fresh sandbox from the pristine image, to be tested there. */
  | { kind: 'verify_start'; attempt: number }
  /** A layer of the catalog's test command starts in the verification sandbox. */
  | { kind: 'verify_layer'; attempt: number; layer: string; command: string }
  | {
      kind: 'verify';
      attempt: number;
      status: 'passed' | 'failed';
      durationMs: number;
      exitCode: number;
      message?: string | undefined;
      heldOut?: AttemptRecord['heldOut'];
      testReport?: AttemptRecord['testReport'];
      namedTests?: AttemptRecord['namedTests'];
      /** What the verifier's reward file said (catalog `agent.reward`). */
      reward?: AttemptRecord['reward'];
      /** Set when the verification failed in a layer. */
      failingLayer?: string;
    }
  /** A step of a multi-step attempt begins (catalog `agent.steps`): its instruction goes to the agent. */
  | { kind: 'step_start'; attempt: number; step: string; index: number; of: number }
  /** A step ended: verified with its own reward, or how it ended the attempt before that. */
  | { kind: 'step_end'; attempt: number; step: StepRecord }
  /** The steps are over: the attempt's reward, formed from theirs. */
  | {
      kind: 'steps_reward';
      attempt: number;
      strategy: 'mean' | 'final';
      ran: number;
      of: number;
      reward: Defined<AttemptRecord['reward']>;
    }
  /** A review round begins: the checker gets its own sandbox with the verified change. */
  | { kind: 'review_start'; attempt: number; round: number }
  /** The checker's verdict; its turns and tokens count into the run's. */
  | {
      kind: 'review';
      attempt: number;
      status: ReviewRecord['verdict'];
      durationMs: number;
      message: string;
      review: ReviewRecord;
    }
  | {
      kind: 'attempt_end';
      attempt: number;
      status: AttemptVerdict;
      durationMs: number;
      /** What the attempt cost; absent when it ended with an error on its way up. */
      costUsd?: number;
      /** The run's cost so far, with `costUsd`. */
      cost?: RunRecord['cost'];
      feedback?: string;
      message?: string | undefined;
      /** How it went, in one line (the progress line's end of the attempt). */
      summary?: string | undefined;
    }
  /** Something the run learned about an attempt after it ended (why it was stopped). */
  | { kind: 'attempt_note'; attempt: number; message: string }
  /** The MCP servers started for the built-in agent in an attempt's sandbox, and their tools. */
  | { kind: 'mcp'; attempt: number; servers: Defined<AttemptRecord['mcpServers']> }
  /**
   * An attempt that never was one (stopped before its first model call, or because the
   * baseline showed there was nothing to fix): left out of the record.
   */
  | { kind: 'attempt_dropped'; attempt: number }
  /** `--continue --from-sandbox`: the earlier run's kept sandbox, forked for the first attempts. */
  | { kind: 'fork'; fork: Defined<RunRecord['fork']> }
  /** Catalog `sandbox.setup` starts (or is awaited, when another trial of an eval makes it). */
  | { kind: 'setup_start'; command: string }
  /** Catalog `sandbox.setup`: made by this run, or an eval's shared one another trial made. */
  | { kind: 'setup'; setup: Defined<RunRecord['setup']> }
  /** A parallel attempt stopped because `winner`, of the same round, passed first. */
  | { kind: 'attempt_stopped'; attempt: number; winner: number }
  | { kind: 'patch_saved'; patchFile: string }
  /** The verified change is being written to the host repo (not with `--no-apply`). */
  | { kind: 'apply_start' }
  /**
   * The verified change: `saved` in the run folder, then written to the host repo or not;
   * `files`: how many were written (`applied`).
   */
  | { kind: 'apply'; status: 'saved' | 'applied' | 'not-applied'; message?: string; files?: number }
  /** `sandbox-harness apply <run>` wrote the verified change later. */
  | { kind: 'applied_later'; status: 'applied' | 'not-applied'; time: string; message?: string }
  | {
      kind: 'run_end';
      status: RunOutcome;
      durationMs: number;
      message: string;
      finishedAt: string;
      containers: ContainerRecord[];
      cost?: RunRecord['cost'];
      error?: Defined<RunRecord['error']>;
    };

export type RunEventKind = RunEvent['kind'];

// Every kind, once (a kind added to `RunEvent` and not here is a type error).
const KIND_LIST: Record<RunEventKind, true> = {
  run_start: true,
  image_start: true,
  image: true,
  workspace_git: true,
  held_out: true,
  library: true,
  baseline: true,
  attempt_start: true,
  sandbox: true,
  agent_end: true,
  agent_error: true,
  collect_start: true,
  change: true,
  gate: true,
  verify_start: true,
  verify_layer: true,
  verify: true,
  step_start: true,
  step_end: true,
  steps_reward: true,
  review_start: true,
  review: true,
  attempt_end: true,
  attempt_note: true,
  mcp: true,
  attempt_dropped: true,
  attempt_stopped: true,
  fork: true,
  setup_start: true,
  setup: true,
  patch_saved: true,
  apply_start: true,
  apply: true,
  applied_later: true,
  run_end: true,
};
const KINDS: ReadonlySet<string> = new Set(Object.keys(KIND_LIST));

/** A line of a run's event log as read back: a domain event, or another kind of fact. */
export type LoggedEvent = { kind: string; [field: string]: unknown };

/** The run's record folded from its events (other kinds passed over); undefined without a `run_start`. Pure. */
export function foldRun<E extends { kind: string }>(events: readonly E[]): RunRecord | undefined {
  let record: RunRecord | undefined;
  for (const event of events) {
    if (!isRunEvent(event)) continue;
    if (event.kind === 'run_start') record = structuredClone(event.record);
    else if (record) applyRunEvent(record, event);
  }
  return record;
}

/** Whether a logged event is one the record is folded from (by its kind; its fields are trusted). */
export function isRunEvent(event: { kind: string }): event is RunEvent {
  return KINDS.has(event.kind);
}

/** One event's part of the record, applied to it in place. */
export function applyRunEvent(record: RunRecord, event: RunEvent): void {
  switch (event.kind) {
    case 'run_start':
    case 'image_start':
    case 'setup_start':
    case 'collect_start':
    case 'verify_start':
    case 'verify_layer':
    case 'step_start':
    case 'review_start':
    case 'apply_start':
      // A step's start: the step's own event says what it found.
      return;
    case 'image':
      record.image = structuredClone(event.image);
      return;
    case 'workspace_git':
      record.workspaceGit = structuredClone(event.workspaceGit);
      return;
    case 'held_out':
      record.heldOutTests = [...event.paths];
      return;
    case 'library':
      record.library = structuredClone(event.library);
      return;
    case 'baseline':
      record.baseline = structuredClone(event.baseline);
      return;
    case 'attempt_start':
      record.attempts.push({
        n: event.attempt,
        verdict: 'error',
        turns: 0,
        inputTokens: 0,
        outputTokens: 0,
        durationMs: 0,
        changedFiles: [],
        containers: [],
      });
      return;
    case 'applied_later':
      if (event.status === 'applied') {
        record.applied = true;
        delete record.applyError;
        record.appliedAt = event.time;
        if (record.outcome === 'not-applied') {
          record.outcome = 'ready-for-review';
          record.message = `Verified fix applied later with sandbox-harness apply (nothing committed).`;
        }
      } else if (event.message !== undefined) record.applyError = event.message;
      return;
    case 'patch_saved':
      record.patchFile = event.patchFile;
      return;
    case 'apply':
      if (event.status === 'saved') record.applied = false;
      else if (event.status === 'applied') record.applied = true;
      else if (event.message !== undefined) record.applyError = event.message;
      return;
    case 'review':
      record.turns += event.review.turns;
      record.tokens.input += event.review.inputTokens;
      record.tokens.output += event.review.outputTokens;
      {
        const attempt = attemptOf(record, event.attempt);
        if (attempt) (attempt.reviews ??= []).push(structuredClone(event.review));
      }
      return;
    case 'agent_end':
    case 'agent_error':
      record.turns += event.turns;
      record.tokens.input += event.inputTokens;
      record.tokens.output += event.outputTokens;
      break;
    case 'fork':
      record.fork = structuredClone(event.fork);
      return;
    case 'setup':
      record.setup = structuredClone(event.setup);
      return;
    case 'attempt_stopped': {
      const attempt = attemptOf(record, event.attempt);
      if (attempt) attempt.stoppedBy = event.winner;
      return;
    }
    case 'attempt_dropped': {
      const at = record.attempts.findIndex((a) => a.n === event.attempt);
      if (at >= 0) record.attempts.splice(at, 1);
      return;
    }
    case 'run_end':
      foldRunEnd(record, event);
      return;
    default:
      break;
  }
  const attempt = attemptOf(record, event.attempt);
  if (attempt) foldAttemptEvent(attempt, record, event);
}

function attemptOf(record: RunRecord, n: number): AttemptRecord | undefined {
  return record.attempts.find((a) => a.n === n);
}

/** The events that belong to one attempt's record. */
function foldAttemptEvent(
  attempt: AttemptRecord,
  record: RunRecord,
  event: Extract<
    RunEvent,
    {
      kind:
        | 'sandbox'
        | 'agent_end'
        | 'agent_error'
        | 'change'
        | 'gate'
        | 'verify'
        | 'step_end'
        | 'steps_reward'
        | 'attempt_end'
        | 'attempt_note'
        | 'mcp';
    }
  >,
): void {
  switch (event.kind) {
    case 'sandbox':
      attempt.containers.push(structuredClone(event.container));
      return;
    case 'agent_end':
    case 'agent_error':
      attempt.turns += event.turns;
      attempt.inputTokens += event.inputTokens;
      attempt.outputTokens += event.outputTokens;
      if (event.kind === 'agent_end') attempt.agentStop = event.status;
      return;
    case 'change':
      attempt.changedFiles = [...event.changedFiles];
      attempt.changedCount = event.changedCount;
      if (event.ignoredFiles !== undefined) attempt.ignoredFiles = [...event.ignoredFiles];
      if (event.ignoredCount !== undefined) attempt.ignoredCount = event.ignoredCount;
      return;
    case 'gate':
      attempt.gate = structuredClone(event.gate);
      return;
    case 'verify':
      if (event.heldOut !== undefined) attempt.heldOut = event.heldOut;
      if (event.testReport !== undefined) attempt.testReport = structuredClone(event.testReport);
      if (event.namedTests !== undefined) attempt.namedTests = structuredClone(event.namedTests);
      if (event.reward !== undefined) attempt.reward = structuredClone(event.reward);
      if (event.failingLayer !== undefined) attempt.failingLayer = event.failingLayer;
      return;
    case 'step_end':
      (attempt.steps ??= []).push(structuredClone(event.step));
      return;
    case 'steps_reward':
      attempt.reward = structuredClone(event.reward);
      attempt.stepsReward = { strategy: event.strategy, ran: event.ran, of: event.of };
      return;
    case 'attempt_note':
      attempt.message = event.message;
      return;
    case 'mcp':
      attempt.mcpServers = structuredClone(event.servers);
      return;
    case 'attempt_end':
      // The attempt's own account comes first: it was written before the verdict was known.
      if (event.message !== undefined) attempt.message = event.message;
      attempt.verdict = event.status;
      attempt.durationMs = event.durationMs;
      if (event.costUsd !== undefined) attempt.costUsd = event.costUsd;
      if (event.cost !== undefined) record.cost = structuredClone(event.cost);
      if (event.feedback !== undefined) attempt.feedback = event.feedback;
      return;
  }
}

function foldRunEnd(record: RunRecord, event: Extract<RunEvent, { kind: 'run_end' }>): void {
  record.containers = structuredClone(event.containers);
  for (const attempt of record.attempts) {
    for (const c of attempt.containers) c.kept = record.containers.find((k) => k.id === c.id)?.kept ?? false;
  }
  const last = record.attempts[record.attempts.length - 1];
  if (last && last.verdict === 'error' && event.status === 'interrupted') last.verdict = 'interrupted';
  record.outcome = event.status;
  record.message = event.message;
  if (event.error) record.error = structuredClone(event.error);
  if (event.cost !== undefined) record.cost = structuredClone(event.cost);
  record.finishedAt = event.finishedAt;
  record.durationMs = event.durationMs;
}

/**
 * A run's journal: appends each domain event to the run's event log (through the run's
 * sink, which also drives the progress line) and folds it into `record`, which `save`
 * writes as `run.json`. The record is read by the steps; only the journal changes it.
 */
export class RunJournal {
  readonly record: RunRecord;

  constructor(
    private readonly sink: EventSink,
    private readonly dir: Pick<RunDir, 'writeRecord'>,
    start: RunRecord,
  ) {
    const event: RunEvent = { kind: 'run_start', record: start };
    this.record = structuredClone(start);
    this.emit(event);
  }

  append(event: RunEvent): void {
    applyRunEvent(this.record, event);
    this.emit(event);
  }

  /** `run.json`: the fold of every event so far. */
  save(): Promise<void> {
    return this.dir.writeRecord(this.record);
  }

  private emit(event: RunEvent): void {
    // The sink writes JSON lines: a domain event is one more kind of line, its fields its own.
    this.sink.emit(event as unknown as EventInput);
  }
}
