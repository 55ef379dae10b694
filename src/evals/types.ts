/**
 * The contract between the eval scheduler and whatever runs one trial. The scheduler knows
 * nothing about Docker or models: a trial runner (in production, `fix --no-apply` in fresh
 * containers) is injected, which keeps the statistics and resume logic testable without
 * either.
 */
import { z } from 'zod';
import {
  countSchema,
  durationMsSchema,
  metricSchema,
  scoreSchema,
  tokenCount,
  usdSchema,
} from '../numbers.js';
import { TEST_VERDICTS, TRIAL_CATEGORIES, type TestVerdict, type TrialCategory } from '../outcomes.js';

export { TRIAL_CATEGORIES, UNSCORED_CATEGORIES, PASSING_CATEGORY, type TrialCategory } from '../outcomes.js';

export interface TrialSpec {
  taskId: string;
  /** 0-based index of the trial within its task. */
  trial: number;
  /** Absolute path of the task's catalog. */
  catalog: string;
  /** Absolute path of a ticket file, a ticket id, or inline ticket text. */
  ticket: string;
  /** Absolute path of the repo fixture. */
  repo?: string;
  /** Absolute path of the cassette for this trial index (already picked from the task's list). */
  cassette?: string;
  provider?: string;
  model?: string;
  mustNotTouch?: string[];
  /** Absolute path of the recorded run's folder the trial is seeded from (suite task `seedRun`). */
  seedRun?: string;
  /** The task's own agent kind (suite task `agent`); `eval --agent` wins over it. */
  agent?: string;
  /** Its cassette is a patch the harness wrote, not a model (suite task `patchOnly`). */
  patchOnly?: boolean;
}

export interface TrialResult {
  taskId: string;
  trial: number;
  outcome: 'passed' | 'failed';
  category: TrialCategory;
  turns: number;
  inputTokens: number;
  outputTokens: number;
  durationMs: number;
  /** ISO 8601. */
  startedAt: string;
  /** ISO 8601. */
  finishedAt: string;
  runId?: string | undefined;
  imageId?: string | undefined;
  catalogHash?: string | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  containerIds?: string[] | undefined;
  error?: string | undefined;
  attemptsUsed?: number | undefined;
  /** The first try hit an infrastructure failure and this is the result of the one retry. */
  infraRetried?: boolean | undefined;
  /** Where and how the first try failed, when this is the result of the retry. */
  firstTry?: FirstTry | undefined;
  /** The engine the trial ran on (a fleet's engine name; `local` otherwise). */
  engine?: string | undefined;
  /** The OCI runtime its sandboxes ran under (`runc`, `runsc`, ...). */
  runtime?: string | undefined;
  /** The agent kind that worked the ticket (`builtin`, `claude-code`, ...), from its run record. */
  agent?: string | undefined;
  /** Some attempt's change passed the tests in verification (whatever the checker said). */
  verified?: boolean | undefined;
  /** With review on: whether the checker approved (its last review). */
  approved?: boolean | undefined;
  /** What the trial's model calls cost in US dollars, from the price table. */
  costUsd?: number | undefined;
  /** Models of the trial that had no price (their calls counted as 0). */
  unpriced?: string[] | undefined;
  /** Per-test results of the last verification that had a test report (catalog `agent.testReport`). */
  tests?: TrialTests | undefined;
  /** The recorded run this trial started from (suite task `seedRun`): its id and attempts. */
  seededFrom?: { runId: string; attempts: number } | undefined;
  /** With catalog `agent.reward` (Harbor tasks): the last verification's score. */
  score?: number | undefined;
  /** Its named values (reward.json), or why no score could be read. */
  reward?:
    | {
        values?: Record<string, number> | undefined;
        refused?: string | undefined;
        /** A multi-step task's: each step that ran, with its own score (absent when it left none). */
        steps?: Array<{ name: string; score?: number | undefined }> | undefined;
      }
    | undefined;
}

/** What a trial's test report said (see `attempts/<n>/test-results.json` of its run for every test). */
export interface TrialTests {
  passed: number;
  failed: number;
  skipped: number;
  /** Why the report was not believed (then the counts are 0). */
  refused?: string | undefined;
  /** With named tests: the SWE-bench verdict, next to the test command's exit code. */
  verdict?: TestVerdict | undefined;
  exitCode: number;
  /** Named tests that did not pass, else failed tests of the report; the first 20. */
  failing: string[];
  /** Named tests left out as quarantined. */
  quarantined?: string[] | undefined;
}

export const MAX_FAILING_RECORDED = 20;

/** The first try of a retried trial: the infrastructure failure that made the retry. */
export interface FirstTry {
  engine?: string | undefined;
  category: TrialCategory;
  durationMs: number;
  error?: string | undefined;
  runId?: string | undefined;
}

export interface TrialContext {
  /**
   * Aborted on Ctrl-C, when the trial's time budget runs out, or when its engine is found
   * lost; the runner must stop promptly.
   */
  signal: AbortSignal;
  /** The engine the scheduler placed the trial on (`local` without a fleet). */
  engine: string;
}

export type TrialRunner = (spec: TrialSpec, context: TrialContext) => Promise<TrialResult>;

const count = countSchema;

/**
 * Results files written before the vocabulary was unified spelled some categories
 * differently; `--resume` of such an eval reads them as the words of today.
 */
const LEGACY_CATEGORIES: Record<string, TrialCategory> = {
  passed: 'ready-for-review',
  tests_failed: 'tests-failed',
  max_turns: 'max-turns',
  nothing_to_fix: 'nothing-to-fix',
};

/**
 * What a `results.jsonl` line must look like. Unknown keys are kept out (strip) rather than
 * refused so a newer harness can add fields without breaking `--resume` of an older run.
 */
export const trialResultSchema: z.ZodType<TrialResult> = z.object({
  taskId: z.string().min(1),
  trial: count,
  outcome: z.enum(['passed', 'failed']),
  category: z.preprocess((value) => LEGACY_CATEGORIES[String(value)] ?? value, z.enum(TRIAL_CATEGORIES)),
  turns: count,
  inputTokens: tokenCount(),
  outputTokens: tokenCount(),
  durationMs: durationMsSchema,
  startedAt: z.string(),
  finishedAt: z.string(),
  runId: z.string().optional(),
  imageId: z.string().optional(),
  catalogHash: z.string().optional(),
  provider: z.string().optional(),
  model: z.string().optional(),
  containerIds: z.array(z.string()).optional(),
  error: z.string().optional(),
  attemptsUsed: count.optional(),
  infraRetried: z.boolean().optional(),
  firstTry: z
    .object({
      engine: z.string().optional(),
      category: z.enum(TRIAL_CATEGORIES),
      durationMs: durationMsSchema,
      error: z.string().optional(),
      runId: z.string().optional(),
    })
    .optional(),
  engine: z.string().optional(),
  runtime: z.string().optional(),
  agent: z.string().optional(),
  verified: z.boolean().optional(),
  approved: z.boolean().optional(),
  costUsd: usdSchema.optional(),
  unpriced: z.array(z.string()).optional(),
  seededFrom: z.object({ runId: z.string(), attempts: count }).optional(),
  tests: z
    .object({
      passed: count,
      failed: count,
      skipped: count,
      refused: z.string().optional(),
      verdict: z.enum(TEST_VERDICTS).optional(),
      exitCode: z
        .int()
        .min(-(2 ** 31))
        .max(2 ** 31 - 1),
      failing: z.array(z.string()).max(1000),
      quarantined: z.array(z.string()).optional(),
    })
    .optional(),
  score: scoreSchema.optional(),
  reward: z
    .object({
      values: z.record(z.string(), metricSchema).optional(),
      refused: z.string().optional(),
      steps: z.array(z.object({ name: z.string(), score: scoreSchema.optional() })).optional(),
    })
    .optional(),
});
