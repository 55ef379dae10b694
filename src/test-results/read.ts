/**
 * Reading a test report back from the sandbox the tests ran in: a bounded read of one
 * regular file (no link followed), then the parser's own checks; or, for a runner that
 * writes no report, its console output read by `test-log.ts`. Whatever goes wrong is a
 * reason on record, never an exception that fails the run: a missing or refused report
 * means the per-test results are unknown, and a task that names its tests is then not
 * resolved.
 */
import { SandboxFileError } from '../errors.js';
import { WORKSPACE, type Sandbox } from '../sandbox/types.js';
import { shellQuote } from '../sandbox/shell.js';
import type { TestLogFormat } from '../outcomes.js';
import { JUNIT_LIMITS, parseJunit, ReportRefused, type TestReport } from './junit.js';
import { parseTestLog } from './test-log.js';

export interface ReportConfig {
  /** A JUnit file, or the runner whose console output holds the results. */
  format: 'junit' | TestLogFormat;
  /** Workspace-relative; with `junit` only. */
  path?: string | undefined;
}

/** What the test command printed (every layer's output) and how it exited. */
export interface TestOutput {
  output: string;
  exitCode: number;
}

export type ReportReading = { ok: true; report: TestReport } | { ok: false; reason: string };

/**
 * A report the repo or an earlier command left behind must never pass for this run's: the
 * file is removed before the tests start.
 */
export async function clearTestReport(
  box: Sandbox,
  config: ReportConfig,
  signal?: AbortSignal,
): Promise<void> {
  if (config.format !== 'junit' || config.path === undefined) return;
  await box.exec(`rm -rf -- ${shellQuote(config.path)}`, {
    timeoutMs: 30_000,
    ...(signal ? { signal } : {}),
  });
}

export async function readTestReport(
  box: Sandbox,
  config: ReportConfig,
  run: TestOutput,
  signal?: AbortSignal,
): Promise<ReportReading> {
  if (config.format !== 'junit') return readTestLog(config.format, run);
  if (config.path === undefined) return { ok: false, reason: 'no report path in the catalog' };
  let bytes: Buffer;
  try {
    bytes = await box.readFile(config.path, {
      maxBytes: JUNIT_LIMITS.maxBytes,
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    if (!(error instanceof SandboxFileError)) throw error;
    return { ok: false, reason: readProblem(config.path, error) };
  }
  try {
    return { ok: true, report: parseJunit(bytes, { root: WORKSPACE }) };
  } catch (error) {
    if (error instanceof ReportRefused)
      return { ok: false, reason: `${config.path} refused: ${error.reason}` };
    throw error;
  }
}

/** The results the runner printed, or why they are not believed. */
export function readTestLog(format: TestLogFormat, run: TestOutput): ReportReading {
  try {
    return { ok: true, report: parseTestLog(format, run.output, { exitCode: run.exitCode }) };
  } catch (error) {
    if (error instanceof ReportRefused)
      return { ok: false, reason: `the ${format} output refused: ${error.reason}` };
    throw error;
  }
}

function readProblem(path: string, error: SandboxFileError): string {
  switch (error.problem) {
    case 'missing':
      return `the test command wrote no report at ${path}`;
    case 'too-large':
      return `${path} refused: larger than ${JUNIT_LIMITS.maxBytes} bytes`;
    case 'through-link':
      return `${path} refused: it is a symlink, or a folder on the way is`;
    case 'not-a-file':
    case 'is-a-directory':
      return `${path} refused: not a regular file`;
    default:
      return `${path} could not be read (${error.message})`;
  }
}
