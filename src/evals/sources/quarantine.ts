/**
 * What an oracle run learns about a suite, kept for the evals after it: tests that flaked
 * across the oracle's N runs (left out of FAIL_TO_PASS/PASS_TO_PASS, and recorded in every
 * trial they were left out of), and instances whose own gold patch does not resolve them
 * (never scored as a model's failure).
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { writeFileAtomic } from '../../atomic-write.js';
import { ConfigError } from '../../errors.js';
import type { TrialResult } from '../types.js';

export const quarantineSchema = z.strictObject({
  version: z.literal(1),
  /** Per instance id, the test ids to leave out. */
  tests: z.record(z.string(), z.array(z.string())),
  /** Instances whose gold patch did not resolve them in any oracle run. */
  goldFails: z.array(z.string()),
});

export type Quarantine = z.infer<typeof quarantineSchema>;

export async function readQuarantine(file: string): Promise<Quarantine> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read the quarantine file ${file}`, [], {
      cause: error,
      hint: 'write one with `sandbox-harness eval <instances> --oracle -n 3 --quarantine FILE`',
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError(`${file} is not JSON (a quarantine file from \`eval --oracle --quarantine\`)`);
  }
  const parsed = quarantineSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(
      `${file} is not a quarantine file: ${issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid'}`,
    );
  }
  return parsed.data;
}

export interface OracleFindings {
  /** Instances whose gold patch ran and left a named test failing in every run. */
  goldFails: string[];
  /**
   * Instances whose gold patch never got as far as the named tests in any run (the image did
   * not build, the interpreter or the test command is missing): the environment's `error`,
   * with the first run's reason; neither a pass nor a fail of the gold patch.
   */
  goldErrors: Record<string, string>;
  /** Instances some oracle runs resolved and some did not. */
  flakyInstances: string[];
  /** Per instance, named tests that passed in some runs and not in others. */
  flakyTests: Record<string, string[]>;
}

/**
 * What N oracle runs say: a named test that did not pass in some runs with a report, but did
 * in others, flakes; an instance no run resolved fails with its own gold patch.
 */
export function oracleFindings(results: readonly TrialResult[]): OracleFindings {
  const byTask = new Map<string, TrialResult[]>();
  for (const r of results) {
    if (r.category === 'infrastructure' || r.category === 'interrupted') continue;
    const list = byTask.get(r.taskId) ?? [];
    list.push(r);
    byTask.set(r.taskId, list);
  }
  const findings: OracleFindings = { goldFails: [], goldErrors: {}, flakyInstances: [], flakyTests: {} };
  for (const [task, trials] of byTask) {
    const resolved = trials.filter((t) => t.tests?.verdict === 'resolved').length;
    const ran = trials.some((t) => t.tests?.verdict === 'unresolved');
    if (resolved === 0 && ran) findings.goldFails.push(task);
    else if (resolved === 0) findings.goldErrors[task] = neverRan(trials[0]!);
    else if (resolved < trials.length) findings.flakyInstances.push(task);
    const reported = trials.filter((t) => t.tests && t.tests.verdict !== 'no-report');
    const failedIn = new Map<string, number>();
    for (const t of reported)
      for (const id of new Set(t.tests!.failing)) failedIn.set(id, (failedIn.get(id) ?? 0) + 1);
    const flaky = [...failedIn]
      .filter(([, n]) => n < reported.length)
      .map(([id]) => id)
      .sort();
    if (flaky.length > 0) findings.flakyTests[task] = flaky;
  }
  return findings;
}

/** Why a gold patch's run never reached the named tests, in the trial's own words. */
function neverRan(trial: TrialResult): string {
  return trial.error ?? trial.tests?.refused ?? `the run ended ${trial.category} before the named tests ran`;
}

/** Adds the findings to what the file already holds (earlier oracle runs of other instances). */
export async function writeQuarantine(
  file: string,
  findings: OracleFindings,
  ran: readonly string[],
): Promise<Quarantine> {
  let previous: Quarantine = { version: 1, tests: {}, goldFails: [] };
  try {
    previous = await readQuarantine(file);
  } catch (error) {
    if (!(error instanceof ConfigError) || !/cannot read/.test(error.message)) throw error;
  }
  const tests: Record<string, string[]> = {};
  for (const [id, list] of Object.entries(previous.tests)) if (!ran.includes(id)) tests[id] = list;
  for (const [id, list] of Object.entries(findings.flakyTests)) tests[id] = list;
  const goldFails = [...previous.goldFails.filter((id) => !ran.includes(id)), ...findings.goldFails].sort();
  const next: Quarantine = { version: 1, tests, goldFails };
  await writeFileAtomic(file, `${JSON.stringify(next, null, 2)}\n`);
  return next;
}
