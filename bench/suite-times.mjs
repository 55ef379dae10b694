/**
 * The test suite's time, per file and in total, from the files a full `npm test` leaves:
 * `.vitest-report.json` (vitest's JSON report: every test, its result and duration) and
 * `.vitest-times.json` (tests/suite-times-reporter.ts: each file's real wall time, hooks and
 * imports included, its group, and the run's wall time and machine load). Without the second
 * file a file's time is only the sum of its tests (what the JSON report knows).
 *
 * Usage: node bench/suite-times.mjs [--report FILE] [--times FILE] [--compare OLD-REPORT] [--no-save]
 *
 * Prints the table and saves it as `bench/results/suite-times-<date>-<git sha>.json` and
 * `bench/results/suite-times-latest.json` (the latter also orders the next run's files,
 * longest first: tests/suite-sequencer.ts). `--compare` names the JSON report of an earlier
 * run (another branch, the run before a change) and lists every test of it that this run does
 * not have: the check that a faster suite dropped nothing. `npm run bench` adds the same
 * table to its results when a report is present (see run.mjs).
 *
 * Exit codes: 0 written, 1 a test of the compared run is missing, 2 bad usage or no report.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const USAGE =
  'usage: node bench/suite-times.mjs [--report FILE] [--times FILE] [--compare OLD-REPORT] [--no-save]';

/**
 * @typedef {{ fullName: string, title: string, status: string, duration?: number | null }} Assertion
 * @typedef {{ name: string, status: string, startTime: number, endTime: number, assertionResults: Assertion[] }} FileResult
 * @typedef {{ numTotalTests: number, numPassedTests: number, numFailedTests: number, numPendingTests: number, numTodoTests: number, startTime: number, success: boolean, testResults: FileResult[] }} JsonReport
 * @typedef {{ file: string, project: string, queuedAt: number, endedAt: number, wallMs: number, collectMs: number, tests: number, state: string }} FileTime
 * @typedef {{ version: 1, startedAt: string, finishedAt: string, wallMs: number, state: string, machine?: { cpus: number, loadAtStart: number, loadAtEnd: number }, files: FileTime[] }} SuiteTimes
 */

/** @param {string} file @param {string} what */
async function readJson(file, what) {
  let text;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw Object.assign(new Error(`${what} ${file}: ${/** @type {Error} */ (error).message}`), {
      exitCode: 2,
    });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw Object.assign(new Error(`${what} ${file}: not JSON (${/** @type {Error} */ (error).message})`), {
      exitCode: 2,
    });
  }
}

/** @param {unknown} report @param {string} file @returns {JsonReport} */
function checkReport(report, file) {
  const r = /** @type {Partial<JsonReport>} */ (report);
  if (!r || !Array.isArray(r.testResults) || typeof r.startTime !== 'number')
    throw Object.assign(new Error(`${file}: not a vitest JSON report (no testResults or startTime)`), {
      exitCode: 2,
    });
  return /** @type {JsonReport} */ (r);
}

/**
 * A test file as the checkout names it; a report made in another checkout (another branch's
 * worktree) names its files under that checkout, from its `tests/` folder on.
 *
 * @param {string} root @param {string} file
 */
function rel(root, file) {
  if (!isAbsolute(file)) return file;
  const inside = relative(root, file);
  if (!inside.startsWith('..')) return inside;
  const at = file.indexOf('/tests/');
  return at >= 0 ? file.slice(at + 1) : inside;
}

/**
 * The per-file table and the totals of one run.
 *
 * @param {{ root: string, report: JsonReport, times?: SuiteTimes }} input
 */
export function summarize({ root, report, times }) {
  /** @type {Map<string, FileTime>} */
  const measured = new Map((times?.files ?? []).map((f) => [f.file, f]));
  const files = report.testResults.map((result) => {
    const file = rel(root, result.name);
    const tests = result.assertionResults;
    const testsMs = tests.reduce((sum, t) => sum + (t.duration ?? 0), 0);
    const real = measured.get(file);
    const slowest = [...tests]
      .sort((a, b) => (b.duration ?? 0) - (a.duration ?? 0))
      .slice(0, 3)
      .map((t) => ({ test: t.fullName, ms: Math.round(t.duration ?? 0) }));
    return {
      file,
      project: real?.project ?? null,
      // Without the reporter's file: from the first test's start to the last test's end.
      wallMs: Math.round(real?.wallMs ?? result.endTime - result.startTime),
      testsMs: Math.round(testsMs),
      tests: tests.length,
      failed:
        tests.filter((t) => t.status === 'failed').length +
        (result.status === 'failed' && !tests.some((t) => t.status === 'failed') ? 1 : 0),
      slowest,
    };
  });
  files.sort((a, b) => b.wallMs - a.wallMs || a.file.localeCompare(b.file));
  const ends = report.testResults.map((r) => r.endTime);
  const wallMs = times?.wallMs ?? (ends.length ? Math.max(...ends) - report.startTime : 0);
  /** @type {Record<string, { files: number, tests: number, fileMs: number, spanMs: number }>} */
  const projects = {};
  for (const f of times?.files ?? []) {
    const p = (projects[f.project] ??= {
      files: 0,
      tests: 0,
      fileMs: 0,
      spanMs: 0,
      first: Infinity,
      last: 0,
    });
    p.files += 1;
    p.tests += f.tests;
    p.fileMs += f.wallMs;
    p.first = Math.min(p.first, f.queuedAt);
    p.last = Math.max(p.last, f.endedAt);
  }
  for (const p of Object.values(projects)) {
    p.spanMs = p.last - p.first;
    delete p.first;
    delete p.last;
  }
  return {
    run: {
      startedAt: times?.startedAt ?? new Date(report.startTime).toISOString(),
      wallMs: Math.round(wallMs),
      wallFrom: times ? 'reporter' : 'json-report',
      state: times?.state ?? (report.success ? 'passed' : 'failed'),
      ...(times?.machine ? { machine: times.machine } : {}),
    },
    totals: {
      files: files.length,
      tests: report.numTotalTests,
      passed: report.numPassedTests,
      failed: files.reduce((sum, f) => sum + f.failed, 0),
      skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0),
      fileMs: files.reduce((sum, f) => sum + f.wallMs, 0),
      testsMs: files.reduce((sum, f) => sum + f.testsMs, 0),
    },
    projects,
    files,
  };
}

/**
 * Tests of `before` that `after` does not have, by full name (a test moved to another file
 * keeps its name, so moving is not dropping), and how many are new.
 *
 * @param {JsonReport} before @param {JsonReport} after
 */
export function compareReports(before, after) {
  /** @param {JsonReport} r */
  const names = (r) => {
    /** @type {Map<string, number>} */
    const counts = new Map();
    for (const f of r.testResults)
      for (const t of f.assertionResults) counts.set(t.fullName, (counts.get(t.fullName) ?? 0) + 1);
    return counts;
  };
  const [was, now] = [names(before), names(after)];
  const missing = [];
  for (const [name, count] of was) for (let i = now.get(name) ?? 0; i < count; i++) missing.push(name);
  let added = 0;
  for (const [name, count] of now) added += Math.max(0, count - (was.get(name) ?? 0));
  return { testsBefore: before.numTotalTests, testsAfter: after.numTotalTests, missing, added };
}

/** @param {number} ms */
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
/** @param {number} ms */
const minutes = (ms) => {
  const total = Math.round(ms / 1000);
  return `${Math.floor(total / 60)}m${String(total % 60).padStart(2, '0')}s`;
};

/** The printed table: the run's totals, then one row per file, longest first. @param {ReturnType<typeof summarize>} s */
export function formatSuiteTable(s) {
  const load = s.run.machine
    ? `, ${s.run.machine.cpus} CPUs, load ${s.run.machine.loadAtStart} -> ${s.run.machine.loadAtEnd}`
    : '';
  const lines = [
    `Test suite: ${minutes(s.run.wallMs)} wall (${s.run.wallFrom}${load}), ${s.totals.files} files, ${s.totals.tests} tests (${s.totals.passed} passed, ${s.totals.failed} failed, ${s.totals.skipped} skipped), file time ${minutes(s.totals.fileMs)}`,
  ];
  for (const [name, p] of Object.entries(s.projects))
    lines.push(
      `  ${name}: ${p.files} files, ${p.tests} tests, ${minutes(p.spanMs)} from its first file to its last, file time ${minutes(p.fileMs)}`,
    );
  const rows = [
    ['file', 'group', 'wall', 'in tests', 'tests'],
    ...s.files.map((f) => [f.file, f.project ?? '-', seconds(f.wallMs), seconds(f.testsMs), String(f.tests)]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (/** @type {string[]} */ r) =>
    `| ${r.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join(' | ')} |`;
  lines.push(
    line(rows[0]),
    `| ${widths.map((w, i) => (i < 2 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`,
  );
  for (const r of rows.slice(1)) lines.push(line(r));
  return lines;
}

/**
 * What `npm run bench` adds to its results: the summary of the report in this checkout, or
 * undefined when there is none.
 *
 * @param {string} root
 */
export async function suiteTimesOf(root) {
  const reportFile = join(root, '.vitest-report.json');
  if (!existsSync(reportFile)) return undefined;
  const report = checkReport(await readJson(reportFile, 'JSON report'), reportFile);
  const timesFile = join(root, '.vitest-times.json');
  const times = existsSync(timesFile) ? await readJson(timesFile, 'file times') : undefined;
  return summarize({ root, report, ...(times ? { times } : {}) });
}

/** @param {string[]} argv */
function parseArgs(argv) {
  const options = {
    report: join(PACKAGE_ROOT, '.vitest-report.json'),
    /** @type {string | undefined} */
    times: undefined,
    /** @type {string | undefined} */
    compare: undefined,
    save: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--'))
        throw Object.assign(new Error(`${arg}: expected a file\n${USAGE}`), { exitCode: 2 });
      return v;
    };
    if (arg === '--report') options.report = value();
    else if (arg === '--times') options.times = value();
    else if (arg === '--compare') options.compare = value();
    else if (arg === '--no-save') options.save = false;
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(`${USAGE}\n`);
      return undefined;
    } else throw Object.assign(new Error(`unknown option ${arg}\n${USAGE}`), { exitCode: 2 });
  }
  // The reporter's file lies beside the report it belongs to.
  options.times ??= join(dirname(options.report), '.vitest-times.json');
  return options;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!options) return 0;
  const report = checkReport(await readJson(options.report, 'JSON report'), options.report);
  const times = existsSync(options.times) ? await readJson(options.times, 'file times') : undefined;
  if (!times)
    process.stderr.write(`suite-times: no ${options.times}: a file's time is the sum of its tests only\n`);
  const summary = summarize({ root: PACKAGE_ROOT, report, ...(times ? { times } : {}) });
  const compared = options.compare
    ? compareReports(checkReport(await readJson(options.compare, 'compared report'), options.compare), report)
    : undefined;
  const lines = formatSuiteTable(summary);
  if (compared) {
    lines.push(
      '',
      `Compared with ${options.compare}: ${compared.testsBefore} tests then, ${compared.testsAfter} now, ${compared.added} new, ${compared.missing.length} missing`,
      ...compared.missing.map((name) => `  missing: ${name}`),
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  if (options.save) {
    const { gitInfo } = await import('./report.mjs');
    const git = gitInfo(PACKAGE_ROOT);
    const date = (summary.run.startedAt ?? new Date().toISOString()).slice(0, 10);
    const saved = {
      schemaVersion: 1,
      date,
      git,
      ...summary,
      ...(compared ? { compared: { with: options.compare, ...compared } } : {}),
      table: lines,
    };
    const dir = join(PACKAGE_ROOT, 'bench', 'results');
    await mkdir(dir, { recursive: true });
    const text = `${JSON.stringify(saved, null, 2)}\n`;
    const name = `suite-times-${date}-${git.sha}.json`;
    for (const file of [join(dir, name), join(dir, 'suite-times-latest.json')]) {
      const temp = `${file}.${process.pid}.tmp`;
      await writeFile(temp, text);
      await rename(temp, file);
    }
    process.stdout.write(
      `results: ${relative(process.cwd(), join(dir, name))} (and bench/results/suite-times-latest.json)\n`,
    );
  }
  return compared && compared.missing.length > 0 ? 1 : 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    (code) => process.exit(code),
    (error) => {
      process.stderr.write(`suite-times: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(/** @type {{ exitCode?: number }} */ (error).exitCode ?? 1);
    },
  );
}
