/**
 * Harbor rewards in every report: report.md, report.html and the lines `eval` prints show the
 * mean reward per task and each trial's score, its named values or why its reward was refused;
 * a suite without rewards shows none of it. Names and reasons come from a verifier (through a
 * reward file) or from a tampered record: HTML, Markdown and terminal control characters in
 * them stay text in every medium.
 */
import { describe, expect, it } from 'vitest';
import { renderHtml, renderMarkdown } from '../../../src/evals/report.js';
import { harborEvalSummary, harborLines } from '../../../src/evals/sources/harbor-source.js';
import { summarize, type EvalSummary } from '../../../src/evals/summary.js';
import type { TrialResult } from '../../../src/evals/types.js';
import { parseRewardJson } from '../../../src/test-results/reward.js';
import { print, type CliContext } from '../../../src/cli/cli-context.js';
import { fakeSuite, result } from './helpers.js';

// C0 but tab and newline, DEL, and the right-to-left override: what no report may carry raw.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f\u202e]/;

/** A name a verifier cannot get past the reward parser, but a tampered results.jsonl can carry. */
const HOSTILE_NAME = '<img src=x onerror=alert(1)>|**b**](javascript:alert(2))\u001b]52;c;QUJD\u0007\u202e';

function refusedReason(): string {
  const reading = parseRewardJson(JSON.stringify({ [HOSTILE_NAME]: 1 }));
  if (reading.ok) throw new Error('the hostile name was accepted');
  return reading.reason;
}

const meta = (ids: string[], n: number) => ({
  suite: { ...fakeSuite(ids), name: 'harbor' },
  n,
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:01:00.000Z',
  harnessVersion: '1.2.3',
});

function harborSummary(): EvalSummary {
  const results: TrialResult[] = [
    result({ taskId: 'greet', trial: 0 }, 'ready-for-review', {
      score: 1,
      reward: { values: { reward: 1 } },
    }),
    result({ taskId: 'greet', trial: 1 }, 'tests-failed', {
      score: 0.5,
      reward: { values: { reward: 0.5, lines: 3, [HOSTILE_NAME]: 7 } },
    }),
    result({ taskId: 'count', trial: 0 }, 'tests-failed', { score: 0, reward: { refused: refusedReason() } }),
    // Its change never reached the verifier: no reward at all, it scores 0.
    result({ taskId: 'count', trial: 1 }, 'no-changes'),
    result({ taskId: 'count', trial: 2 }, 'infrastructure', { error: 'engine lost' }),
  ];
  const summary = summarize(results, meta(['greet', 'count'], 3));
  summary.harbor = harborEvalSummary({ oracle: false, marks: {} }, results);
  return summary;
}

describe('the summary of a Harbor eval', () => {
  it("keeps every trial's score, named values and refusal, and the mean over scored trials", () => {
    const h = harborSummary().harbor!;
    expect(h.meanScore).toEqual({ greet: 0.75, count: 0 });
    expect(h.trials?.map((t) => [t.taskId, t.trial, t.score, t.refused !== undefined, t.unscored])).toEqual([
      ['greet', 0, 1, false, undefined],
      ['greet', 1, 0.5, false, undefined],
      ['count', 0, 0, true, undefined],
      ['count', 1, undefined, false, undefined],
      ['count', 2, undefined, false, true],
    ]);
    expect(h.trials?.[1]?.values).toEqual({ reward: 0.5, lines: 3, [HOSTILE_NAME]: 7 });
  });
});

describe('report.md', () => {
  const md = renderMarkdown(harborSummary());

  it('has the mean reward per task and every trial with its score, values or reason', () => {
    expect(md).toContain('## Rewards');
    expect(md).toContain('| task | mean reward | scored trials | full marks | reward refused |');
    expect(md).toContain('| greet | 0.75 | 2 | 1 | 0 |');
    expect(md).toContain('| count | 0 | 2 | 0 | 1 |');
    expect(md).toContain('### Reward per trial');
    expect(md).toContain('| greet | 0 | ready-for-review | 1 | reward=1 |  |');
    expect(md).toMatch(/\| greet \| 1 \| tests-failed \| 0\.50 \| reward=0\.50, lines=3, .+=7 \| {2}\|/);
    expect(md).toMatch(/\| count \| 0 \| tests-failed \| 0 \| - \| refused: reward\.json refused: /);
    expect(md).toContain(
      '| count | 1 | no-changes | - | - | the change never reached the verifier (counts 0) |',
    );
    expect(md).toContain('| count | 2 | infrastructure | - | - | not scored (infrastructure) |');
  });

  it('keeps a hostile name text: no tag, no link, no cell break, no control character', () => {
    expect(md).not.toMatch(/<img|<script/i);
    expect(md).not.toContain('](javascript');
    expect(md).not.toMatch(CONTROL);
    // (`\\u{...}` is how Markdown writes the spelled-out `\u{...}` of report.html.)
    expect(md).toContain(
      '&lt;img src=x onerror=alert(1)>\\|**b**]\\(javascript:alert(2))\\\\u{001B}]52;c;QUJD\\\\u{0007}\\\\u{202E}=7',
    );
    // Every row of the per-trial table still has its six cells.
    const start = md.indexOf('### Reward per trial');
    const section = md.slice(start, md.indexOf('\n## ', start));
    const rows = section.split('\n').filter((l) => /^\| (greet|count) \| \d \| [a-z-]+ \|/.test(l));
    expect(rows).toHaveLength(5);
    for (const row of rows) expect(row.split(/(?<!\\)\|/).length - 2).toBe(6);
  });
});

describe('report.html', () => {
  const html = renderHtml(harborSummary());

  it('has the same reward tables', () => {
    expect(html).toContain('<h2>Rewards</h2>');
    expect(html).toContain('<td>greet</td><td>0.75</td><td>2</td><td>1</td><td>0</td>');
    expect(html).toContain('<h3>Reward per trial</h3>');
    expect(html).toContain(
      '<td>count</td><td>1</td><td>no-changes</td><td>-</td><td>-</td><td>the change never reached the verifier (counts 0)</td>',
    );
  });

  it('escapes a hostile name: no markup, control and bidi characters spelled out', () => {
    expect(html).not.toMatch(/<img|<script/i);
    expect(html).not.toMatch(CONTROL);
    expect(html).toContain(
      '&lt;img src=x onerror=alert(1)&gt;|**b**](javascript:alert(2))\\u{001B}]52;c;QUJD\\u{0007}\\u{202E}=7',
    );
  });
});

describe('what eval prints', () => {
  it('the mean reward per task and each refused reward, control characters spelled out', () => {
    let out = '';
    const ctx = { stdout: { write: (s: string) => (out += s) } } as unknown as CliContext;
    for (const line of harborLines(harborSummary().harbor!)) print(ctx, line);
    expect(out).toContain('greet                    mean reward 0.75');
    expect(out).toContain('count#0: no score (reward.json refused: ');
    expect(out).not.toMatch(CONTROL);
  });
});

describe('a suite without rewards', () => {
  it('shows no reward section in either report', () => {
    const plain = summarize([result({ taskId: 'a', trial: 0 }, 'ready-for-review')], meta(['a'], 1));
    expect(renderMarkdown(plain)).not.toMatch(/Reward/);
    expect(renderHtml(plain)).not.toMatch(/Reward/);
  });
});
