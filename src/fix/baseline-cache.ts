/**
 * What a baseline found, and the cache that lets the trials of an eval share one baseline
 * per (image, catalog, test command). Apart from `baseline.ts` so the run's context
 * (`types.ts`) can name the cache without importing the step that fills it.
 */
import type { TestOutputs } from '../changes/ignore.js';
import type { TestCommandProblemKind } from './test-command.js';

/** A layer whose command did not run the tests at all (see `test-command.ts`). */
export interface BrokenTestCommand {
  layer: string;
  command: string;
  exitCode: number;
  kind: TestCommandProblemKind;
  reason: string;
}

export interface BaselineResult {
  passed: boolean;
  failingLayer?: string;
  exitCode: number;
  durationMs: number;
  /** The whole output, for `baseline-test-output.txt`. */
  output: string;
  /** The run that measured it. */
  runId: string;
  /** Set when the test command itself failed to run: no attempt can be verified against it. */
  broken?: BrokenTestCommand;
  /** What the test command wrote into the untouched workspace (`testOutputsOf`). */
  testOutputs?: TestOutputs;
  /** What the tests could not import that no attempt can fix (`import-hints.ts`); set by `runBaseline`. */
  hints?: string[];
}

/** Baselines shared between the trials of one eval. */
export interface BaselineCache {
  get(key: string, measure: () => Promise<BaselineResult>): Promise<BaselineResult>;
}

export function memoryBaselineCache(): BaselineCache {
  const results = new Map<string, Promise<BaselineResult>>();
  return {
    get(key, measure) {
      let pending = results.get(key);
      if (!pending) {
        pending = measure();
        results.set(key, pending);
        // A failed measurement (Ctrl-C, a lost engine) is not a result: the next trial measures again.
        pending.catch(() => results.delete(key));
      }
      return pending;
    },
  };
}
