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
  /**
   * The baseline of `key`: measured by `measure` (which calls `started` when its test command
   * starts) unless another trial measures or measured it. `onStarted` is called once the
   * command of the measurement this call waits for has started, whoever measures it, so a
   * trial that waits for another's baseline gives its agent the same head start.
   */
  get(
    key: string,
    measure: (started: () => void) => Promise<BaselineResult>,
    onStarted?: () => void,
  ): Promise<BaselineResult>;
}

interface Measurement {
  result: Promise<BaselineResult>;
  start: { started: boolean; waiters: (() => void)[] };
}

export function memoryBaselineCache(): BaselineCache {
  const results = new Map<string, Measurement>();
  return {
    get(key, measure, onStarted) {
      let pending = results.get(key);
      if (!pending) {
        const start: Measurement['start'] = { started: false, waiters: [] };
        const result = measure(() => {
          if (start.started) return;
          start.started = true;
          for (const waiter of start.waiters.splice(0)) waiter();
        });
        pending = { result, start };
        results.set(key, pending);
        // A failed measurement (Ctrl-C, a lost engine) is not a result: the next trial measures again.
        result.catch(() => results.delete(key));
      }
      if (onStarted) {
        if (pending.start.started) onStarted();
        else pending.start.waiters.push(onStarted);
      }
      return pending.result;
    },
  };
}
