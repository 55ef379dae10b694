/** What every runner-output parser (`log-python.ts`, `log-javascript.ts`) gives `test-log.ts`. */
import type { TestStatus } from '../outcomes.js';

/** One result line as a parser read it: the name(s) it answers to and how it ended. */
export interface LogEntry {
  /** The name as the runner prints it (pytest's node id, vitest's `file > suite > name`). */
  id: string;
  /** Other names the same test goes by (unittest's pre-3.12 form, the name without its file). */
  aliases?: string[];
  status: Exclude<TestStatus, 'missing'>;
}
