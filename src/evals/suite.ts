/**
 * The one suite shape every eval runs, whatever its task source read (a suite file,
 * SWE-bench-style instances, Harbor task folders: `sources/`): tasks with a catalog, a ticket
 * and a repo, and the eval's defaults, which every source's file writes with the one schema
 * here. Paths are absolute so an eval means the same thing from any working directory.
 */
import os from 'node:os';
import { z } from 'zod';
import type { TrialSpec } from './types.js';
import type { TrialCategory } from '../outcomes.js';

export const KEEP_POLICIES = ['on-failure', 'always', 'never'] as const;
export type KeepPolicy = (typeof KEEP_POLICIES)[number];

export interface SuiteDefaults {
  provider?: string | undefined;
  model?: string | undefined;
  n: number;
  concurrency: number;
  timeouts: { trialSec?: number | undefined };
  keep: KeepPolicy;
}

/**
 * A source file's `defaults:` (a suite, an instance suite, a Harbor suite): one schema, so a
 * default means the same in every format. Absent: every default.
 */
export const suiteDefaultsSchema = z
  .strictObject({
    provider: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    n: z.number().int().min(1).default(1),
    // The machine's core count is applied after parsing, so the schema stays deterministic.
    concurrency: z.number().int().min(1).optional(),
    timeouts: z.strictObject({ trialSec: z.number().positive().optional() }).prefault({}),
    keep: z.enum(KEEP_POLICIES).default('never'),
  })
  .prefault({});

/** `defaults:` as read (absent: every default), the concurrency the machine's cores when it names none. */
export function suiteDefaults(
  raw: z.output<typeof suiteDefaultsSchema> = suiteDefaultsSchema.parse(undefined),
): SuiteDefaults {
  return {
    n: raw.n,
    concurrency: raw.concurrency ?? os.availableParallelism(),
    timeouts: { ...raw.timeouts },
    keep: raw.keep,
    provider: raw.provider,
    model: raw.model,
  };
}

export interface SuiteTask {
  id: string;
  /** Absolute. */
  catalog: string;
  /** Absolute path when it names a file next to the suite; otherwise an id or inline text, as written. */
  ticket: string;
  /** Absolute. */
  repo?: string;
  /** Absolute; trial i uses `cassettes[i % cassettes.length]`. */
  cassettes?: string[];
  mustNotTouch?: string[];
  /** Absolute path of a recorded run's folder every trial of the task is seeded from. */
  seedRun?: string;
  /** The task's own agent kind (suite file `agent`), over its catalog's `agent.kind`. */
  agent?: string;
  /**
   * Its cassettes are a patch the harness wrote (the oracle's gold patch, a predictions
   * file's), not a model: nothing is spent, so the first attempt never waits for the baseline.
   */
  patchOnly?: boolean;
  /**
   * The file and field that set the catalog's image build limit, when the catalog was made
   * from another file (a Harbor task's task.toml), so a build past it names them.
   */
  buildLimitFrom?: { file: string; field: string };
  /**
   * Why the source could not make this task (its repo or working copy refused): its trials are
   * `error`s with this reason, and the other tasks run.
   */
  refused?: string;
  /**
   * The result every trial of this task has without running (another agent's empty patch is
   * `no-changes`): no image, no sandbox, no test run.
   */
  settled?: { category: TrialCategory; reason: string; model?: string | undefined };
}

export interface Suite {
  /** Absolute path of the suite file. */
  file: string;
  /** sha256 (hex) of the suite file's bytes; `--resume` refuses a suite whose hash changed. */
  sha256: string;
  name: string;
  defaults: SuiteDefaults;
  tasks: SuiteTask[];
}

/** The cassette trial `trial` of `task` replays; lists cycle so a short list still covers n trials. */
export function cassetteFor(task: SuiteTask, trial: number): string | undefined {
  const list = task.cassettes;
  if (!list || list.length === 0) return undefined;
  return list[trial % list.length];
}

/**
 * Every trial of the suite, trial-major (trial 0 of every task, then trial 1, ...), so an eval
 * stopped part-way has covered every task rather than finished a few.
 */
export function trialSpecs(suite: Suite, n: number): TrialSpec[] {
  const specs: TrialSpec[] = [];
  for (let trial = 0; trial < n; trial++) {
    for (const task of suite.tasks) {
      const spec: TrialSpec = { taskId: task.id, trial, catalog: task.catalog, ticket: task.ticket };
      if (task.repo !== undefined) spec.repo = task.repo;
      const cassette = cassetteFor(task, trial);
      if (cassette !== undefined) spec.cassette = cassette;
      if (suite.defaults.provider !== undefined) spec.provider = suite.defaults.provider;
      if (suite.defaults.model !== undefined) spec.model = suite.defaults.model;
      if (task.mustNotTouch !== undefined) spec.mustNotTouch = [...task.mustNotTouch];
      if (task.seedRun !== undefined) spec.seedRun = task.seedRun;
      if (task.agent !== undefined) spec.agent = task.agent;
      if (task.patchOnly && spec.cassette !== undefined) spec.patchOnly = true;
      specs.push(spec);
    }
  }
  return specs;
}
