import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { renderPage } from '../../../src/view/site.js';
import { openViewSource } from '../../../src/view/source.js';
import { summarize } from '../../../src/evals/summary.js';
import type { TrialResult } from '../../../src/evals/types.js';
import { HOSTILE, tempDir, writeEval, writeRun } from './fixtures.js';

let dir: string;
let remove: () => Promise<void>;
beforeEach(async () => ({ dir, remove } = await tempDir()));
afterEach(() => remove());

const page = async (root: string, path: string, query = '') =>
  renderPage(await openViewSource(root), path, new URLSearchParams(query), { exported: false });

/** The visible and hidden rows of a list page, as "id:hidden?". */
function rows(html: string): string[] {
  return [
    ...html.matchAll(/<tr data-outcome="[^"]*" data-task="[^"]*"( hidden)?><td>(?:<a [^>]*>)?([^<]*)/g),
  ].map((m) => `${m[2]}${m[1] ? ' (hidden)' : ''}`);
}

describe('what view can be pointed at', () => {
  it('a repo, a runs folder, one run folder, or an eval folder', async () => {
    const runs = join(dir, 'repo', '.sandbox-harness', 'runs');
    await writeRun(runs, 'run-a');
    await writeRun(runs, 'run-b');
    expect(await openViewSource(join(dir, 'repo'))).toMatchObject({
      kind: 'runs',
      runsPath: ['.sandbox-harness', 'runs'],
    });
    expect(await openViewSource(runs)).toMatchObject({ kind: 'runs', runsPath: [] });
    expect(await openViewSource(join(runs, 'run-a'))).toMatchObject({ kind: 'run', runsPath: null });
    await writeEval(join(dir, 'eval'), [{ taskId: 't', trial: 0, category: 'ready-for-review' }]);
    expect(await openViewSource(join(dir, 'eval'))).toMatchObject({ kind: 'eval', runsPath: ['runs'] });

    const single = (await page(join(runs, 'run-a'), 'index.html')) ?? '';
    expect(rows(single)).toEqual(['run-a']);
    expect(await page(join(runs, 'run-a'), 'runs/run-a.html')).toContain('<h1>Run run-a');
  });

  it('says what it expected when a folder holds no runs', async () => {
    await mkdir(join(dir, 'empty'));
    await expect(openViewSource(join(dir, 'empty'))).rejects.toThrow(/no run records in .*empty/);
    await expect(openViewSource(join(dir, 'missing'))).rejects.toThrow(/does not exist/);
  });
});

describe('the list: runs and trials, filterable by outcome and task', () => {
  beforeEach(async () => {
    const runs = join(dir, 'runs');
    await writeRun(runs, '20261130-100000-aaaaaa', { outcome: 'failed', ticket: 'OPS-1' });
    await writeRun(runs, '20261130-110000-bbbbbb', { outcome: 'ready-for-review', ticket: 'OPS-2' });
    await writeRun(runs, '20261130-120000-cccccc', { outcome: 'failed', ticket: 'OPS-2' });
  });

  it('lists every run, newest first, with its columns and a link to its page', async () => {
    const html = (await page(join(dir, 'runs'), 'index.html')) ?? '';
    expect(rows(html)).toEqual([
      '20261130-120000-cccccc',
      '20261130-110000-bbbbbb',
      '20261130-100000-aaaaaa',
    ]);
    expect(html).toContain(
      '<tr data-outcome="failed" data-task="OPS-2"><td><a href="runs/20261130-120000-cccccc.html">20261130-120000-cccccc</a></td><td>OPS-2</td><td class="num">-</td><td><span class="badge tone-bad">failed</span></td><td class="num">1</td><td class="num">3</td><td class="num">120</td><td class="num">12.0 s</td>',
    );
  });

  it('filters on the server from the query string, so it works without JavaScript', async () => {
    const byOutcome = (await page(join(dir, 'runs'), 'index.html', 'outcome=failed')) ?? '';
    expect(rows(byOutcome)).toEqual([
      '20261130-120000-cccccc',
      '20261130-110000-bbbbbb (hidden)',
      '20261130-100000-aaaaaa',
    ]);
    expect(byOutcome).toContain('<option value="failed" selected>failed (2)</option>');
    expect(byOutcome).toContain('showing <b id="shown">2</b> of 3');

    const both = (await page(join(dir, 'runs'), 'index.html', 'outcome=failed&task=OPS-2')) ?? '';
    expect(rows(both)).toEqual([
      '20261130-120000-cccccc',
      '20261130-110000-bbbbbb (hidden)',
      '20261130-100000-aaaaaa (hidden)',
    ]);
    expect(both).toContain('<option value="OPS-2" selected>OPS-2 (2)</option>');

    const none = (await page(join(dir, 'runs'), 'index.html', 'outcome=no-such')) ?? '';
    expect(none).toContain('showing <b id="shown">0</b> of 3');
  });

  it('escapes hostile outcome and task values in rows, options and data attributes', async () => {
    await writeRun(join(dir, 'runs'), '20261130-130000-dddddd', {
      outcome: `a"b${HOSTILE}`,
      ticket: HOSTILE,
    });
    const html = (await page(join(dir, 'runs'), 'index.html')) ?? '';
    const withoutScript = html.slice(0, html.lastIndexOf('<script>'));
    expect(withoutScript).not.toMatch(/<script|<img/i);
    expect(html).toContain('data-outcome="a&quot;b&lt;/script&gt;');
  });
});

describe('an eval folder', () => {
  const results: TrialResult[] = [
    ['fixes', 0, 'ready-for-review'],
    ['gives-up', 0, 'no-changes'],
    ['fixes', 1, 'ready-for-review'],
  ].map(([taskId, trial, category]) => ({
    taskId: taskId as string,
    trial: trial as number,
    outcome: category === 'ready-for-review' ? 'passed' : 'failed',
    category: category as TrialResult['category'],
    turns: 3,
    inputTokens: 100,
    outputTokens: 20,
    durationMs: 1000,
    startedAt: '2026-11-30T10:00:00.000Z',
    finishedAt: '2026-11-30T10:00:01.000Z',
    runId: `${taskId}-t${trial}`,
  }));

  beforeEach(async () => {
    const summary = summarize(results, {
      suite: {
        name: 'offline',
        file: 'suite.yaml',
        sha256: 'x',
        tasks: [{ id: 'fixes' }, { id: 'gives-up' }],
      },
      n: 2,
      startedAt: '2026-11-30T10:00:00.000Z',
      finishedAt: '2026-11-30T10:01:00.000Z',
      harnessVersion: '0.1.0',
    });
    await writeEval(
      join(dir, 'out'),
      [
        ...results.map((r) => ({ taskId: r.taskId, trial: r.trial, category: r.category, runId: r.runId })),
        // New spellings and fields from a newer harness are shown as they are.
        { taskId: 'review', trial: 0, category: 'review-rejected', runId: '../../outside' },
      ],
      summary,
    );
    for (const r of results) await writeRun(join(dir, 'out', 'runs'), r.runId as string);
    await writeRun(join(dir, 'out', 'runs'), 'orphan-run');
    await writeRun(dir, 'outside');
  });

  it('lists trials in task order with links to their runs, and runs that have no result line', async () => {
    const html = (await page(join(dir, 'out'), 'index.html')) ?? '';
    expect(html).toContain('<h1>Trials of offline</h1>');
    expect(rows(html)).toEqual(['fixes-t0', 'fixes-t1', 'gives-up-t0', '../../outside', 'orphan-run']);
    expect(html).toContain('<a href="runs/fixes-t0.html">fixes-t0</a>');
    expect(html).toContain('<span class="badge tone-none">review-rejected</span>');
    expect(html).toContain('no line in results.jsonl');
  });

  it('never follows a run id out of the folder', async () => {
    const html = (await page(join(dir, 'out'), 'index.html')) ?? '';
    expect(html).not.toContain('href="runs/../');
    expect(html).toContain('../../outside<br><span class="muted">no run folder</span>');
    for (const path of [
      'runs/../../outside.html',
      'runs/..%2F..%2Foutside.html',
      'runs/%2E%2E.html',
      '../outside/run.json',
    ]) {
      expect(await page(join(dir, 'out'), path)).toBeUndefined();
    }
  });

  it('shows the report with its chart and tables, every trial linked to its run', async () => {
    const html = (await page(join(dir, 'out'), 'eval.html')) ?? '';
    expect(html).toContain('<h1>Eval report: offline</h1>');
    expect(html).toContain('<svg role="img" aria-label="Pass rate per task');
    expect(html).toContain('<h2>Per task</h2>');
    expect(html).toContain('<h2>Failure categories</h2>');
    for (const r of results) expect(html).toContain(`<a href="runs/${r.runId}.html">${r.runId}</a>`);
  });

  it('still lists the trials when summary.json is missing or of another shape', async () => {
    await writeFile(join(dir, 'out', 'summary.json'), '{"suite":{"name":"x"},"tasks":"not a list"}');
    const html = (await page(join(dir, 'out'), 'eval.html')) ?? '';
    expect(html).toContain('summary.json could not be shown as a report');
    expect(html).toContain('<a href="runs/fixes-t0.html">fixes-t0</a>');
  });
});
