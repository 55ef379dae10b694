import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { escapeHtml, renderHtml, renderMarkdown, writeReports } from '../../../src/evals/report.js';
import { comparisonFindings } from '../../../src/evals/report-tables.js';
import { compareSummaries, summarize, type EvalSummary } from '../../../src/evals/summary.js';
import type { TrialCategory, TrialResult } from '../../../src/evals/types.js';
import { fakeSuite, result, withTempDir } from './helpers.js';

function summaryFor(
  perTask: Record<string, TrialCategory[]>,
  extra: Partial<TrialResult> = {},
  name = 'fake',
): EvalSummary {
  const ids = Object.keys(perTask);
  const results = ids.flatMap((id) =>
    (perTask[id] ?? []).map((c, trial) => result({ taskId: id, trial }, c, extra)),
  );
  const n = Math.max(...ids.map((id) => perTask[id]?.length ?? 0));
  return summarize(results, {
    suite: { ...fakeSuite(ids), name },
    n,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:01:00.000Z',
    harnessVersion: '1.2.3',
  });
}

const tenPass: TrialCategory[] = Array.from({ length: 10 }, () => 'ready-for-review');
const tenFail: TrialCategory[] = Array.from({ length: 10 }, () => 'tests-failed');

const current = summaryFor(
  {
    always: tenPass,
    never: tenFail,
    flaky: [
      'ready-for-review',
      'max-turns',
      'ready-for-review',
      'infrastructure',
      'ready-for-review',
      'ready-for-review',
      'rejected',
      'ready-for-review',
      'timeout',
      'ready-for-review',
    ],
  },
  { provider: 'replay', model: 'recorded', imageId: 'sha256:abc', catalogHash: 'cafe' },
);

describe('renderHtml', () => {
  const html = renderHtml(current);

  it('is self-contained: no network references, no scripts, no external resources', () => {
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<link/i);
    expect(html).not.toMatch(/\ssrc=/i);
    expect(html).not.toMatch(/url\(/i);
    expect(html).toContain('<style>');
  });

  it('draws one bar per task with a Wilson error bar (a line and two caps)', () => {
    expect(html.match(/<rect class="bar"/g)).toHaveLength(3);
    expect(html.match(/<line class="err"/g)).toHaveLength(9);
  });

  it('sizes each bar by its pass rate and spans the error bar over the interval', () => {
    // flaky: 6 passes of 9 scored (the infrastructure trial is not scored); plot is 480 wide from x=200
    const flakyBar = html.match(
      /<rect class="bar" x="200" y="[\d.]+" width="([\d.]+)"[^>]*><title>66\.7% \(6\/9\)/,
    );
    expect(flakyBar?.[1]).toBe('320.0');
  });

  it('shows every section people look for', () => {
    for (const heading of [
      'Pass rate per task',
      'Overall',
      'Per task',
      'Failure categories',
      'Flaky tasks',
      'Provenance',
    ]) {
      expect(html).toContain(`<h2>${heading}`);
    }
    expect(html).toContain('sha256:abc');
    expect(html).toContain('1.2.3');
  });

  it('escapes task ids, suite names and model names', () => {
    const hostile = summaryFor(
      { a: ['ready-for-review'] },
      { model: '<img onerror=alert(1)>' },
      '</title><script>alert("x")</script>',
    );
    const out = renderHtml(hostile);
    expect(out).not.toContain('<script');
    expect(out).not.toContain('<img');
    expect(out).toContain('&lt;/title&gt;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    expect(out).toContain('&lt;img onerror=alert(1)&gt;');
  });

  it('escapes the five HTML-significant characters', () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe(
      '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;',
    );
  });
});

describe('renderHtml with a comparison', () => {
  const previous = summaryFor(
    { always: tenFail, never: tenFail, flaky: tenPass.slice(0, 3) },
    { model: 'older' },
  );
  const comparison = compareSummaries(current, previous);
  const html = renderHtml(current, comparison);

  it('draws previous and current bars side by side for every task', () => {
    expect(html).toContain('<h2>Comparison with the previous summary</h2>');
    expect(html.match(/<rect class="bar-previous"/g)).toHaveLength(3);
  });

  it('flags the regression and the improvement, and only those', () => {
    // "always" went 0/10 -> 10/10 (improvement); "flaky" 3/3 -> 6/9 overlaps; "never" unchanged
    expect(comparison.improvements).toEqual(['always']);
    expect(comparison.regressions).toEqual([]);
    const flaggedRows = (page: string, flag: string): string[] =>
      [...page.matchAll(new RegExp(`<tr class="(?:[a-z]+ )*${flag}(?: [a-z]+)*"><td>([^<]*)</td>`, 'g'))].map(
        (m) => m[1] ?? '',
      );
    // Overall: 3/23 -> 16/29, [0.045, 0.32] vs [0.375, 0.716], also separated.
    expect(flaggedRows(html, 'improvement')).toEqual(['always', 'overall']);
    expect(flaggedRows(html, 'regression')).toEqual([]);

    const worse = compareSummaries(previous, current);
    const worseHtml = renderHtml(previous, worse);
    expect(worse.regressions).toEqual(['always']);
    expect(flaggedRows(worseHtml, 'regression')).toEqual(['always', 'overall']);
    expect(worseHtml.match(/class="row-regression"/g)).toHaveLength(1);
    expect(worseHtml).toContain('REGRESSION');
  });

  it('names a task that fell within the noise (2/2 -> 0/2) instead of saying there was no regression', () => {
    const before = summaryFor({
      a: ['ready-for-review', 'ready-for-review'],
      b: ['tests-failed', 'tests-failed'],
    });
    const after = summaryFor({ a: ['tests-failed', 'tests-failed'], b: ['tests-failed', 'tests-failed'] });
    const c = compareSummaries(after, before);
    // Two trials each: the 95% intervals overlap, so it is no regression, and it is a drop.
    expect(c.regressions).toEqual([]);
    expect(c.drops).toEqual(['a']);
    expect(comparisonFindings(c)).toEqual([
      'Fell, but within the noise (the 95% intervals overlap; run more trials to tell): a 2/2 -> 0/2',
    ]);
    expect(renderMarkdown(after, c)).toContain('a 2/2 -> 0/2');
    expect(renderHtml(after, c)).toContain('a 2/2 -&gt; 0/2');
    expect(comparisonFindings(compareSummaries(before, before))).toEqual([
      'No task fell against the previous summary.',
    ]);
  });

  it('shows what differs between the two runs', () => {
    expect(html).toContain('models: older -&gt; recorded');
  });

  it('stays free of network references', () => {
    expect(html).not.toMatch(/https?:\/\/|<script|<link/i);
  });
});

describe('renderMarkdown', () => {
  it('has tables for tasks, overall, pass@k, failure categories, flaky tasks and the comparison', () => {
    const previous = summaryFor({ always: tenFail, never: tenFail, flaky: tenFail });
    const md = renderMarkdown(current, compareSummaries(current, previous));
    expect(md).toContain('## Overall');
    expect(md).toMatch(/\| flaky \| 9\/10 \| 6 \| 66\.7% \| \[35\.4, 87\.9\]% \| 1 \(1 infrastructure\) \|/);
    // flaky, 6 of 9 scored: pass@2 = 1 - C(3,2)/C(9,2) = 1 - 3/36 = 91.7%
    expect(md).toContain('| flaky | 66.7% | 91.7% |');
    // overall pass@1 = (1 + 0 + 2/3)/3 = 55.6%, pass@2 = (1 + 0 + 0.9167)/3 = 63.9%
    expect(md).toContain('| pass@k | 55.6% | 63.9% |');
    expect(md).toContain('## Failure categories');
    expect(md).toContain('- flaky: 6/9 passed');
    expect(md).toContain('## Comparison with the previous summary');
    expect(md).toMatch(
      /\| always \| 0\.0% \[0\.0, 27\.8\]% \| 100\.0% \[72\.2, 100\.0\]% \| \+100\.0 pts \| improvement \|/,
    );
  });

  it('escapes pipes so a name cannot break a table', () => {
    const md = renderMarkdown(summaryFor({ a: ['ready-for-review'] }, { model: 'x|y' }));
    expect(md).toContain('x\\|y');
  });
});

describe('report.md and report.html', () => {
  /** Every table row of a Markdown report, cells trimmed and unbolded. */
  const markdownRows = (md: string): string[][] =>
    md
      .split('\n')
      .filter((line) => line.startsWith('| ') && !/^\|( --- \|)+$/.test(line))
      .map((line) =>
        line
          .slice(2, -2)
          .split(' | ')
          .map((cell) => cell.replace(/^\*\*(.*)\*\*$/, '$1')),
      );
  const htmlRows = (html: string): string[][] =>
    [...html.matchAll(/<tr[^>]*>(.*?)<\/tr>/g)].map((row) =>
      [...(row[1] ?? '').matchAll(/<t[hd]>(.*?)<\/t[hd]>/g)].map((cell) =>
        (cell[1] ?? '').replace(/&gt;/g, '>').replace(/&lt;/g, '<').replace(/&amp;/g, '&'),
      ),
    );

  it('hold the same tables, row for row (one model, two renderings)', () => {
    const comparison = compareSummaries(summaryFor({ always: tenFail, never: tenFail }), current);
    const md = markdownRows(renderMarkdown(current, comparison));
    const html = htmlRows(renderHtml(current, comparison));
    expect(md.length).toBeGreaterThan(20);
    expect(html).toEqual(md);
  });
});

describe('writeReports', () => {
  it('writes summary.json, report.md and report.html (and comparison.json when comparing)', async () => {
    await withTempDir(async (dir) => {
      const files = await writeReports(dir, current, compareSummaries(current, current));
      expect(JSON.parse(await readFile(files.summaryJson, 'utf8'))).toEqual(
        JSON.parse(JSON.stringify(current)),
      );
      expect(await readFile(files.markdown, 'utf8')).toContain('# Eval report: fake');
      expect(await readFile(files.html, 'utf8')).toMatch(/^<!doctype html>/);
      expect(files.comparisonJson).toBeDefined();
    });
  });
});

describe('the engines section', () => {
  const fleet = summaryFor({ t: ['ready-for-review', 'tests-failed'] });
  fleet.engines = [
    { engine: 'local', trials: 2, passes: 1, infrastructure: 0, retriedElsewhere: 0, meanTrialMs: 61_000 },
    { engine: 'box<b>', trials: 1, passes: 0, infrastructure: 1, retriedElsewhere: 1, meanTrialMs: 4_000 },
  ];

  it('shows trial runs, passes, infrastructure failures and mean time per engine in both reports', () => {
    const md = renderMarkdown(fleet);
    expect(md).toContain('## Engines');
    expect(md).toContain('| local | 2 | 1 | 0 | 0 | 1 min 01 s |');
    // An engine name is data: a tag in it stays text in Markdown too.
    expect(md).toContain('| box&lt;b> | 1 | 0 | 1 | 1 | 4.0 s |');
    const html = renderHtml(fleet);
    expect(html).toContain('<h2>Engines</h2>');
    expect(html).toContain('<td>box&lt;b&gt;</td><td>1</td><td>0</td><td>1</td><td>1</td><td>4.0 s</td>');
  });

  it('is left out of an eval that ran on the local engine alone', () => {
    const local = summaryFor({ t: ['ready-for-review'] }, { engine: 'local' });
    expect(local.engines.map((e) => e.engine)).toEqual(['local']);
    expect(renderMarkdown(local)).not.toContain('## Engines');
    expect(renderHtml(local)).not.toContain('<h2>Engines</h2>');
  });
});
