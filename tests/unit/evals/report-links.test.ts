import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { renderHtml, writeReports } from '../../../src/evals/report.js';
import { summarize } from '../../../src/evals/summary.js';
import { fakeSuite, result, withTempDir } from './helpers.js';

const summary = summarize(
  [result({ taskId: 'a', trial: 0 }, 'ready-for-review'), result({ taskId: 'a', trial: 1 }, 'tests-failed')],
  {
    suite: fakeSuite(['a']),
    n: 2,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:01:00.000Z',
    harnessVersion: '1.2.3',
  },
);

describe('report.html links each trial to its page in the exported viewer', () => {
  it('lists the trials with their links, escaped', () => {
    const html = renderHtml(summary, undefined, [
      { taskId: 'a', trial: 0, category: 'passed', href: 'view/runs/a-t0.html' },
      { taskId: '<b>x</b>', trial: 1, category: 'tests-failed', href: 'view/runs/"x.html' },
      { taskId: 'a', trial: 2, category: 'infrastructure' },
    ]);
    expect(html).toContain('<h2>Trials</h2>');
    expect(html).toContain(
      '<tr><td>a</td><td>0</td><td>passed</td><td><a href="view/runs/a-t0.html">conversation, diff, test output</a></td></tr>',
    );
    expect(html).toContain('<td>&lt;b&gt;x&lt;/b&gt;</td>');
    expect(html).toContain('href="view/runs/&quot;x.html"');
    expect(html).toContain('<tr><td>a</td><td>2</td><td>infrastructure</td><td></td></tr>');
  });

  it('has no trials section without trials, as before', () => {
    expect(renderHtml(summary)).not.toContain('<h2>Trials</h2>');
  });

  it('writes the links into report.html', async () => {
    await withTempDir(async (dir) => {
      const files = await writeReports(dir, summary, undefined, [
        { taskId: 'a', trial: 0, category: 'passed', href: 'view/runs/a-t0.html' },
      ]);
      expect(await readFile(files.html, 'utf8')).toContain('<a href="view/runs/a-t0.html">');
    });
  });
});
