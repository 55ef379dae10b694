/**
 * Harbor rewards in the viewer: a trial's page shows the verifier's score with its named
 * values (or why the reward was refused), the eval page has the report's reward tables and a
 * reward column in its trial list; names and reasons from a tampered record stay text. Runs
 * and evals without rewards look as they did.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { harborEvalSummary } from '../../../src/evals/sources/harbor-source.js';
import { summarize } from '../../../src/evals/summary.js';
import type { TrialResult } from '../../../src/evals/types.js';
import { renderPage } from '../../../src/view/site.js';
import { openViewSource } from '../../../src/view/source.js';
import { editRecord, HOSTILE, tempDir, writeEval, writeRun } from './fixtures.js';
import { writeFile } from 'node:fs/promises';

let dir: string;
let remove: () => Promise<void>;
beforeEach(async () => ({ dir, remove } = await tempDir()));
afterEach(() => remove());

const page = async (root: string, path: string) =>
  (await renderPage(await openViewSource(root), path, new URLSearchParams(), { exported: false })) ?? '';

/** Markup outside the viewer's own inline script, where no script or tag of the data may appear. */
function withoutOwnScript(html: string): string {
  const start = html.lastIndexOf('<script>');
  return start < 0 ? html : html.slice(0, start) + html.slice(html.indexOf('</script>', start) + 9);
}

// C0 but tab and newline, DEL, and the right-to-left override: what no page may carry raw.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f\u202e]/;
const HOSTILE_NAME = `${HOSTILE}\u001b]52;c;QUJD\u0007\u202e`;

function setReward(reward: Record<string, unknown>) {
  return (record: Record<string, unknown>) => {
    const [attempt] = record.attempts as Record<string, unknown>[];
    attempt!.reward = reward;
  };
}

describe('a trial page', () => {
  it("shows the verifier's score, where it came from and its named values", async () => {
    const run = await writeRun(join(dir, 'runs'), 'greet-t0');
    await editRecord(
      run,
      setReward({
        status: 'read',
        score: 0.5,
        file: 'reward.json',
        values: { reward: 0.5, [HOSTILE_NAME]: 3 },
      }),
    );
    const html = await page(join(dir, 'runs'), 'runs/greet-t0.html');
    expect(html).toContain('<dt>reward</dt><dd>0.5 from reward.json, attempt 1</dd>');
    expect(html).toContain('<h4>Reward</h4><p>Reward: <b>0.5 from reward.json</b>');
    expect(html).toContain('<td>reward</td><td class="num">0.5</td>');
    expect(html).toContain('&lt;img src=x onerror=alert(2)&gt;');
    expect(html).toContain('<span class="ctl" title="control character">\\u{001B}</span>');
    expect(withoutOwnScript(html)).not.toMatch(/<script|<img/i);
    expect(html).not.toMatch(CONTROL);
  });

  it('says why a refused reward is none, escaped', async () => {
    const run = await writeRun(join(dir, 'runs'), 'count-t0');
    await editRecord(run, setReward({ status: 'refused', reason: `reward.json refused: ${HOSTILE_NAME}` }));
    const html = await page(join(dir, 'runs'), 'runs/count-t0.html');
    expect(html).toContain('<p class="problems">Reward: no score: reward.json refused: &lt;/script&gt;');
    expect(html).toContain('(counts 0)</p>');
    expect(withoutOwnScript(html)).not.toMatch(/<script|<img/i);
    expect(html).not.toMatch(CONTROL);
  });

  it('has no reward where the run read none', async () => {
    await writeRun(join(dir, 'runs'), 'plain');
    const html = await page(join(dir, 'runs'), 'runs/plain.html');
    expect(html).not.toMatch(/reward/i);
  });
});

describe('an eval page', () => {
  const trial = (
    taskId: string,
    n: number,
    category: TrialResult['category'],
    extra: Omit<Partial<TrialResult>, 'runId'>,
  ) =>
    ({
      taskId,
      trial: n,
      outcome: category === 'ready-for-review' ? 'passed' : 'failed',
      category,
      turns: 1,
      inputTokens: 0,
      outputTokens: 0,
      durationMs: 1000,
      startedAt: '2026-11-30T10:00:00.000Z',
      finishedAt: '2026-11-30T10:00:01.000Z',
      runId: `${taskId}-t${n}`,
      ...extra,
    }) satisfies TrialResult;

  it('shows the reward tables, and each trial with its score or why it has none', async () => {
    const results = [
      trial('greet', 0, 'ready-for-review', { score: 1, reward: { values: { reward: 1 } } }),
      trial('greet', 1, 'tests-failed', {
        score: 0,
        reward: { refused: `reward.txt refused: ${HOSTILE_NAME}` },
      }),
    ];
    const summary = summarize(results, {
      suite: { name: 'harbor', file: 'x', sha256: 'x', tasks: [{ id: 'greet' }] },
      n: 2,
      startedAt: '2026-11-30T10:00:00.000Z',
      finishedAt: '2026-11-30T10:01:00.000Z',
      harnessVersion: '0.1.0',
    });
    summary.harbor = harborEvalSummary({ oracle: false, marks: {} }, results);
    const out = join(dir, 'out');
    await writeEval(out, [], summary);
    // results.jsonl as the harness writes it, with the reward fields.
    await writeFile(join(out, 'results.jsonl'), `${results.map((r) => JSON.stringify(r)).join('\n')}\n`);
    for (const r of results) await writeRun(join(out, 'runs'), r.runId);

    const html = await page(out, 'eval.html');
    expect(html).toContain('<h2>Rewards</h2>');
    expect(html).toContain('<td>greet</td><td>0.50</td><td>2</td><td>1</td><td>1</td>');
    expect(html).toContain('<h3>Reward per trial</h3>');
    expect(html).toContain('<th>reward</th>');
    expect(html).toContain('<td>1</td><td class="num">1</td>');
    expect(html).toContain('<td>0 (refused: reward.txt refused: &lt;/script&gt;');
    expect(withoutOwnScript(html)).not.toMatch(/<script|<img/i);
    expect(html).not.toMatch(CONTROL);
    // The trial list has the column too.
    expect(await page(out, 'index.html')).toContain('<th>reward</th>');
  });

  it('has no reward column for trials without rewards', async () => {
    const out = join(dir, 'plain');
    await writeEval(out, [{ taskId: 't', trial: 0, category: 'ready-for-review', runId: 't-t0' }]);
    await writeRun(join(out, 'runs'), 't-t0');
    expect(await page(out, 'index.html')).not.toMatch(/reward/i);
    expect(await page(out, 'eval.html')).not.toMatch(/reward/i);
  });
});
