/**
 * The registry of task sources: every format `eval` reads, by name, in the order they are
 * tried (the first that recognises what `eval` was given reads it). The suite file comes last:
 * it takes anything, so a file of no known format gets the suite file's errors. A new format
 * is a file in this folder implementing `TaskSource` (./task-source.ts) and one line here.
 */
import { readFile } from 'node:fs/promises';
import { listInWords } from '../../agent/tools/result-text.js';
import { UsageError } from '../../errors.js';
import type { ReportPlace, ReportSection } from '../report-tables.js';
import type { EvalSummary } from '../summary.js';
import { harborSource } from './harbor-source.js';
import { instancesSource } from './instances-source.js';
import { suiteSource } from './suite-source.js';
import {
  SOURCE_FLAGS,
  type SourceFlag,
  type SourceFlags,
  type SourceInput,
  type TaskSource,
} from './task-source.js';

export const TASK_SOURCES: readonly TaskSource[] = [instancesSource, harborSource, suiteSource];

/** What `eval` was given, its text read at most once whichever sources look at it. */
export function sourceInput(file: string, displayPath: string, cwd: string): SourceInput {
  let text: Promise<string | undefined> | undefined;
  return {
    file,
    displayPath,
    cwd,
    text: () => (text ??= readFile(file, 'utf8').catch(() => undefined)),
  };
}

/** The first source that recognises `input` (the suite file takes what no other does). */
export async function recogniseSource(
  input: SourceInput,
  sources: readonly TaskSource[] = TASK_SOURCES,
): Promise<TaskSource> {
  for (const source of sources) if (await source.recognises(input)) return source;
  throw new UsageError(`${input.displayPath}: no task source reads it`);
}

/**
 * Refuses source flags `source` does not take, naming every flag it does not take and the
 * sources that do ("--repos, --visible-tests and --quarantine are for instances (JSONL) only").
 */
export function checkSourceFlags(
  source: TaskSource,
  flags: SourceFlags,
  sources: readonly TaskSource[] = TASK_SOURCES,
): void {
  const all = Object.keys(SOURCE_FLAGS) as SourceFlag[];
  const refused = all.filter((flag) => !source.flags.includes(flag));
  if (!refused.some((flag) => Boolean(flags[flag]))) return;
  const takers = sources.filter((s) => s !== source && s.flags.some((flag) => refused.includes(flag)));
  throw new UsageError(
    `${listInWords(refused.map((flag) => SOURCE_FLAGS[flag]))} ${refused.length === 1 ? 'is' : 'are'} for ${listInWords(takers.map((s) => s.title))} only`,
  );
}

/** The report sections every source with a section in `summary` adds at `place`. */
export function sourceReportSections(summary: EvalSummary, place: ReportPlace): ReportSection[] {
  return TASK_SOURCES.flatMap((s) => (s.section?.place === place ? s.section.report(summary) : []));
}

/** The lines `eval` prints of every source's section in `summary` (flags as given on the command line). */
export function sourceLines(summary: EvalSummary, flags: SourceFlags): string[] {
  return TASK_SOURCES.flatMap((s) => s.section?.lines(summary, flags) ?? []);
}
