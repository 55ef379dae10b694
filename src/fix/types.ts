/**
 * The types the steps of `fix` share: what the caller asks for (`FixOptions`), what it
 * injects (`FixDeps`: everything that touches the outside world, so the flow is unit-testable
 * with fakes), what it gets back (`FixResult`), and the one context a run carries from step
 * to step (`Run`).
 */
import type { Recovery } from '../changes/apply-change-set.js';
import type { LoadedCatalog } from '../catalog/load.js';
import type { ChangeSet } from '../changes/change-set.js';
import type { Ticket } from '../catalog/ticket.js';
import type { EventSink } from '../agent/events.js';
import type { AgentLoopResult } from '../agent/loop.js';
import type { HarnessError } from '../errors.js';
import type { createProvider } from '../llm/provider-registry.js';
import type { CassetteRecorder } from '../llm/recording.js';
import type { CostMeter } from '../llm/cost.js';
import type { Continuation } from './continue.js';
import type { AgentKind } from '../agent-kinds/agent-kind.js';
import type { CliAgent } from './agent-choice.js';
import type { Message, ModelProvider } from '../llm/types.js';
import type { RunOutcome } from '../outcomes.js';
import type { RunDir, RunRecord } from '../runs/record.js';
import type { RepoImage, RepoImageRequest } from '../image-context/request.js';
import type { RunJournal } from '../runs/journal.js';
import type { InjectedFile, KeepPolicy, SandboxBackend } from '../sandbox/types.js';
import type { BaselineCache } from './baseline-cache.js';
import type { ProgressSink } from './progress.js';
import type { SandboxPool } from './sandboxes.js';
import type { FailingBaselines } from './failing-baselines.js';
import type { TestLayer } from './test-layers.js';
import type { Fork } from '../sandbox/fork/fork.js';
import type { SetupState, SetupStates } from './setup-states.js';
import type { BackgroundRemovals } from '../sandbox/removals.js';
import type { WarmPool } from '../sandbox/pool/warm-pool.js';

export type { KeepPolicy } from '../sandbox/types.js';

export interface FixDeps {
  backend: SandboxBackend;
  /** Checks the engine answers before anything is written. */
  ping: () => Promise<void>;
  /** The run's sandbox image: the one request and result type of every layer below. */
  image: (request: RepoImageRequest) => Promise<RepoImage>;
  /** Default: the registry's createProvider. */
  createProvider?: typeof createProvider;
  /** Evals share one baseline per (image, catalog, test command) between their trials. */
  baselines?: BaselineCache;
  /**
   * Baselines known to fail (`failing-baselines.ts`): for those the first attempt's agent does
   * not wait for the baseline's verdict. Absent: it always waits.
   */
  failingBaselines?: FailingBaselines | undefined;
  /** How to reach the backend's engine again (an eval on a fleet); recorded with the run. */
  engineRef?: RunRecord['engineRef'];
  /**
   * The runtime sandboxes get when `asked` (or nothing) is asked for; throws `ConfigError` for
   * one the engine lacks. Absent: the backend has no runtimes to choose from.
   */
  runtime?: (asked?: string) => Promise<string>;
}

export interface FixOptions {
  ticket: string;
  catalogFile: string;
  repoDir?: string;
  provider?: string;
  model?: string;
  cassette?: string;
  record?: string;
  maxAttempts?: number | undefined;
  keep: KeepPolicy;
  apply: boolean;
  force: boolean;
  rebuild: boolean;
  /**
   * Hand out the run's sandboxes from a warm pool (src/sandbox/pool/): made ahead, proven
   * pristine and of the image the tag names now when taken, drained when the run ends.
   */
  pool?: boolean | undefined;
  /**
   * The warm pool of the eval this run is a trial of (`eval --pool`), in place of a pool of its
   * own: it may hold this run's first sandbox, warmed while an earlier trial ran.
   */
  sharedPool?: WarmPool | undefined;
  /**
   * The eval's removals (`sandbox/removals.ts`): the run's sandboxes that are not kept are
   * removed beside the next trial, not on this run's path; the eval waits for them at its end.
   */
  removals?: BackgroundRemovals | undefined;
  /**
   * The eval's setups (`setup.ts`): a catalog setup marked `shared` is made once per task and
   * every trial's attempts start from it; absent, or not shared, the run makes its own.
   */
  sharedSetups?: SetupStates | undefined;
  /** Review every verified attempt with an independent checker (also catalog `agent.review`). */
  review?: boolean;
  /** Where run records go; default `<repo>/.sandbox-harness/runs`. */
  runsDir?: string;
  cwd: string;
  /** The host environment: read for provider credentials only, never passed to a sandbox. */
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
  /** Stop once the run's model calls cost this many US dollars (overrides catalog `agent.costLimit`). */
  costLimitUsd?: number | undefined;
  /** Continue this earlier run (an id, a prefix or `last`): its last patch and feedback start attempt 1. */
  continueFrom?: string;
  /**
   * Seed the run from the recorded run in this folder (an eval task's `seedRun`): as with
   * `continueFrom`, and its last conversation starts the first attempt's history.
   */
  seedRun?: string;
  /**
   * The cassette is a patch the harness wrote (an eval's oracle or predictions), not a model:
   * no money to save, so the first attempt does not wait for the baseline's verdict.
   */
  patchOnly?: boolean | undefined;
  /** The OCI runtime (`--runtime`); overrides the catalog's `sandbox.runtime`. */
  runtime?: string;
  /** The agent kind (`--agent`, a suite task's); overrides the catalog's `agent.kind`. */
  agent?: string;
  /** How long the first attempt waits for the baseline before calling the model (default 30 s after its test command starts). */
  baselineHeadStartMs?: number;
  /** Attempts at once from the same state (`--parallel`; default: the catalog's agent.parallelAttempts, else 1). */
  parallel?: number | undefined;
  /** With `parallel` and the replay provider: one cassette per attempt lane (lane k plays the k-th). */
  laneCassettes?: readonly string[] | undefined;
  /** With `continueFrom`: start from a fork of the earlier run's kept attempt sandbox, not only its patch. */
  fromSandbox?: boolean | undefined;
}

export interface FixResult {
  runId: string;
  runDir: string;
  outcome: RunOutcome;
  record: RunRecord;
  patch?: string;
  error?: HarnessError;
}

/** How a run ended, before it is closed. */
export interface Ending {
  outcome: RunOutcome;
  message: string;
  /** The verified change, for `ready-for-review`. */
  changeSet?: ChangeSet;
  error?: HarnessError;
}

/** Everything known once the inputs validated; nothing has been written yet. */
export interface Prepared {
  catalog: LoadedCatalog;
  repoDir: string;
  ticket: Ticket;
  provider: ModelProvider;
  /** Which agent works the ticket; a CLI agent also has its model and the bridge's upstream. */
  agent: { kind: AgentKind; cli?: CliAgent };
  /** The sub-agents' provider, when the catalog offers `delegate`. */
  delegateProvider?: ModelProvider;
  /** The independent checker's provider, when review is on. */
  checker?: ModelProvider;
  /** Records every role's answers, for `--record`. */
  recorder?: CassetteRecorder;
  /** What the run's model calls cost so far, per role; every provider above counts into it. */
  costs: CostMeter;
  /** With `--continue`: where the earlier run left off. */
  continuation?: Continuation;
  /** With parallel attempts: each lane's own model provider (lane 1 is `provider`). */
  laneProviders?: ModelProvider[];
  /** Where model retries are reported once the event log exists. */
  retries: { sink?: EventSink };
  /** An earlier apply to this repo that a crash interrupted, undone before anything read the repo. */
  recovered?: Recovery;
  /** The runtime: `asked` by the flag or the catalog (given to every sandbox), `name` what runs. */
  runtime?: { asked?: string; name: string };
}

/** One run, from the moment its record exists until it is closed. */
export interface Run extends Prepared {
  options: FixOptions;
  deps: FixDeps;
  dir: RunDir;
  /** The fold of the run's journal so far: read it; change it only by appending to `journal`. */
  record: RunRecord;
  /** The run's domain events: the one source of `record` (and of `run.json`). */
  journal: RunJournal;
  events: EventSink;
  progress: ProgressSink;
  /** Ctrl-C and the run time limit; its reason says which. */
  signal: AbortSignal;
  sandboxes: SandboxPool;
  /** The image attempt sandboxes are made from when it is not the run's image (one with git). */
  attemptImage: { tag?: string };
  /** `--continue --from-sandbox`: the fork of the earlier run's kept sandbox the first attempts start from. */
  fork?: Fork;
  /** With catalog `sandbox.setup`: its result, which the attempt sandboxes start from (`setup.ts`). */
  setup?: SetupState;
  /** The setups this run made itself, removed at its end. */
  ownSetups: SetupStates;
  /** With catalog `agent.steps`: the task's steps, read before the run began (`steps.ts`). */
  steps?: PlannedStep[];
  transcript: {
    attempt: number;
    role: string;
    /** With catalog `agent.steps`: the step whose instruction this conversation answers. */
    step?: string;
    system: string;
    messages: Message[];
    /** Leading messages taken from a seed run (no model call of this run made them). */
    seededMessages?: number;
    delegations?: AgentLoopResult['delegations'];
  }[];
  started: number;
}

/** One step of a multi-step task (catalog `agent.steps`), its ticket and verifier files read. */
export interface PlannedStep {
  name: string;
  /** 1-based, in the catalog's order. */
  index: number;
  ticket: Ticket;
  layers: TestLayer[];
  /** The files only this step's verification sandbox gets (its `verifierFiles`, else the catalog's). */
  verifierFiles?: InjectedFile[];
  attemptSec: number;
  testSec: number;
  minReward?: number | Record<string, number>;
}
