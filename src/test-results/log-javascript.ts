/**
 * JavaScript runners' verbose console output as per-test results (see `test-log.ts` for the
 * rules every parser here is held to):
 *
 * - vitest `--reporter=verbose`: `✓ test/a.test.js > suite > name 12ms`, `× ...`, `↓ ...`, and
 *   the `FAIL test/a.test.js > suite > name` headings of its failure section. The id is the
 *   line's name, as the JUnit report's (`file > suite > name`); it also answers without its
 *   file.
 * - jest `--verbose`: `PASS`/`FAIL <file>`, describe titles by indentation, `✓ name (3 ms)`,
 *   `✕`, `○ skipped`, `✎ todo`, and the `● suite › name` headings of its failures. Ids are
 *   `file > describe > name`; each also answers to `describe > name` and to its bare title
 *   (SWE-bench's jest ids).
 * - mocha's spec reporter: suite titles by indentation, `✔ name (5ms)`, `1) name`, `- name`,
 *   read up to its `N passing` summary. Ids are `suite > name`, and the bare title.
 */
import type { LogEntry } from './log-entry.js';

/** A name without the runner's duration (` 12ms`, ` (3 ms)`), and with it when a title ends like one. */
function titles(text: string, duration: RegExp): string[] {
  const trimmed = text.trim();
  const bare = trimmed.replace(duration, '').trim();
  return bare === trimmed || bare === '' ? [trimmed] : [bare, trimmed];
}

const TEST_FILE = /^[^\s>]+\.(?:[cm]?[jt]sx?|vue|svelte)$/;

const VITEST_LINE = /^\s*([✓√×✕✗↓]) (.+)$/;
const VITEST_FAIL_HEADING = /^\s*FAIL {1,2}(\S.* > .+)$/;
const VITEST_DURATION = /(?:\s+\d+(?:\.\d+)?\s*m?s|\s+\[skipped\])$/;

function vitestEntry(names: string[], status: LogEntry['status']): LogEntry {
  const [id, ...rest] = names;
  const aliases = [...rest];
  for (const name of names) {
    const cut = name.indexOf(' > ');
    if (cut > 0 && TEST_FILE.test(name.slice(0, cut))) aliases.push(name.slice(cut + 3));
  }
  return { id: id!, status, ...(aliases.length > 0 ? { aliases } : {}) };
}

export function parseVitestLog(lines: readonly string[]): LogEntry[] {
  const entries: LogEntry[] = [];
  for (const line of lines) {
    const match = VITEST_LINE.exec(line);
    if (match) {
      const mark = match[1]!;
      const status = mark === '↓' ? 'skipped' : mark === '✓' || mark === '√' ? 'passed' : 'failed';
      entries.push(vitestEntry(titles(match[2]!, VITEST_DURATION), status));
      continue;
    }
    const heading = VITEST_FAIL_HEADING.exec(line);
    if (heading) entries.push(vitestEntry([heading[1]!.trim()], 'failed'));
  }
  return entries;
}

const JEST_FILE = /^(PASS|FAIL) (\S+)/;
const JEST_TEST = /^(\s*)([✓√✕×○✎]) (.+)$/;
const JEST_FAILURE = /^\s*● (.+ › .+|[^›]+)$/;
const JEST_DURATION = /\s\(\d+(?:\.\d+)?\s*m?s\)$/;

function jestStatus(mark: string): LogEntry['status'] {
  if (mark === '✓' || mark === '√') return 'passed';
  if (mark === '○' || mark === '✎') return 'skipped';
  return 'failed';
}

function jestEntry(
  file: string | undefined,
  suites: readonly string[],
  names: string[],
  status: LogEntry['status'],
): LogEntry {
  const ids = names.map((name) => [file, ...suites, name].filter(Boolean).join(' > '));
  const aliases = new Set<string>(ids.slice(1));
  for (const name of names) {
    aliases.add([...suites, name].join(' > '));
    aliases.add([...suites, name].join(' › '));
    aliases.add(name);
  }
  aliases.delete(ids[0]!);
  return { id: ids[0]!, status, ...(aliases.size > 0 ? { aliases: [...aliases] } : {}) };
}

export function parseJestLog(lines: readonly string[]): LogEntry[] {
  const entries: LogEntry[] = [];
  let file: string | undefined;
  // Describe titles by their indentation; a test line belongs to those indented less.
  let suites: { indent: number; title: string }[] = [];
  let inFailures = false;
  for (const line of lines) {
    const header = JEST_FILE.exec(line);
    if (header) {
      file = header[2];
      suites = [];
      inFailures = false;
      continue;
    }
    const failure = JEST_FAILURE.exec(line);
    if (failure) {
      inFailures = true;
      const parts = failure[1]!.split(' › ').map((p) => p.trim());
      entries.push(jestEntry(file, parts.slice(0, -1), [parts[parts.length - 1]!], 'failed'));
      continue;
    }
    if (file === undefined || inFailures) continue;
    const indent = line.length - line.trimStart().length;
    const test = JEST_TEST.exec(line);
    if (test) {
      suites = suites.filter((s) => s.indent < indent);
      const title = test[3]!.replace(/^(?:skipped|todo) /, '');
      entries.push(
        jestEntry(
          file,
          suites.map((s) => s.title),
          titles(title, JEST_DURATION),
          jestStatus(test[2]!),
        ),
      );
      continue;
    }
    if (indent >= 2 && line.trim() !== '') {
      suites = suites.filter((s) => s.indent < indent);
      suites.push({ indent, title: line.trim() });
    } else if (line.trim() !== '') {
      // Output at the margin (a summary, a console block's end) ends the file's tree.
      file = undefined;
    }
  }
  return entries;
}

const MOCHA_PASS = /^(\s+)[✓✔√] (.+)$/;
const MOCHA_FAIL = /^(\s+)\d+\) (.+)$/;
const MOCHA_PENDING = /^(\s+)- (.+)$/;
const MOCHA_SUMMARY = /^\s+\d+ passing\b/;
const MOCHA_DURATION = /\s\(\d+ms\)$/;

export function parseMochaLog(lines: readonly string[]): LogEntry[] {
  const entries: LogEntry[] = [];
  let suites: { indent: number; title: string }[] = [];
  for (const line of lines) {
    // The failures' details follow the summary; every failure was already listed above it.
    if (MOCHA_SUMMARY.test(line)) break;
    const match = MOCHA_PASS.exec(line) ?? MOCHA_FAIL.exec(line) ?? MOCHA_PENDING.exec(line);
    const indent = line.length - line.trimStart().length;
    if (match) {
      const status: LogEntry['status'] = MOCHA_PASS.test(line)
        ? 'passed'
        : MOCHA_FAIL.test(line)
          ? 'failed'
          : 'skipped';
      const chain = suites.filter((s) => s.indent < indent).map((s) => s.title);
      const names = titles(match[2]!, MOCHA_DURATION);
      const ids = names.map((name) => [...chain, name].join(' > '));
      const aliases = [...new Set([...ids.slice(1), ...names])].filter((a) => a !== ids[0]);
      entries.push({ id: ids[0]!, status, ...(aliases.length > 0 ? { aliases } : {}) });
      continue;
    }
    if (indent >= 2 && line.trim() !== '') {
      suites = suites.filter((s) => s.indent < indent);
      suites.push({ indent, title: line.trim() });
    } else if (line.trim() !== '') suites = [];
  }
  return entries;
}
