/**
 * Run records: everything a person needs to understand a `fix` run after the fact, under
 * `.sandbox-harness/runs/<run-id>/`. Ids sort by time. Files are written atomically, and a
 * `run.json` is validated when it is read back: a record is data that a hostile agent (or
 * anyone with access to the repo) may have edited, and commands act on what it names.
 */
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, appendFile, writeFile, lstat } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { UsageError } from '../errors.js';
import { ATTEMPT_VERDICTS, LOOP_STOPS, RUN_OUTCOMES, TEST_VERDICTS } from '../outcomes.js';
import { writeFileAtomic } from '../atomic-write.js';
import { MODEL_ROLES } from '../llm/types.js';
import { priceSchema } from '../llm/cost.js';
import { storedEngineRefSchema } from '../sandbox/backend-registry.js';
import {
  countSchema,
  durationMsSchema,
  metricSchema,
  scoreSchema,
  tokenCount,
  usdSchema,
} from '../numbers.js';

export const HARNESS_DIR = '.sandbox-harness';

/** A run id: a time stamp plus random hex, or an eval's `<task>-t<n>-<stamp>`; never a path. */
const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/**
 * A sandbox's id as its backend gives it: opaque (a Docker container id is hex, another
 * backend's may hold letters, `.`, `_`, `:` or `-`), never a path or an option (no `/`, no
 * leading `-`). Commands reach a sandbox only after its labels name the run, whatever it says here.
 */
const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}$/;
/** A sandbox backend's name (`docker`); absent in records written before there was a choice: docker. */
const BACKEND_NAME = /^[a-z][a-z0-9-]{0,31}$/;

/** An engine's name in a fleet (engines.yaml `name:`, a context name, or made from a URL). */
const ENGINE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const engineName = z.string().regex(ENGINE_NAME, { error: 'expected an engine name' });

const containerSchema = z.object({
  role: z.string().max(64),
  id: z.string().regex(CONTAINER_ID),
  kept: z.boolean(),
  /** Which engine holds it ('local' unless an eval ran on a fleet). */
  engine: engineName.optional(),
  /** Its egress proxy's log: counts here, every entry (JSON lines) in `file` of the run folder. */
  egress: z
    .object({
      allowed: countSchema,
      denied: countSchema,
      file: z.string().regex(/^egress\/[A-Za-z0-9_.-]+\.jsonl$/),
    })
    .optional(),
});

const gateSchema = z.object({
  ok: z.boolean(),
  offences: z.array(z.object({ path: z.string(), kind: z.string(), why: z.string() })),
});

const reviewSchema = z.object({
  round: countSchema,
  verdict: z.enum(['approve', 'request-changes']),
  summary: z.string(),
  reasons: z.array(z.object({ file: z.string().optional(), rule: z.string().optional(), text: z.string() })),
  turns: countSchema,
  inputTokens: tokenCount(),
  outputTokens: tokenCount(),
  durationMs: durationMsSchema,
});

const count = countSchema;

/** What a verifier's reward file said (catalog `agent.reward`), or why nothing could be read. */
const rewardRecordSchema = z.object({
  status: z.enum(['read', 'refused']),
  score: scoreSchema.optional(),
  values: z.record(z.string(), metricSchema).optional(),
  file: z.string().optional(),
  reason: z.string().optional(),
});

/** One step of a multi-step attempt (catalog `agent.steps`). */
const stepRecordSchema = z.object({
  name: z.string(),
  index: countSchema.min(1),
  /** `passed`/`tests-failed` by its own reward, or how it ended the attempt before verification. */
  verdict: z.enum(ATTEMPT_VERDICTS),
  agentStop: z.enum(LOOP_STOPS).optional(),
  turns: countSchema,
  /** Paths of the whole change so far (against the pristine image) that this step's verification got. */
  changedCount: countSchema.optional(),
  reward: rewardRecordSchema.optional(),
  durationMs: durationMsSchema,
  /** Why the steps after this one did not run (min_reward, or no reward). */
  stoppedSteps: z.string().optional(),
});

export const attemptRecordSchema = z.object({
  n: countSchema.min(1),
  verdict: z.enum(ATTEMPT_VERDICTS),
  agentStop: z.enum(LOOP_STOPS).optional(),
  turns: countSchema,
  inputTokens: tokenCount(),
  outputTokens: tokenCount(),
  durationMs: durationMsSchema,
  /** Paths of the change set (cut to the first 200; `changedCount` has the number). */
  changedFiles: z.array(z.string()),
  changedCount: countSchema.optional(),
  /** New paths that were not the agent's change (build and test output, git's files), cut to 200. */
  ignoredFiles: z.array(z.string()).optional(),
  ignoredCount: countSchema.optional(),
  gate: gateSchema.optional(),
  failingLayer: z.string().optional(),
  /** Which verdict came from the held-out tests (when the catalog has them). */
  heldOut: z.enum(['passed', 'failed']).optional(),
  containers: z.array(containerSchema),
  feedback: z.string().optional(),
  message: z.string().optional(),
  reviews: z.array(reviewSchema).optional(),
  /** A parallel attempt stopped because this attempt of its round passed first (`fix --parallel`). */
  stoppedBy: countSchema.min(1).optional(),
  /** What this attempt's model calls cost (maker, sub-agents, checker), in US dollars. */
  costUsd: usdSchema.optional(),
  /** The per-test report of the verification (catalog `agent.testReport`). */
  testReport: z
    .object({
      status: z.enum(['read', 'refused']),
      reason: z.string().optional(),
      counts: z.object({ passed: count, failed: count, skipped: count }).optional(),
      /** Every test's result, in the run folder. */
      file: z.string().optional(),
    })
    .optional(),
  /**
   * With catalog `agent.reward`: the verifier's score (it decided the verdict) or why none was
   * read; with steps, the steps' rewards combined (`stepsReward` says how).
   */
  reward: rewardRecordSchema.optional(),
  /** With catalog `agent.steps`: each step that ran, in order, with its own reward. */
  steps: z.array(stepRecordSchema).optional(),
  /** With steps: how `reward` was formed from theirs, and how many of them ran. */
  stepsReward: z
    .object({ strategy: z.enum(['mean', 'final']), ran: countSchema, of: countSchema })
    .optional(),
  /** With catalog `agent.mcpServers` (built-in agent): each server's tools as the model saw them, and what was left out. */
  mcpServers: z
    .array(z.object({ name: z.string(), tools: z.array(z.string()), skipped: z.array(z.string()) }))
    .optional(),
  /** With named tests: the SWE-bench verdict next to the test command's exit code. */
  namedTests: z
    .object({
      verdict: z.enum(TEST_VERDICTS),
      exitCode: z
        .int()
        .min(-(2 ** 31))
        .max(2 ** 31 - 1),
      failToPass: z.object({ passed: count, total: count }),
      passToPass: z.object({ passed: count, total: count }),
      quarantined: z.array(z.string()),
    })
    .optional(),
});

const costSchema = z.object({
  usd: usdSchema,
  byRole: z.partialRecord(z.enum(MODEL_ROLES), usdSchema),
  /** The price each model was charged at (USD per million tokens), as it was then. */
  prices: z.record(z.string(), priceSchema).optional(),
  /** Models that answered without a price: their calls are counted as 0. */
  unpriced: z.array(z.string()).optional(),
  limitUsd: usdSchema.positive().optional(),
});

/** Whether the attempt sandboxes' workspace was a git repository of the pristine tree, and if not why. */
const workspaceGitSchema = z.object({
  state: z.enum(['created', 'no-git', 'exists', 'failed']),
  image: z.string().optional(),
  note: z.string().optional(),
});

export const runRecordSchema = z.object({
  id: z.string().regex(RUN_ID),
  version: z.literal(2),
  harnessVersion: z.string(),
  startedAt: z.string(),
  finishedAt: z.string().optional(),
  durationMs: durationMsSchema.optional(),
  outcome: z.enum([...RUN_OUTCOMES, 'running']),
  message: z.string().optional(),
  error: z.object({ code: z.string(), category: z.string(), message: z.string() }).optional(),
  ticket: z.object({
    id: z.string().optional(),
    title: z.string().optional(),
    source: z.string(),
    file: z.string().optional(),
  }),
  catalog: z.object({ name: z.string(), file: z.string(), hash: z.string() }),
  repoDir: z.string(),
  image: z
    .object({
      tag: z.string(),
      id: z.string(),
      reused: z.boolean(),
      /** True when the image build had network (catalog `sandbox.build.network`). */
      buildNetwork: z.boolean().optional(),
    })
    .optional(),
  /** The sandbox backend its sandboxes ran on (`docker`); absent in older records, which mean docker. */
  backend: z.string().regex(BACKEND_NAME, { error: 'expected a backend name' }).optional(),
  /** The engine its sandboxes ran on: `local`, or the fleet's name for it. */
  engine: engineName.optional(),
  /**
   * How to reach that engine again: `{ backend, ...fields that backend owns }`, checked by that
   * backend's schema (through the registry); absent for the local engine.
   */
  engineRef: storedEngineRefSchema.optional(),
  /** The OCI runtime its sandboxes ran under (`runc`, `runsc`, ...), as the engine names it. */
  runtime: z.string().optional(),
  provider: z.object({ name: z.string(), model: z.string() }),
  /** The agent kind that worked the ticket (`builtin`, `claude-code`, ...); absent in older records, which mean builtin. */
  agent: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,31}$/, { error: 'expected an agent kind name' })
    .optional(),
  checker: z.object({ name: z.string(), model: z.string() }).optional(),
  keep: z.enum(['on-failure', 'always', 'never']),
  apply: z.boolean(),
  /** `fix --continue`: the run this one started from, and how many attempts it had made. */
  continuedFrom: z
    .object({
      runId: z.string(),
      attempts: countSchema,
      /** A seeded run (eval `seedRun`): how many messages of that run's conversation started this one. */
      seededMessages: countSchema.optional(),
    })
    .optional(),
  /** `fix --parallel`: attempts run at once, each round (absent: one at a time). */
  parallelAttempts: countSchema.min(2).optional(),
  /** `fix --continue --from-sandbox`: the fork of the earlier run's kept sandbox the first attempts started from. */
  fork: z
    .object({
      container: z.string(),
      image: z.string(),
      /** Paths the fork had changed against the pristine tree. */
      inherited: countSchema,
      durationMs: durationMsSchema,
    })
    .optional(),
  /** Catalog `sandbox.setup`: the state the attempt sandboxes started from. */
  setup: z
    .object({
      command: z.string(),
      /** The fork image of the setup's sandbox. */
      image: z.string(),
      /** The setup command's time plus the fork's (in the run that made it). */
      durationMs: durationMsSchema,
      shared: z.boolean(),
      /** An eval's shared setup another trial made: that trial's run id. */
      reusedFrom: z.string().optional(),
    })
    .optional(),
  applied: z.boolean().optional(),
  applyError: z.string().optional(),
  /** When `sandbox-harness apply` wrote the verified change (a run that did not apply it itself). */
  appliedAt: z.string().optional(),
  baseline: z
    .object({
      failing: z.boolean(),
      failingLayer: z.string().optional(),
      durationMs: durationMsSchema,
      /** Set when an eval reused the baseline of an earlier trial with the same image and catalog. */
      reusedFrom: z.string().optional(),
      /** Set when the test command itself did not run the tests (see `fix/test-command.ts`). */
      brokenCommand: z
        .object({ layer: z.string(), command: z.string(), kind: z.string(), reason: z.string() })
        .optional(),
    })
    .optional(),
  attempts: z.array(attemptRecordSchema),
  tokens: z.object({ input: tokenCount(), output: tokenCount() }),
  /** What the run's model calls cost, from the price table (absent in records of older versions). */
  cost: costSchema.optional(),
  turns: countSchema,
  containers: z.array(containerSchema),
  testCommand: z.array(z.object({ name: z.string(), command: z.string() })),
  heldOutTests: z.array(z.string()).optional(),
  workspaceGit: workspaceGitSchema.optional(),
  patchFile: z.string().optional(),
  /** The topic documents and skills offered to the agent (read_doc, skill), and what was left out. */
  library: z
    .object({
      docs: z.array(z.string()),
      skills: z.array(z.string()),
      skipped: z.array(z.string()).optional(),
    })
    .optional(),
});

export type RunRecord = z.infer<typeof runRecordSchema>;
export type StepRecord = z.infer<typeof stepRecordSchema>;
export type AttemptRecord = z.infer<typeof attemptRecordSchema>;
export type ContainerRecord = z.infer<typeof containerSchema>;
export type ReviewRecord = z.infer<typeof reviewSchema>;
export type EngineRefRecord = z.infer<typeof storedEngineRefSchema>;

export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').replace(/\..*$/, '');
  return `${stamp}-${randomBytes(3).toString('hex')}`;
}

export function runsDirFor(repoDir: string): string {
  return join(repoDir, HARNESS_DIR, 'runs');
}

/** A run's folder and the files in it. */
export class RunDir {
  constructor(
    readonly dir: string,
    readonly id: string,
  ) {}

  static async create(runsDir: string, id = newRunId()): Promise<RunDir> {
    if (!RUN_ID.test(id)) throw new UsageError(`run id ${JSON.stringify(id)} is not a plain name`);
    const dir = join(runsDir, id);
    await mkdir(join(dir, 'attempts'), { recursive: true });
    // Run records live in the user's repo; a `*` .gitignore at the top of our folder keeps
    // them out of `git status` without touching the repo's own .gitignore.
    if (basename(dirname(runsDir)) === HARNESS_DIR) {
      await writeFile(join(dirname(runsDir), '.gitignore'), '*\n', { flag: 'wx' }).catch(() => undefined);
    }
    return new RunDir(dir, id);
  }

  path(...parts: string[]): string {
    return join(this.dir, ...parts);
  }

  async writeRecord(record: RunRecord): Promise<void> {
    await writeFileAtomic(this.path('run.json'), `${JSON.stringify(record, null, 2)}\n`);
  }

  async writeFile(relative: string, content: string | Buffer): Promise<string> {
    const file = this.path(relative);
    await mkdir(dirname(file), { recursive: true });
    await writeFileAtomic(file, content);
    return file;
  }

  async appendEvent(event: Record<string, unknown>): Promise<void> {
    await appendFile(this.path('events.jsonl'), `${JSON.stringify(event)}\n`);
  }
}

export interface StoredRun {
  dir: string;
  record: RunRecord;
}

/** Why a stored `run.json` is not a record this harness wrote, or undefined. */
export function recordProblem(value: unknown, folderName: string): string | undefined {
  const parsed = runRecordSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return `${issue ? `${issue.path.join('.') || '(record)'}: ${issue.message}` : 'invalid'}`;
  }
  if (parsed.data.id !== folderName) return `id ${parsed.data.id} does not match its folder ${folderName}`;
  return undefined;
}

export interface ListedRuns {
  runs: StoredRun[];
  /** Folders whose run.json is missing, not a regular file, or not a valid record. */
  invalid: { dir: string; problem: string }[];
}

export async function listRunsWithProblems(runsDir: string): Promise<ListedRuns> {
  let names: string[];
  try {
    names = await readdir(runsDir);
  } catch {
    return { runs: [], invalid: [] };
  }
  const out: ListedRuns = { runs: [], invalid: [] };
  for (const name of names.sort()) {
    const dir = join(runsDir, name);
    const file = join(dir, 'run.json');
    // A record is read only from a real folder and a regular file: never through a link.
    const [dirStat, fileStat] = await Promise.all([
      lstat(dir).catch(() => undefined),
      lstat(file).catch(() => undefined),
    ]);
    if (!dirStat?.isDirectory()) continue;
    if (!fileStat?.isFile()) {
      // A folder without a readable run.json is not a run (or one still being created).
      if (fileStat) out.invalid.push({ dir, problem: 'run.json is not a regular file' });
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(await readFile(file, 'utf8'));
    } catch {
      out.invalid.push({ dir, problem: 'run.json is not JSON' });
      continue;
    }
    const problem = recordProblem(value, name);
    if (problem) out.invalid.push({ dir, problem });
    else out.runs.push({ dir, record: runRecordSchema.parse(value) });
  }
  return out;
}

export async function listRuns(runsDir: string): Promise<StoredRun[]> {
  return (await listRunsWithProblems(runsDir)).runs;
}

/** Finds a run by full id, unique prefix, or `last`. */
export async function resolveRun(runsDir: string, ref: string): Promise<StoredRun> {
  const { runs, invalid } = await listRunsWithProblems(runsDir);
  const broken = invalid.find((i) => basename(i.dir) === ref);
  if (broken) {
    throw new UsageError(`run ${ref} has an invalid record: ${broken.problem}`, {
      hint: 'A run.json is checked before anything acts on it; this one was not written by sandbox-harness as it is now.',
    });
  }
  if (runs.length === 0) {
    throw new UsageError(`no runs recorded in ${runsDir}`, {
      hint: 'Run `sandbox-harness fix <ticket>` first, or pass --repo to point at the repo whose runs you mean.',
    });
  }
  if (ref === 'last' || ref === 'latest') return runs[runs.length - 1]!;
  const exact = runs.find((r) => r.record.id === ref);
  if (exact) return exact;
  const matches = runs.filter((r) => r.record.id.startsWith(ref));
  if (matches.length === 1) return matches[0]!;
  if (matches.length > 1) {
    throw new UsageError(`run id "${ref}" is ambiguous: ${matches.map((m) => m.record.id).join(', ')}`, {
      hint: 'Give more characters of the id.',
    });
  }
  throw new UsageError(`unknown run id "${ref}" in ${runsDir}`, {
    hint: '`sandbox-harness runs` lists the recorded runs; `last` means the newest.',
  });
}

/** A file of a run's folder, read only when it is a regular file (never through a link). */
/** Largest run file read back whole (a transcript of a long run is a few MiB). */
export const MAX_RUN_FILE_BYTES = 64 * 1024 * 1024;

/**
 * A file of a run folder, as text: never through a link in any component (the file itself is
 * opened with O_NOFOLLOW, so one swapped in after the look is not followed either), and never
 * more than `maxBytes` (a file over it is refused, named, rather than read into memory).
 * Undefined when it is missing, not a regular file, or behind a link.
 */
export async function readRunFile(
  run: StoredRun,
  relative: string,
  maxBytes = MAX_RUN_FILE_BYTES,
): Promise<string | undefined> {
  let handle;
  try {
    let dir = run.dir;
    for (const part of relative.split('/').slice(0, -1)) {
      dir = join(dir, part);
      if (!(await lstat(dir)).isDirectory()) return undefined;
    }
    handle = await open(
      join(run.dir, relative),
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    );
  } catch {
    return undefined;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return undefined;
    // Read at most one byte past the cap: a file that grows after the look is still bounded.
    const buffer = Buffer.alloc(Math.min(stat.size, maxBytes) + 1);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    if (bytesRead > maxBytes) {
      throw new UsageError(
        `run ${basename(run.dir)}: ${relative} is over the ${maxBytes}-byte limit for a run file; it was not read`,
      );
    }
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}
