/**
 * A previous `summary.json` read back for `eval --compare`. It is a file a person names, so
 * it may be from another version, hand-edited or not a summary at all: it is validated
 * against what the comparison reads (fields it does not read may be missing or anything),
 * and a problem names the file, the line, the field, what was expected and what was found.
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { parseYamlWithSchema } from '../yaml-validate.js';
import { ConfigError } from '../errors.js';

const rateFields = {
  scored: z.int().min(0),
  passes: z.int().min(0),
  passRate: z.number().min(0).max(1).nullable(),
  interval: z.object({ low: z.number(), high: z.number() }),
};

const names = z.array(z.string());

/** The fields of an `EvalSummary` that `compareSummaries` reads, no more. */
export const previousSummarySchema = z.object({
  schemaVersion: z.literal(1),
  harnessVersion: z.string(),
  suite: z.object({ name: z.string(), sha256: z.string() }),
  n: z.int().min(1),
  startedAt: z.string(),
  providers: names,
  models: names,
  runtimes: names.optional(),
  imageIds: names,
  catalogHashes: z.record(z.string(), names),
  tasks: z.array(z.object({ taskId: z.string(), ...rateFields })),
  overall: z.object(rateFields),
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
