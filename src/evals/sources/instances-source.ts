/**
 * SWE-bench-style instances as a task source: a JSONL file of instances, or an instance suite
 * (YAML with `instances:`) around one. Each instance becomes a task with its own working copy
 * (`instances-materialize.ts`). Its section of the summary says what an oracle run found
 * (gold patches that fail, tests that flake; written to the quarantine file) or what a
 * quarantine file left out.
 */
import { rowsOf, type ReportSection } from '../report-tables.js';
import type { TrialResult } from '../types.js';
import {
  bareInstanceSuite,
  loadInstanceSuite,
  looksLikeInstanceSuite,
  type InstanceSuite,
} from './instances.js';
import { materializeInstances, type PredictionsFound } from './instances-materialize.js';
import { loadPredictions, swebenchReport, type Predictions, type SwebenchReport } from './predictions.js';
import path from 'node:path';
import { ConfigError } from '../../errors.js';
import { oracleFindings, readQuarantine, writeQuarantine, type Quarantine } from './quarantine.js';
import type { MadeSuite, SourceFlags, TaskSource } from './task-source.js';

/** The instances section of the summary: what the oracle found, or what a quarantine file left out. */
export interface InstancesSummary {
  /** The gold patches were applied instead of a model. */
  oracle: boolean;
  /** Instances whose own gold patch does not resolve them: never scored as a model's failure. */
  goldFails: string[];
  /** With the oracle: instances whose gold patch never ran (an `error` of the environment), with why. */
  goldErrors?: Record<string, string>;
  /** With the oracle: named tests that passed in some runs and not in others, per instance. */
  flakyTests?: Record<string, string[]>;
  /** Tests left out of FAIL_TO_PASS/PASS_TO_PASS, per instance. */
  quarantined: Record<string, string[]>;
  /** With `--predictions`: the file scored, its models, and what it left out or named wrongly. */
  predictions?: PredictionsSummary;
}

export interface PredictionsSummary extends PredictionsFound {
  /** The predictions file as the command line named it. */
  file: string;
  /** The results under SWE-bench's report keys (`resolved_ids`, `empty_patch_ids`, ...). */
  swebench?: SwebenchReport;
}

declare module '../summary.js' {
  interface SourceSections {
    /** An eval of SWE-bench-style instances: what the oracle found, or what a quarantine file left out. */
    instances?: InstancesSummary;
  }
}

const isJsonl = (file: string) => /\.jsonl$/i.test(file);

export const instancesSource: TaskSource = {
  name: 'instances',
  title: 'instances (JSONL)',
  flags: ['repos', 'visibleTests', 'oracle', 'quarantine', 'predictions'],
  async recognises(input) {
    if (isJsonl(input.file)) return true;
    const text = await input.text();
    return text !== undefined && looksLikeInstanceSuite(text);
  },
  async open(input, flags) {
    const source = isJsonl(input.file)
      ? await bareInstanceSuite(input.file, input.displayPath)
      : await loadInstanceSuite(input.file, input.displayPath);
    const quarantine = flags.quarantine && !flags.oracle ? await readQuarantine(flags.quarantine) : undefined;
    if (flags.oracle && flags.predictions)
      throw new ConfigError('--oracle and --predictions both say what to apply: give one');
    const predictions = flags.predictions
      ? await loadPredictions(
          flags.predictions,
          path.relative(input.cwd, flags.predictions) || flags.predictions,
        )
      : undefined;
    return {
      name: source.name,
      make: (context) => makeInstances(source, flags, quarantine, context, predictions),
    };
  },
  section: {
    place: 'before-provenance',
    report: (summary) =>
      summary.instances
        ? [
            ...(summary.instances.predictions ? [predictionsSection(summary.instances.predictions)] : []),
            instancesSection(summary.instances),
          ]
        : [],
    lines: (summary, flags) =>
      summary.instances
        ? [
            ...(summary.instances.predictions ? predictionLines(summary.instances.predictions) : []),
            ...instanceLines(summary.instances, flags.quarantine),
          ]
        : [],
  },
};

/** Each instance's working copy, catalog and ticket under the out folder; the section from the results. */
async function makeInstances(
  source: InstanceSuite,
  flags: SourceFlags,
  quarantine: Quarantine | undefined,
  { outDir, say }: { outDir: string; say: (line: string) => void },
  predictions: Predictions | undefined,
): Promise<MadeSuite> {
  const made = await materializeInstances(source, {
    outDir,
    ...(flags.repos ? { repos: flags.repos } : {}),
    ...(flags.visibleTests ? { visibleTests: true } : {}),
    ...(flags.oracle ? { oracle: true } : {}),
    ...(quarantine ? { quarantine } : {}),
    ...(predictions ? { predictions } : {}),
    onLine: say,
  });
  const scored =
    made.predictions && flags.predictions
      ? { ...made.predictions, file: path.basename(flags.predictions) }
      : undefined;
  const oracle = flags.oracle === true;
  return {
    suite: made.suite,
    async summarize(results: readonly TrialResult[]) {
      const findings = oracle ? oracleFindings(results) : undefined;
      const instances: InstancesSummary = {
        oracle,
        goldFails: findings ? findings.goldFails : made.goldFails,
        ...(findings && Object.keys(findings.goldErrors).length > 0
          ? { goldErrors: findings.goldErrors }
          : {}),
        ...(findings ? { flakyTests: findings.flakyTests } : {}),
        quarantined: findings?.flakyTests ?? quarantine?.tests ?? {},
        ...(scored
          ? {
              predictions: {
                ...scored,
                swebench: swebenchReport(
                  source.instances.instances.map((i) => i.instance_id),
                  scored,
                  results,
                ),
              },
            }
          : {}),
      };
      if (findings && flags.quarantine) {
        await writeQuarantine(
          flags.quarantine,
          findings,
          made.suite.tasks.map((t) => t.id),
        );
      }
      return { instances };
    },
  };
}

/** A gold patch that never ran is the environment's `error` (the outcome's one spelling), not a fail. */
const GOLD_ERROR = 'error, the gold patch never ran';

/**
 * The report's flags of an instance eval: instances whose gold patch fails (left out of
 * scoring, never a model's failure), and tests left out as flaky.
 */
function instancesSection(info: InstancesSummary): ReportSection {
  const rows: string[][] = [];
  for (const id of info.goldFails)
    rows.push([
      id,
      info.oracle
        ? 'the gold patch does not resolve it'
        : 'gold patch fails (quarantine file): not run, not scored',
      '-',
    ]);
  for (const [id, reason] of Object.entries(info.goldErrors ?? {}))
    rows.push([id, `${GOLD_ERROR}: ${reason}`, '-']);
  for (const [id, list] of Object.entries(info.flakyTests ?? {}))
    rows.push([id, 'tests flake under the gold patch', list.join('; ')]);
  if (!info.oracle)
    for (const [id, list] of Object.entries(info.quarantined))
      if (list.length > 0)
        rows.push([id, 'quarantined tests left out of FAIL_TO_PASS/PASS_TO_PASS', list.join('; ')]);
  if (rows.length === 0)
    rows.push([
      'all',
      info.oracle ? 'every gold patch resolved its instance; no test flaked' : 'nothing quarantined',
      '-',
    ]);
  return {
    heading: 'Gold patches and quarantined tests',
    table: { header: ['instance', 'flag', 'tests'], rows: rowsOf(rows) },
  };
}

/** What an oracle run found, or which instances a quarantine file left out. */
function instanceLines(info: InstancesSummary, quarantineFile: string | undefined): string[] {
  const lines: string[] = [];
  if (info.goldFails.length > 0)
    lines.push(
      info.oracle
        ? `gold patch does not resolve: ${info.goldFails.join(', ')}`
        : `left out, their gold patch fails (quarantine file): ${info.goldFails.join(', ')}`,
    );
  for (const [id, reason] of Object.entries(info.goldErrors ?? {}))
    lines.push(`${GOLD_ERROR}: ${id}: ${reason}`);
  const flaky = Object.entries(info.flakyTests ?? {});
  const errors = Object.keys(info.goldErrors ?? {}).length;
  if (info.oracle) {
    if (flaky.length === 0 && info.goldFails.length === 0 && errors === 0)
      lines.push('oracle: every gold patch resolved its instance, no test flaked');
    for (const [id, tests] of flaky) lines.push(`flaky under the gold patch: ${id}: ${tests.join('; ')}`);
    if (quarantineFile) lines.push(`quarantine: ${quarantineFile}`);
  } else {
    const count = Object.values(info.quarantined).reduce((sum, list) => sum + list.length, 0);
    if (count > 0) lines.push(`${count} quarantined test(s) left out of FAIL_TO_PASS/PASS_TO_PASS`);
  }
  return lines;
}

/** The report's account of a predictions file: whose patches, and what was not scored. */
function predictionsSection(info: PredictionsSummary): ReportSection {
  const rows: string[][] = [[info.file, 'model', info.models.join('; ') || '-']];
  for (const id of info.noPrediction) rows.push([id, 'no prediction: not run, not scored', '-']);
  for (const id of info.unknown) rows.push([id, 'a prediction for an instance not in the suite', '-']);
  for (const id of info.emptyPatch)
    rows.push([id, 'empty patch: not run, scored as not resolved (no-changes)', '-']);
  for (const [id, files] of Object.entries(info.testEditsReset ?? {}))
    rows.push([id, 'its changes to test patch files reset, as SWE-bench resets them', files.join('; ')]);
  return {
    heading: 'Predictions',
    table: { header: ['instance', 'flag', 'detail'], rows: rowsOf(rows) },
  };
}

function predictionLines(info: PredictionsSummary): string[] {
  const lines = [`predictions: ${info.file} (${info.models.join(', ') || 'no usable prediction'})`];
  const s = info.swebench;
  if (s)
    lines.push(
      `as SWE-bench counts: ${s.resolved_instances} resolved, ${s.unresolved_instances} unresolved, ${s.empty_patch_instances} empty patch, ${s.error_instances} error, ${s.incomplete_ids.length} incomplete (of ${s.total_instances})`,
    );
  if (info.noPrediction.length > 0)
    lines.push(`no prediction (not run, not scored): ${info.noPrediction.join(', ')}`);
  if (info.unknown.length > 0)
    lines.push(`predictions for instances not in the suite: ${info.unknown.join(', ')}`);
  if (info.emptyPatch.length > 0) lines.push(`empty patches: ${info.emptyPatch.join(', ')}`);
  for (const [id, files] of Object.entries(info.testEditsReset ?? {}))
    lines.push(`test patch files reset (as SWE-bench does): ${id}: ${files.join(', ')}`);
  return lines;
}
