import { describe, expect, it } from 'vitest';
import { NOT_SCORED_RULE, renderHtml, renderMarkdown } from '../../../src/evals/report.js';
import { createProgressReporter, formatProgressEvent } from '../../../src/evals/eval-progress.js';
import { summarize } from '../../../src/evals/summary.js';
import { headline } from '../../../src/cli/commands/eval.js';
import { readFile } from 'node:fs/promises';
import { fakeSuite, result } from './helpers.js';

// The flaky task of the issue: two passes and one trial whose cassette ran out.
const results = [
  result({ taskId: 'flaky', trial: 0 }, 'ready-for-review'),
  result({ taskId: 'flaky', trial: 1 }, 'error', { error: 'ConfigError: cassette ran out at turn 3 <b>' }),
  result({ taskId: 'flaky', trial: 2 }, 'ready-for-review'),
  result({ taskId: 'steady', trial: 0 }, 'ready-for-review'),
  result({ taskId: 'steady', trial: 1 }, 'infrastructure', { error: 'engine lost' }),
  result({ taskId: 'steady', trial: 2 }, 'tests-failed'),
];
const summary = summarize(results, {
  suite: fakeSuite(['flaky', 'steady']),
  n: 3,
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:01:00.000Z',
  harnessVersion: '1.2.3',
});

describe('a trial that ends error is shown as not scored, with its reason, everywhere', () => {
  it('the summary counts it per task and overall, with the reason', () => {
    const flaky = summary.tasks.find((t) => t.taskId === 'flaky');
    expect(flaky).toMatchObject({ scored: 2, passes: 2, notScored: 1, errors: 1 });
    expect(flaky?.notScoredTrials).toEqual([
      { taskId: 'flaky', trial: 1, category: 'error', reason: 'ConfigError: cassette ran out at turn 3 <b>' },
    ]);
    expect(summary.overall).toMatchObject({ notScored: 2, errors: 1, infrastructure: 1 });
  });

  it('report.md: the not-scored columns count errors too, and a section lists each reason', () => {
    const md = renderMarkdown(summary);
    // Overall table: 2 not scored, not 1 (infrastructure alone).
    expect(md).toContain('| 2 (1 error, 1 infrastructure) |');
    // Per task: flaky is 2/3 scored with 1 error, never a silent 2/2.
    expect(md).toMatch(/\| flaky \| 2\/3 \| 2 \| 100\.0% \| [^|]+ \| 1 \(1 error\) \|/);
    expect(md).toContain('## Not scored');
    // A tag in a reason stays text (GitHub renders inline HTML in Markdown).
    expect(md).toContain('| flaky | 1 | error | ConfigError: cassette ran out at turn 3 &lt;b> |');
    expect(md).not.toContain('<b>');
    expect(md).toContain(NOT_SCORED_RULE);
  });

  it('report.html: the same, escaped', () => {
    const html = renderHtml(summary);
    expect(html).toContain('<h2>Not scored</h2>');
    expect(html).toContain('cassette ran out at turn 3 &lt;b&gt;');
    expect(html).not.toContain('turn 3 <b>');
    expect(html).toContain('<td>1 (1 error)</td>');
    expect(html).toContain('1 not scored');
  });

  it('the rule the report states is the one docs/evals.md states', async () => {
    const page = await readFile(new URL('../../../docs/evals.md', import.meta.url), 'utf8');
    expect(page.replace(/\s+/g, ' ').includes(NOT_SCORED_RULE), 'docs/evals.md states NOT_SCORED_RULE').toBe(
      true,
    );
  });

  it('progress: the finished trial shows its reason; on a terminal it stays on screen', () => {
    const last = results[1]!;
    const p = {
      done: 2,
      total: 6,
      passed: 1,
      failed: 0,
      infrastructure: 0,
      errors: 1,
      inFlight: 0,
      resumed: 0,
      elapsedMs: 1000,
      etaMs: 2000,
      last,
    };
    expect(formatProgressEvent(p)).toContain('flaky#1 error');
    expect(formatProgressEvent(p)).toContain('error 1');
    expect(formatProgressEvent(p)).toContain('not scored: ConfigError: cassette ran out at turn 3');
    const written: string[] = [];
    const reporter = createProgressReporter(
      { write: (chunk: string) => written.push(chunk) },
      { tty: true, safe: (t) => t.replace(/</g, '?') },
    );
    reporter.update(p);
    expect(written.join('')).toContain(
      'flaky#1 error; not scored: ConfigError: cassette ran out at turn 3 ?b>\n',
    );
  });

  it('the headline says how many trials were not scored and why', () => {
    const line = headline('fake', summary, { results, total: 6, resumed: 0, interrupted: false });
    expect(line).toContain('4/6 scored, 1 infrastructure, 1 error');
  });
});
