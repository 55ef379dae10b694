/**
 * A task source: one format `eval` can be given (a suite file, SWE-bench-style instances,
 * Harbor task folders, ...), made into the one suite shape every eval runs (`../suite.ts`).
 * Each source implements `TaskSource` in a file of this folder and registers it in
 * `./index.ts`; `runSuite`, the summary and the reports ask the registry and know no source
 * by name. A source with something to say beyond the suite (what an oracle found, rewards)
 * adds a section to the summary under its own key, and shows it in the reports and the lines
 * `eval` prints.
 */
import type { ReportPlace, ReportSection } from '../report-tables.js';
import type { Suite } from '../suite.js';
import type { EvalSummary, SourceSections } from '../summary.js';
import type { TrialResult } from '../types.js';

/** What `eval` was given. */
export interface SourceInput {
  /** A file or a folder, absolute. */
  file: string;
  /** How messages name it (relative to the working directory). */
  displayPath: string;
  /** The working directory: where the command line's relative paths are read from. */
  cwd: string;
  /** The file's text, read once for every source that looks; undefined when it cannot be read (a folder, nothing there). */
  text(): Promise<string | undefined>;
}

/** The command line's flags that belong to task sources; each source says which it takes. */
export interface SourceFlags {
  /** `--repos`: the folder of local clones, absolute. */
  repos?: string;
  /** `--visible-tests`. */
  visibleTests?: boolean;
  /** `--oracle`: the gold patch or the solution instead of a model. */
  oracle?: boolean;
  /** `--quarantine`: the quarantine file, absolute (written with `oracle`, read without). */
  quarantine?: string;
  /** `--predictions`: another agent's patches to score (SWE-bench's predictions file), absolute. */
  predictions?: string;
}

export type SourceFlag = keyof SourceFlags;

/** Every source flag as the command line spells it, in the order messages list them. */
export const SOURCE_FLAGS: Readonly<Record<SourceFlag, string>> = {
  repos: '--repos',
  visibleTests: '--visible-tests',
  oracle: '--oracle',
  quarantine: '--quarantine',
  predictions: '--predictions',
};

export interface TaskSource {
  /** The name it is registered under. */
  readonly name: string;
  /** What it reads, as a message names it ("instances (JSONL)"). */
  readonly title: string;
  /** The source flags it takes; any other flag given is refused before anything is read. */
  readonly flags: readonly SourceFlag[];
  /** Whether `input` is in its format, by a cheap look (its name, its kind, a top-level key); nothing is validated yet. */
  recognises(input: SourceInput): Promise<boolean>;
  /** Reads and validates it (a `ConfigError` listing every problem); nothing is written yet. */
  open(input: SourceInput, flags: SourceFlags): Promise<OpenedSource>;
  /** How its section of the summary is shown; absent for a source that adds none. */
  readonly section?: SectionView;
}

export interface OpenedSource {
  /** Names the eval (its default out folder). */
  name: string;
  /** The suite, with whatever it needs written under the eval's out folder (working copies, catalogs, tickets). */
  make(context: { outDir: string; say: (line: string) => void }): Promise<MadeSuite>;
}

export interface MadeSuite {
  suite: Suite;
  /** Its section of the summary, from the trials' results; written to summary.json under its key. */
  summarize?(results: readonly TrialResult[]): Promise<SourceSections>;
}

/** A source's section of the summary, as the reports and `eval` show it. */
export interface SectionView {
  /** Where in report.md and report.html its sections go. */
  place: ReportPlace;
  /** Its report sections; none when `summary` has no section of its own. */
  report(summary: EvalSummary): ReportSection[];
  /** What `eval` prints of it after the per-task lines; flags as the command line gave them. */
  lines(summary: EvalSummary, flags: SourceFlags): string[];
}
