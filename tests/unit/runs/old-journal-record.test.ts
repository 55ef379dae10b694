/**
 * A run recorded before the journal (its events.jsonl has no run_start, so there is nothing
 * to fold) still opens: in `inspect`, in the viewer, and as a record the harness reads.
 * The fixture is a real run folder as the harness wrote it then (paths rewritten).
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inspectCommand } from '../../../src/cli/commands/inspect.js';
import { foldRun } from '../../../src/runs/journal.js';
import { resolveRun } from '../../../src/runs/record.js';
import { loadRunBundle } from '../../../src/view/bundle.js';
import { renderPage } from '../../../src/view/site.js';
import { openViewSource } from '../../../src/view/source.js';
import { ROOT, capturedContext } from '../../helpers/cli.js';

const RUN = '20261201-122059-38b733';
const FIXTURE = join(ROOT, 'tests', 'fixtures', 'runs', 'before-journal');

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

/** A repo whose runs folder holds the old run. */
async function repoWithOldRun(): Promise<{ repo: string; runsDir: string }> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-old-record-'));
  roots.push(root);
  const repo = join(root, 'repo');
  const runsDir = join(repo, '.sandbox-harness', 'runs');
  await cp(FIXTURE, runsDir, { recursive: true });
  return { repo, runsDir };
}

describe('a run record from before the journal', () => {
  it('has no run_start to fold: its run.json is the record', () => {
    const events = readFileSync(join(FIXTURE, RUN, 'events.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { kind: string });
    expect(events.some((e) => e.kind === 'attempt_end')).toBe(true);
    expect(foldRun(events)).toBeUndefined();
  });

  it('opens in inspect, attempts and review included', async () => {
    const { repo, runsDir } = await repoWithOldRun();
    const stored = await resolveRun(runsDir, 'last');
    expect(stored.record.id).toBe(RUN);
    const ctx = capturedContext(repo);
    expect(await inspectCommand(ctx, RUN, { runsDir })).toBe(0);
    const out = ctx.out();
    expect(out).toContain('ready-for-review');
    expect(out).toMatch(/1\. changes-requested/);
    expect(out).toMatch(/2\. passed/);
    expect(out).toMatch(/review 1: request-changes/);
    const json = capturedContext(repo);
    expect(await inspectCommand(json, RUN, { runsDir, json: true })).toBe(0);
    expect(JSON.parse(json.out()).record.attempts).toHaveLength(2);
  });

  it('opens in the viewer: its attempts, verdicts, gate and review from run.json and the old events', async () => {
    const { repo } = await repoWithOldRun();
    const source = await openViewSource(repo);
    const bundle = await loadRunBundle(source, RUN);
    expect(bundle.problems).toEqual([]);
    expect(bundle.attempts.map((a) => a.verdict)).toEqual(['changes-requested', 'passed']);
    expect(bundle.attempts[0]!.reviews.map((r) => r.verdict)).toEqual(['request-changes']);
    expect(bundle.attempts[1]!.gate?.status).toBe('allowed');
    const html = await renderPage(source, `runs/${RUN}.html`, new URLSearchParams(), { exported: false });
    expect(html).toContain('<h2>Attempt 2 <span class="badge tone-good">passed</span></h2>');
  });
});
