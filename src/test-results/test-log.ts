/**
 * Per-test results read from a test command's own output, for repos that write no report
 * file: pytest's `-rA` summary (and `-v` lines), unittest's verbose lines, vitest's, jest's
 * and mocha's verbose reporters, read as SWE-bench's log parsers read them.
 *
 * The output is the sandbox's, printed by code the agent may have written, so it is hostile
 * data: its size, its line count and each line's length are capped, escape sequences and
 * other control characters are taken out before a line is looked at (a carriage return
 * shows only what follows it, as a terminal would), and a test output that lies cannot make
 * a test pass that the runner failed: a name seen as failed anywhere is failed, whatever
 * else says it passed (the runner's own summary names every failure). Output that says no
 * test failed while the command exited non-zero is not believed at all.
 */
import { TEST_LOG_FORMATS, type TestLogFormat, type TestStatus } from '../outcomes.js';
import { ReportRefused, type TestCaseResult, type TestReport } from './junit.js';
import { parsePytestLog, parseUnittestLog } from './log-python.js';
import { parseJestLog, parseMochaLog, parseVitestLog } from './log-javascript.js';

/** The runners whose console output can be read, by the name a catalog gives them. */
export const LOG_FORMATS = TEST_LOG_FORMATS;
export type LogFormat = TestLogFormat;

export interface LogLimits {
  /** Bytes of output looked at (the exec's own cap keeps its head and tail). */
  maxBytes: number;
  maxLines: number;
  /** Longer lines are skipped: no runner prints a result line that long. */
  maxLineChars: number;
  maxTests: number;
  maxNameChars: number;
}

export const LOG_LIMITS: LogLimits = {
  maxBytes: 8 * 1024 * 1024,
  maxLines: 500_000,
  maxLineChars: 4096,
  maxTests: 50_000,
  maxNameChars: 1000,
};

/** One result line as a parser read it: the name(s) it answers to and how it ended. */
export interface LogEntry {
  /** The name as the runner prints it (pytest's node id, vitest's `file > suite > name`). */
  id: string;
  /** Other names the same test goes by (unittest's pre-3.12 form, the name without its file). */
  aliases?: string[];
  status: Exclude<TestStatus, 'missing'>;
}

// ANSI escape sequences: CSI (colours, cursor moves), OSC (titles, links), and two-byte ones.
// eslint-disable-next-line no-control-regex
const ESCAPES = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-Z\\-_]/g;
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * The output as lines a parser may look at: escapes and control characters out, a carriage
 * return leaving only what follows it, overlong lines dropped, at most `maxLines`.
 */
export function logLines(text: string, limits: LogLimits = LOG_LIMITS): string[] {
  const bytes = Buffer.byteLength(text);
  if (bytes > limits.maxBytes)
    throw new ReportRefused(`the test output is ${bytes} bytes, more than the ${limits.maxBytes} read`);
  const lines: string[] = [];
  for (const raw of text.split('\n')) {
    if (lines.length >= limits.maxLines)
      throw new ReportRefused(`the test output has more than ${limits.maxLines} lines`);
    if (raw.length > limits.maxLineChars * 4) continue;
    let line = raw.replace(ESCAPES, '').replace(/\r+$/, '');
    const cr = line.lastIndexOf('\r');
    if (cr >= 0) line = line.slice(cr + 1);
    line = line.replace(CONTROLS, '');
    if (line.length > limits.maxLineChars) continue;
    lines.push(line);
  }
  return lines;
}

const PARSERS: Record<LogFormat, (lines: readonly string[]) => LogEntry[]> = {
  pytest: parsePytestLog,
  unittest: parseUnittestLog,
  vitest: parseVitestLog,
  jest: parseJestLog,
  mocha: parseMochaLog,
};

export interface ParseLogOptions {
  /** The test command's exit code: non-zero output that names no failure is not believed. */
  exitCode: number;
  limits?: LogLimits;
}

/** The report a test output makes, or `ReportRefused` with the reason. */
export function parseTestLog(format: LogFormat, text: string, options: ParseLogOptions): TestReport {
  const limits = options.limits ?? LOG_LIMITS;
  const entries = PARSERS[format](logLines(text, limits));
  const tests = mergeEntries(entries, limits);
  if (tests.length === 0)
    throw new ReportRefused(
      `the test output holds no ${format} result line (is the runner's verbose output on?)`,
    );
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const t of tests) counts[t.status]++;
  // A patch can print a runner's "passed" lines itself; a run that exited non-zero with no
  // failure to show for it is not the run those lines describe (SWE-bench checks the same).
  if (options.exitCode !== 0 && counts.failed === 0)
    throw new ReportRefused(
      `the test command exited with code ${options.exitCode}, yet its output names no failing test: the output is not believed`,
    );
  return { format, tests, counts };
}

/** Failed over skipped over passed: a name seen failing anywhere did not pass. */
const RANK: Record<LogEntry['status'], number> = { failed: 2, skipped: 1, passed: 0 };

/** One result per name, each with every alias it was seen under. */
function mergeEntries(entries: readonly LogEntry[], limits: LogLimits): TestCaseResult[] {
  const byId = new Map<string, { status: LogEntry['status']; aliases: Set<string> }>();
  for (const entry of entries) {
    const names = [entry.id, ...(entry.aliases ?? [])];
    if (names.some((n) => n.length > limits.maxNameChars || n.trim() === '')) continue;
    const seen = byId.get(entry.id);
    if (seen) {
      if (RANK[entry.status] > RANK[seen.status]) seen.status = entry.status;
      for (const a of entry.aliases ?? []) seen.aliases.add(a);
      continue;
    }
    if (byId.size >= limits.maxTests)
      throw new ReportRefused(`the test output names more than ${limits.maxTests} tests`);
    byId.set(entry.id, { status: entry.status, aliases: new Set(entry.aliases ?? []) });
  }
  return [...byId].map(([id, { status, aliases }]) => {
    aliases.delete(id);
    return { id, suites: [], name: id, status, ...(aliases.size > 0 ? { aliases: [...aliases] } : {}) };
  });
}
