/**
 * Python runners' console output as per-test results (see `test-log.ts` for the rules every
 * parser here is held to):
 *
 * - pytest: the `-rA` short test summary (`PASSED tests/t.py::test_x[a b]`,
 *   `FAILED tests/t.py::C::test_y - AssertionError ...`) and `-v` lines
 *   (`tests/t.py::test_x PASSED [ 50%]`). A node id ends where its parameter brackets close,
 *   so ids with spaces, brackets and " - " inside them are read whole. XFAIL counts as passed
 *   (as SWE-bench grades it), XPASS too (a non-strict unexpected pass; a strict one is FAILED);
 *   `SKIPPED [n] file:line` lines name no test and are left out.
 * - unittest (and Django's runner) at verbosity 2: `test_x (pkg.mod.Class.test_x) ... ok`
 *   (Python 3.12+) and `test_x (pkg.mod.Class) ... ok` (earlier); a docstring's first line on
 *   the next line (`test_x (...)` then `Doc line. ... ok`); a status on a line of its own after
 *   output the test printed; subtests; and the `FAIL:` / `ERROR:` blocks of the summary, which
 *   name every failure again. Each test answers to both forms of its name, to
 *   `pkg.mod.Class.test_x`, and to its docstring line (SWE-bench's Django ids use it).
 */
import type { LogEntry } from './log-entry.js';

const PYTEST_STATUSES: Readonly<Record<string, LogEntry['status']>> = {
  PASSED: 'passed',
  FAILED: 'failed',
  ERROR: 'failed',
  SKIPPED: 'skipped',
  XFAIL: 'passed',
  XPASS: 'passed',
};

const PYTEST_SUMMARY = /^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+)$/;
const PYTEST_VERBOSE_STATUS = /^ (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: .*)?$/;

/**
 * The node id at the start of `text`: up to the bracket that closes its parameters when it
 * has some (`test_p[we[i]rd - id]`), else up to the first space. Undefined when a bracket
 * never closes (a cut line).
 */
export function leadingNodeId(text: string): string | undefined {
  const space = text.indexOf(' ');
  const open = text.indexOf('[');
  if (open < 0 || (space >= 0 && space < open)) return space < 0 ? text : text.slice(0, space);
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '[') depth++;
    else if (text[i] === ']' && --depth === 0) return text.slice(0, i + 1);
  }
  return undefined;
}

/** `tests/t.py::C::test_x[p]` also answers to the JUnit-style `tests/t.py > C > test_x[p]`. */
function pytestEntry(id: string, status: LogEntry['status']): LogEntry {
  const bracket = id.indexOf('[');
  const head = bracket < 0 ? id : id.slice(0, bracket);
  const parts = head.split('::');
  if (parts.length < 2) return { id, status };
  parts[parts.length - 1] += bracket < 0 ? '' : id.slice(bracket);
  return { id, status, aliases: [parts.join(' > ')] };
}

export function parsePytestLog(lines: readonly string[]): LogEntry[] {
  const entries: LogEntry[] = [];
  for (const line of lines) {
    const summary = PYTEST_SUMMARY.exec(line);
    if (summary) {
      const rest = summary[2]!;
      // `SKIPPED [2] tests/t.py:14: reason` names a place, not a test.
      if (rest.startsWith('[')) continue;
      const id = leadingNodeId(rest);
      if (id) entries.push(pytestEntry(id, PYTEST_STATUSES[summary[1]!]!));
      continue;
    }
    if (!line.includes('::') || line.startsWith(' ')) continue;
    const id = leadingNodeId(line);
    if (!id?.includes('::')) continue;
    const verbose = PYTEST_VERBOSE_STATUS.exec(line.slice(id.length));
    if (verbose) entries.push(pytestEntry(id, PYTEST_STATUSES[verbose[1]!]!));
  }
  return entries;
}

// `name (dotted)` with an optional subtest's ` (i=1)` or ` [label]`, then ` ... rest`.
const UNITTEST_HEADER = /^\s*([^\s()]+) \(([A-Za-z_][\w.]*)\)((?: \(.*\)| \[.*\])*) \.\.\.(?: (.*))?$/;
const UNITTEST_DOC_HEADER = /^([^\s()]+) \(([A-Za-z_][\w.]*)\)$/;
const UNITTEST_BLOCK = /^(FAIL|ERROR|UNEXPECTED SUCCESS): ([^\s()]+) \(([A-Za-z_][\w.]*)\)/;
const UNITTEST_ENDINGS: readonly (readonly [string, LogEntry['status']])[] = [
  ['unexpected success', 'failed'],
  ['expected failure', 'passed'],
  ['FAIL', 'failed'],
  ['ERROR', 'failed'],
  ['ok', 'passed'],
];

/** The status a line's end says (output the test printed may come before it on the line). */
function unittestStatus(rest: string): LogEntry['status'] | undefined {
  const text = rest.trimEnd();
  if (/^skipped\b/.test(text)) return 'skipped';
  for (const [word, status] of UNITTEST_ENDINGS) if (text.endsWith(word)) return status;
  return undefined;
}

/** A status alone on its line (after output the test printed on the lines before). */
function bareStatus(line: string): LogEntry['status'] | undefined {
  const text = line.trim();
  if (/^skipped\b/.test(text)) return 'skipped';
  return UNITTEST_ENDINGS.find(([word]) => text === word)?.[1];
}

/** Every name a unittest test goes by, in both the pre-3.12 and the 3.12+ form. */
function unittestNames(name: string, dotted: string): { id: string; aliases: string[] } {
  const owner = dotted.endsWith(`.${name}`) ? dotted.slice(0, -name.length - 1) : dotted;
  const full = `${owner}.${name}`;
  return { id: full, aliases: [`${name} (${owner})`, `${name} (${full})`] };
}

export function parseUnittestLog(lines: readonly string[]): LogEntry[] {
  const entries: LogEntry[] = [];
  let pending: { id: string; aliases: string[] } | undefined;
  let docOf: { id: string; aliases: string[] } | undefined;
  for (const line of lines) {
    const header = UNITTEST_HEADER.exec(line);
    if (header) {
      // A subtest's line names its parent test: a failing subtest fails it.
      const names = unittestNames(header[1]!, header[2]!);
      const status = unittestStatus(header[4] ?? '');
      pending = undefined;
      docOf = undefined;
      if (status) entries.push({ ...names, status });
      else pending = names;
      continue;
    }
    const block = UNITTEST_BLOCK.exec(line);
    if (block) {
      entries.push({ ...unittestNames(block[2]!, block[3]!), status: 'failed' });
      pending = docOf = undefined;
      continue;
    }
    const doc = UNITTEST_DOC_HEADER.exec(line);
    if (doc) {
      docOf = unittestNames(doc[1]!, doc[2]!);
      pending = undefined;
      continue;
    }
    if (docOf) {
      // The docstring's first line, then ` ... ` and the status (or nothing: it follows later).
      const at = line.lastIndexOf(' ... ');
      const ends = line.endsWith(' ...');
      if (at >= 0 || ends) {
        const description = ends ? line.slice(0, -4) : line.slice(0, at);
        const names = { id: docOf.id, aliases: [...docOf.aliases, description] };
        const status = ends ? undefined : unittestStatus(line.slice(at + 5));
        if (status) entries.push({ ...names, status });
        else pending = names;
      }
      docOf = undefined;
      continue;
    }
    if (pending) {
      const status = bareStatus(line);
      if (status) {
        entries.push({ ...pending, status });
        pending = undefined;
      }
    }
  }
  return entries;
}
