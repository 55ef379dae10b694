/**
 * Numbers the harness reads from outside itself (a model server's token counts, a run record,
 * an eval's results, a reward file, a summary named by `--compare`) are checked against these
 * before anything adds them up, prices them or compares them: finite, never negative, whole
 * where they count something, and under a cap no real value comes near. A number past a cap
 * is a lie or a bug, not a big run: a negative token count once made a run "cost" minus a
 * million dollars and its cost limit never trigger.
 *
 * Leaf module (like `format.ts`): the model adapters, the records and the evals all use it.
 */
import { z } from 'zod';

export const NUMBER_CAPS = {
  /** Tokens of one model call, in or out: beyond every context window and output limit. */
  tokensPerCall: 10_000_000,
  /** Tokens summed over a run or an eval. */
  tokens: 1_000_000_000_000,
  /** US dollars of a call, a run or an eval. */
  usd: 10_000_000,
  /** US dollars per million tokens in a price table. */
  usdPerMillionTokens: 1_000_000,
  /** A duration: a year. */
  durationMs: 366 * 24 * 60 * 60 * 1000,
  /** Turns, attempts, files, tests, trials, log entries. */
  count: 1_000_000_000,
  /** A verifier's score or named value, either way from 0 (scores are 1 for a pass). */
  score: 1_000_000_000,
} as const;

/** A whole number of tokens, 0 or more, at most `cap`. */
export function tokenCount(cap: number = NUMBER_CAPS.tokens) {
  return z.int().min(0).max(cap);
}

export const countSchema = z.int().min(0).max(NUMBER_CAPS.count);
export const usdSchema = z.number().min(0).max(NUMBER_CAPS.usd);
export const durationMsSchema = z.number().min(0).max(NUMBER_CAPS.durationMs);
/** A trial's score: what is compared with the pass mark and averaged, so never negative. */
export const scoreSchema = z.number().min(0).max(NUMBER_CAPS.score);
/** A verifier's other named values (a delta may be negative): only shown, never added up. */
export const metricSchema = z.number().min(-NUMBER_CAPS.score).max(NUMBER_CAPS.score);

/**
 * Why `value` is not a token count a server could mean (a whole number from 0 to `cap`), or
 * undefined when it is one. Strings, floats, NaN, negatives and huge numbers all have a reason.
 */
export function tokenCountProblem(
  value: unknown,
  cap: number = NUMBER_CAPS.tokensPerCall,
): string | undefined {
  if (typeof value !== 'number')
    return `expected a number, got ${value === null ? 'null' : typeof value} ${JSON.stringify(value)?.slice(0, 40) ?? ''}`.trim();
  if (!Number.isFinite(value)) return `expected a finite number, got ${value}`;
  if (!Number.isInteger(value)) return `expected a whole number, got ${value}`;
  if (value < 0) return `expected 0 or more, got ${value}`;
  if (value > cap) return `expected at most ${cap}, got ${value}`;
  return undefined;
}
