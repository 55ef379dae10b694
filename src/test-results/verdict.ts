/**
 * The verdict of a task that names its tests (SWE-bench's FAIL_TO_PASS and PASS_TO_PASS):
 * resolved only when every named test passed in the report. A named test the report does not
 * hold, or holds as skipped, did not pass. Quarantined tests (found flaky by an oracle run)
 * are left out of both lists, and the verdict says how many were.
 */
import type { TestStatus, TestVerdict } from '../outcomes.js';
import type { TestCaseResult, TestReport } from './junit.js';

export interface NamedTests {
  failToPass: readonly string[];
  passToPass: readonly string[];
  quarantined?: readonly string[];
}

export interface NamedTestResult {
  id: string;
  status: TestStatus;
}

export interface NamedVerdict {
  verdict: TestVerdict;
  failToPass: NamedTestResult[];
  passToPass: NamedTestResult[];
  /** Named tests left out because they are quarantined. */
  quarantined: string[];
  /** Why there is no report (with `no-report`). */
  reason?: string;
}

/**
 * The names one result answers to: its id (`file > suite > name`), the same parts joined by
 * `::` (pytest node ids, as SWE-bench writes them), the id without the file (runners
 * that do not report one, instance lists that do not write one), and the other names a test
 * log gave it (unittest's two forms, a bare jest title).
 */
export function testAliases(
  test: Pick<TestCaseResult, 'id' | 'file' | 'suites' | 'name' | 'aliases'>,
): string[] {
  const parts = [test.file, ...test.suites, test.name].filter((p): p is string => !!p);
  const withoutFile = [...test.suites, test.name].join(' > ');
  return [...new Set([test.id, parts.join('::'), withoutFile, ...(test.aliases ?? [])])];
}

/** Each name's results in the report (one name may answer for several cases: all must pass). */
export function indexResults(report: TestReport): Map<string, TestCaseResult[]> {
  const index = new Map<string, TestCaseResult[]>();
  for (const test of report.tests) {
    for (const alias of testAliases(test)) {
      const list = index.get(alias);
      if (list) list.push(test);
      else index.set(alias, [test]);
    }
  }
  return index;
}

export function statusOf(index: Map<string, TestCaseResult[]>, name: string): TestStatus {
  const found = index.get(name.trim());
  if (!found || found.length === 0) return 'missing';
  if (found.some((t) => t.status === 'failed')) return 'failed';
  if (found.some((t) => t.status === 'skipped')) return 'skipped';
  return 'passed';
}

export function judgeNamedTests(
  named: NamedTests,
  report: TestReport | undefined,
  reason?: string,
): NamedVerdict {
  const quarantine = new Set(named.quarantined ?? []);
  const kept = (list: readonly string[]) => list.filter((t) => !quarantine.has(t));
  const quarantined = [...named.failToPass, ...named.passToPass].filter((t) => quarantine.has(t));
  if (!report) {
    const missing = (list: readonly string[]) => kept(list).map((id) => ({ id, status: 'missing' as const }));
    return {
      verdict: 'no-report',
      failToPass: missing(named.failToPass),
      passToPass: missing(named.passToPass),
      quarantined,
      reason: reason ?? 'no report',
    };
  }
  const index = indexResults(report);
  const judge = (list: readonly string[]) => kept(list).map((id) => ({ id, status: statusOf(index, id) }));
  const failToPass = judge(named.failToPass);
  const passToPass = judge(named.passToPass);
  const resolved = [...failToPass, ...passToPass].every((t) => t.status === 'passed');
  return { verdict: resolved ? 'resolved' : 'unresolved', failToPass, passToPass, quarantined };
}

/** `passed/total` of a list of named results. */
export function tally(list: readonly NamedTestResult[]): { passed: number; total: number } {
  return { passed: list.filter((t) => t.status === 'passed').length, total: list.length };
}
