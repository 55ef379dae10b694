/**
 * `attempts/<n>/test-results.json` in a run folder: every test of a verification's report and,
 * with named tests, the verdict of each. Read back by `inspect` and the viewer as data anyone
 * could have edited: validated, and capped before it is shown.
 */
import { z } from 'zod';
import { TEST_STATUSES, TEST_VERDICTS, type TestStatus } from '../outcomes.js';

const MAX_SHOWN = 100_000;

const named = z.object({ id: z.string(), status: z.enum(TEST_STATUSES) });

export const storedResultsSchema = z.object({
  tests: z
    .array(
      z.object({
        id: z.string(),
        status: z.enum(['passed', 'failed', 'skipped']),
        durationMs: z.number().nonnegative().optional(),
        message: z.string().optional(),
      }),
    )
    .max(MAX_SHOWN),
  refused: z.string().optional(),
  exitCode: z.number().int().optional(),
  named: z
    .object({
      verdict: z.enum(TEST_VERDICTS),
      failToPass: z.array(named).max(MAX_SHOWN),
      passToPass: z.array(named).max(MAX_SHOWN),
      quarantined: z.array(z.string()).max(MAX_SHOWN),
      reason: z.string().optional(),
    })
    .optional(),
});

export type StoredResults = z.infer<typeof storedResultsSchema>;

/** The stored results, or undefined when the text is not what the harness writes. */
export function parseStoredResults(text: string | undefined): StoredResults | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = storedResultsSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Failed first, then skipped and missing, then passed: what a reader looks for first. */
export function byAttention<T extends { status: TestStatus }>(tests: readonly T[]): T[] {
  const rank: Record<TestStatus, number> = { failed: 0, missing: 1, skipped: 2, passed: 3 };
  return [...tests].sort((a, b) => rank[a.status] - rank[b.status]);
}
