/**
 * How the suite's time is measured and used: the reporter that writes each file's real time,
 * `bench/suite-times.mjs` that turns it (and the JSON report) into the table of the bench
 * results and checks that a run dropped no test, the sequencer that starts the longest files
 * first, the list of files that run alone, and that the README's test command runs all of it.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TestModule, TestSpecification, Vitest } from 'vitest/node';
import LongestFirst, { SUITE_TIMES } from '../../suite-sequencer.js';
import SuiteTimesReporter, { type SuiteTimes } from '../../suite-times-reporter.js';
import { ALONE } from '../../../vitest.config.js';
import { ROOT } from '../../helpers/cli.js';

const run = promisify(execFile);
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'suite-times-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Just enough of a test module for the reporter. */
function testModule(file: string, project: string, tests: number): TestModule {
  return {
    id: file,
    moduleId: join(dir, file),
    project: { name: project },
    diagnostic: () => ({ collectDuration: 12.4 }),
    children: { allTests: () => Array.from({ length: tests }, (_, i) => ({ id: `${file}#${i}` })).values() },
    state: () => 'passed',
  } as unknown as TestModule;
}

describe('the file-times reporter', () => {
  it('writes each file with its group, its wall time from being taken to its end, and the run', async () => {
    const output = join(dir, '.vitest-times.json');
    const reporter = new SuiteTimesReporter(output);
    reporter.onInit({ config: { root: dir } });
    reporter.onTestRunStart();
    const slow = testModule('tests/e2e/slow.test.ts', 'docker', 3);
    const quick = testModule('tests/unit/quick.test.ts', 'unit', 1);
    reporter.onTestModuleQueued(slow);
    reporter.onTestModuleQueued(quick);
    reporter.onTestModuleEnd(quick);
    await new Promise((r) => setTimeout(r, 30));
    reporter.onTestModuleEnd(slow);
    reporter.onTestRunEnd([slow, quick], [], 'passed');
    const times = JSON.parse(await readFile(output, 'utf8')) as SuiteTimes;
    expect(times).toMatchObject({ version: 1, state: 'passed', machine: { cpus: expect.any(Number) } });
    expect(times.files).toEqual([
      expect.objectContaining({ file: 'tests/e2e/slow.test.ts', project: 'docker', tests: 3, collectMs: 12 }),
      expect.objectContaining({ file: 'tests/unit/quick.test.ts', project: 'unit', tests: 1 }),
    ]);
    expect(times.files[0]!.wallMs).toBeGreaterThanOrEqual(25);
    expect(times.files[0]!.wallMs).toBe(times.files[0]!.endedAt - times.files[0]!.queuedAt);
    expect(times.wallMs).toBeGreaterThanOrEqual(times.files[0]!.wallMs);
  });
});

/** A JSON report of the shape vitest writes, with `tests` as file -> [test name, ms, status]. */
function report(tests: Record<string, [string, number, string?][]>): object {
  const all = Object.values(tests).flat();
  return {
    numTotalTests: all.length,
    numPassedTests: all.filter((t) => (t[2] ?? 'passed') === 'passed').length,
    numFailedTests: all.filter((t) => t[2] === 'failed').length,
    numPendingTests: 0,
    numTodoTests: 0,
    startTime: 1_000_000,
    success: all.every((t) => (t[2] ?? 'passed') === 'passed'),
    testResults: Object.entries(tests).map(([file, list]) => ({
      name: join('/elsewhere/checkout', file),
      status: list.some((t) => t[2] === 'failed') ? 'failed' : 'passed',
      startTime: 1_000_100,
      endTime: 1_000_100 + list.reduce((sum, t) => sum + t[1], 0),
      assertionResults: list.map(([name, duration, status]) => ({
        fullName: name,
        title: name,
        status: status ?? 'passed',
        duration,
      })),
    })),
  };
}

async function suiteTimes(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(ROOT, 'bench', 'suite-times.mjs'), ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('bench/suite-times.mjs', () => {
  it("prints every file longest first, with the reporter's wall time where there is one, and the run's totals", async () => {
    await writeFile(
      join(dir, 'report.json'),
      JSON.stringify(
        report({
          'tests/unit/a.test.ts': [['a one', 40]],
          'tests/e2e/b.test.ts': [
            ['b one', 2000],
            ['b two', 1000, 'failed'],
          ],
        }),
      ),
    );
    const times: SuiteTimes = {
      version: 1,
      startedAt: '2026-12-02T00:00:00.000Z',
      finishedAt: '2026-12-02T00:01:40.000Z',
      wallMs: 100_000,
      state: 'failed',
      machine: { cpus: 2, loadAtStart: 0.5, loadAtEnd: 1.5 },
      files: [
        // The e2e file spent a minute in its beforeAll: the reporter knows, the JSON report does not.
        {
          file: 'tests/e2e/b.test.ts',
          project: 'docker',
          queuedAt: 0,
          endedAt: 63_000,
          wallMs: 63_000,
          collectMs: 9,
          tests: 2,
          state: 'failed',
        },
        {
          file: 'tests/unit/a.test.ts',
          project: 'unit',
          queuedAt: 0,
          endedAt: 500,
          wallMs: 500,
          collectMs: 9,
          tests: 1,
          state: 'passed',
        },
      ],
    };
    await writeFile(join(dir, 'times.json'), JSON.stringify(times));
    const r = await suiteTimes(
      '--report',
      join(dir, 'report.json'),
      '--times',
      join(dir, 'times.json'),
      '--no-save',
    );
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(
      'Test suite: 1m40s wall (reporter, 2 CPUs, load 0.5 -> 1.5), 2 files, 3 tests (2 passed, 1 failed, 0 skipped), file time 1m04s',
    );
    const rows = lines.filter((l) => l.startsWith('| tests/'));
    expect(rows).toEqual([
      expect.stringMatching(/^\| tests\/e2e\/b\.test\.ts\s+\| docker \|\s+63\.0 s \|\s+3\.0 s \|\s+2 \|$/),
      expect.stringMatching(/^\| tests\/unit\/a\.test\.ts\s+\| unit\s+\|\s+0\.5 s \|\s+0\.0 s \|\s+1 \|$/),
    ]);
  });

  it('names every test of an earlier run that this run lacks, and exits 1; a test moved to another file is not missing', async () => {
    await writeFile(
      join(dir, 'before.json'),
      JSON.stringify(
        report({
          'tests/a.test.ts': [
            ['kept', 1],
            ['moved', 1],
            ['dropped', 1],
            ['twice', 1],
            ['twice', 1],
          ],
        }),
      ),
    );
    await writeFile(
      join(dir, 'after.json'),
      JSON.stringify(
        report({
          'tests/a.test.ts': [
            ['kept', 1],
            ['twice', 1],
            ['new', 1],
          ],
          'tests/b.test.ts': [['moved', 1]],
        }),
      ),
    );
    const r = await suiteTimes(
      '--report',
      join(dir, 'after.json'),
      '--compare',
      join(dir, 'before.json'),
      '--no-save',
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('5 tests then, 4 now, 1 new, 2 missing');
    expect(r.stdout.split('\n').filter((l) => l.includes('missing: '))).toEqual([
      '  missing: dropped',
      '  missing: twice',
    ]);
    expect(r.stderr).toContain("a file's time is the sum of its tests only");
  });

  it('says which file it could not read, and exits 2', async () => {
    const missing = await suiteTimes('--report', join(dir, 'nowhere.json'), '--no-save');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`JSON report ${join(dir, 'nowhere.json')}`);
    await writeFile(join(dir, 'other.json'), '{"some": "thing"}');
    const other = await suiteTimes('--report', join(dir, 'other.json'), '--no-save');
    expect(other.code).toBe(2);
    expect(other.stderr).toContain('not a vitest JSON report');
    const usage = await suiteTimes('--frobnicate');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('usage: node bench/suite-times.mjs');
  });
});

describe('the longest-first sequencer', () => {
  function spec(file: string, project: string, groupOrder: number): TestSpecification {
    return {
      moduleId: join(dir, file),
      project: { name: project, config: { sequence: { groupOrder } } },
    } as unknown as TestSpecification;
  }

  it("orders by group, then longest first: this machine's last run, else the committed table, a file never measured first", async () => {
    await mkdir(join(dir, 'bench', 'results'), { recursive: true });
    await writeFile(
      join(dir, SUITE_TIMES),
      JSON.stringify({
        files: [
          { file: 'tests/e2e/long.test.ts', wallMs: 300_000 },
          { file: 'tests/e2e/short.test.ts', wallMs: 20_000 },
          { file: 'tests/e2e/cached.test.ts', wallMs: 1_000 },
          { file: 'tests/unit/u.test.ts', wallMs: 900_000 },
        ],
      }),
    );
    // The cache of this machine's last run says the cached file took ten minutes.
    const cache = new Map([['docker:tests/e2e/cached.test.ts', { duration: 600_000, failed: false }]]);
    const ctx = { config: { root: dir }, cache: { getFileTestResults: (key: string) => cache.get(key) } };
    const sequencer = new LongestFirst(ctx as unknown as Vitest);
    const sorted = await sequencer.sort([
      spec('tests/sandbox-conformance/orphans.test.ts', 'alone', 2),
      spec('tests/e2e/short.test.ts', 'docker', 1),
      spec('tests/e2e/long.test.ts', 'docker', 1),
      spec('tests/unit/u.test.ts', 'unit', 0),
      spec('tests/e2e/new.test.ts', 'docker', 1),
      spec('tests/e2e/cached.test.ts', 'docker', 1),
    ]);
    expect(sorted.map((s) => s.moduleId.slice(dir.length + 1))).toEqual([
      'tests/unit/u.test.ts',
      'tests/e2e/new.test.ts',
      'tests/e2e/cached.test.ts',
      'tests/e2e/long.test.ts',
      'tests/e2e/short.test.ts',
      'tests/sandbox-conformance/orphans.test.ts',
    ]);
  });
});

describe('files that run alone', () => {
  it('exist, so that a renamed one is not quietly run beside others', () => {
    expect(Object.keys(ALONE).length).toBeGreaterThan(0);
    for (const [file, why] of Object.entries(ALONE)) {
      expect(existsSync(join(ROOT, file)), file).toBe(true);
      expect(why.length, file).toBeGreaterThan(10);
    }
  });
});

describe("the README's test command", () => {
  it('is the whole suite in its three groups: npm test runs vitest on this config, and every test file is in exactly one group', async () => {
    // CI runs `npm test` (.ci/run), the command the README gives.
    expect(await readFile(join(ROOT, 'README.md'), 'utf8')).toMatch(/^npm test\b/m);
    expect(await readFile(join(ROOT, '.ci', 'run'), 'utf8')).toMatch(/^npm test$/m);
    // No file, project or config filter: the groups of vitest.config.ts, all of them.
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.test).toBe('vitest run');

    const { createVitest } = await import('vitest/node');
    const vitest = await createVitest('test', { root: ROOT, watch: false, reporters: [] });
    try {
      const groups = new Map<string, string[]>();
      for (const spec of await vitest.globTestSpecifications()) {
        const file = relative(ROOT, spec.moduleId);
        groups.set(file, [...(groups.get(file) ?? []), spec.project.name]);
      }
      const files = (await run('git', ['ls-files', 'tests'], { cwd: ROOT })).stdout
        .split('\n')
        .filter((f) => f.endsWith('.test.ts'));
      expect(files.length).toBeGreaterThan(100);
      const where = (file: string) => (groups.get(file) ?? []).join(',');
      for (const file of files) {
        const expected =
          file in ALONE ? 'alone' : /^tests\/unit\/|memory\.test\.ts$/.test(file) ? 'unit' : 'docker';
        expect(where(file), file).toBe(expected);
      }
      expect([...groups.keys()].sort()).toEqual([...files].sort());
    } finally {
      await vitest.close();
    }
  });
});
