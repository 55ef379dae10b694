/**
 * A previous `summary.json` read back for `eval --compare`. It is a file a person names, so
 * it may be from another version, hand-edited or not a summary at all: it is validated
 * against what the comparison reads (fields it does not read may be missing or anything):
 * counts whole and capped, rates and intervals shares that agree with their counts; a problem names the file, the line, the field, what was expected and what was found.
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { parseYamlWithSchema } from '../yaml-validate.js';
import { ConfigError } from '../errors.js';
import { countSchema } from '../numbers.js';

/** A rate is a share of trials: from 0 to 1. */
const share = z.number().min(0).max(1);

const rateFields = {
  scored: countSchema,
  passes: countSchema,
  passRate: share.nullable(),
  interval: z.object({ low: share, high: share }),
};

interface Rate {
  scored: number;
  passes: number;
  passRate: number | null;
  interval: { low: number; high: number };
}

/**
 * The numbers of a rate must agree with each other, as `summarize` writes them: a rate of
 * 0.9 over 1 pass in 10, or an interval that does not hold its rate, is a hand edit, and a
 * comparison made with it would report a regression (or hide one) that never happened.
 */
function checkRate(rate: Rate, ctx: z.RefinementCtx): void {
  // Numbers already refused on their own are not compared as well.
  const sound =
    countSchema.safeParse(rate.scored).success &&
    countSchema.safeParse(rate.passes).success &&
    share.nullable().safeParse(rate.passRate).success &&
    share.safeParse(rate.interval?.low).success &&
    share.safeParse(rate.interval?.high).success;
  if (!sound) return;
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (rate.passes > rate.scored)
    issue('passes', `expected at most scored (${rate.scored}), got ${rate.passes}`);
  const expected = rate.scored === 0 ? null : rate.passes / rate.scored;
  const agrees =
    expected === null
      ? rate.passRate === null
      : rate.passRate !== null && Math.abs(rate.passRate - expected) <= 1e-9;
  if (!agrees) issue('passRate', `expected passes / scored (${expected}), got ${rate.passRate}`);
  const { low, high } = rate.interval;
  if (low > high) issue('interval', `expected low <= high, got ${low} > ${high}`);
  else if (rate.passRate !== null && (rate.passRate < low || rate.passRate > high))
    issue('interval', `expected it to hold the rate ${rate.passRate}, got ${low} to ${high}`);
}

const names = z.array(z.string());

/** The fields of an `EvalSummary` that `compareSummaries` reads, no more. */
export const previousSummarySchema = z.object({
  schemaVersion: z.literal(1),
  harnessVersion: z.string(),
  suite: z.object({ name: z.string(), sha256: z.string() }),
  n: countSchema.min(1),
  startedAt: z.string(),
  providers: names,
  models: names,
  runtimes: names.optional(),
  imageIds: names,
  catalogHashes: z.record(z.string(), names),
  tasks: z.array(z.object({ taskId: z.string(), ...rateFields }).superRefine(checkRate)),
  overall: z.object(rateFields).superRefine(checkRate),
});

export type PreviousSummary = z.infer<typeof previousSummarySchema>;

/**
 * `file` (absolute) as a summary to compare with; a `ConfigError` naming the file (as
 * `displayPath`), the line, the field, what was expected and what was found.
 */
export async function readPreviousSummary(
  file: string,
  displayPath: string = file,
): Promise<PreviousSummary> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`--compare: cannot read ${displayPath}: ${(error as Error).message}`);
  }
  // JSON is YAML 1.2, so the YAML validator points at the line and column of each problem.
  return parseYamlWithSchema(file, text, previousSummarySchema, { displayPath });
}
