/**
 * `sandbox-harness eval` end to end: the built CLI, real Docker, the offline example
 * suite (cassettes). Counts and pass@k are checked against numbers worked out by hand.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cp, readFile, readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ExampleCopy } from '../../src/demo.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { findPools, poolCheck, type FoundPool } from '../../src/sandbox/pool/pool-status.js';
import { spawn } from 'node:child_process';
import { CLI, cleanEnv, runCli, startCli, treeHash, ROOT } from '../helpers/cli.js';

interface KValue {
  k: number;
  value: number | null;
}
interface TaskSummary {
  taskId: string;
  review?: {
    reviewed: number;
    approved: number;
    approvalRate: number | null;
    testsPassed: number;
    testsPassedNotApproved: number;
  };
  scored: number;
  passes: number;
  passRate: number;
  passAtK: KValue[];
  passHatK: KValue[];
}
interface Summary {
  tasks: TaskSummary[];
  overall: { scored: number; passes: number; passAtK: KValue[] };
  flaky?: string[];
}
interface Result {
  taskId: string;
  trial: number;
  outcome: string;
  category: string;
  runId: string;
  containerIds: string[];
  startedAt: string;
  finishedAt: string;
}

async function exampleWithSuite(): Promise<{ copy: ExampleCopy; suite: string; root: string }> {
  const copy = await exampleCopy();
  const root = dirname(copy.root);
  await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
  return { copy, suite: join(root, 'evals', 'suite.yaml'), root };
}

async function readResults(outDir: string): Promise<Result[]> {
  const text = await readFile(join(outDir, 'results.jsonl'), 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result);
}

const k = (values: KValue[]) => values.map((v) => (v.value === null ? null : Number(v.value.toFixed(4))));

// Nine trials of real containers take minutes on a loaded 2-core machine.
describe('eval end to end (real Docker, offline suite)', { timeout: 600_000 }, () => {
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
  }, 900_000);

  afterAll(async () => {
    await removeExampleCopies();
  });

  it('4 tasks x 3 trials: right counts and pass@k, the checker next to the tests, own containers removed, host repo untouched, trials overlap', async () => {
    const { copy, suite, root } = await exampleWithSuite();
    const before = treeHash(copy.repo);
    const out = join(root, 'out');
    const r = await runCli(['eval', suite, '-n', '3', '--concurrency', '2', '--out', out, '--json'], {
      cwd: root,
    });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(await readFile(join(out, 'summary.json'), 'utf8')) as Summary;
    const task = (id: string) => summary.tasks.find((t) => t.taskId === id)!;

    // fixes-threshold: 3/3. gives-up: 0/3. flaky-fix: cassettes cycle fixes, gives-up, fixes -> 2/3.
    // hard-codes-reviewed: its change passes the tests every time, the checker never approves -> 0/3.
    expect(
      [task('fixes-threshold'), task('gives-up'), task('flaky-fix'), task('hard-codes-reviewed')].map(
        (t) => t.passes,
      ),
    ).toEqual([3, 0, 2, 0]);
    expect(summary.overall).toMatchObject({ scored: 12, passes: 5 });
    expect(task('hard-codes-reviewed').review).toEqual({
      reviewed: 3,
      approved: 0,
      approvalRate: 0,
      testsPassed: 3,
      testsPassedNotApproved: 3,
    });
    expect(task('fixes-threshold').review).toBeUndefined();
    // pass@k = 1 - C(n-c,k)/C(n,k), n = 3.
    expect(k(task('fixes-threshold').passAtK)).toEqual([1, 1, 1]);
    expect(k(task('gives-up').passAtK)).toEqual([0, 0, 0]);
    // c = 2: pass@1 = 2/3; pass@2 = 1 - C(1,2)/C(3,2) = 1; pass@3 = 1.
    expect(k(task('flaky-fix').passAtK)).toEqual([0.6667, 1, 1]);
    // pass^k = C(c,k)/C(n,k): 2/3, C(2,2)/C(3,2) = 1/3, 0.
    expect(k(task('flaky-fix').passHatK)).toEqual([0.6667, 0.3333, 0]);
    // Overall pass@k is the mean over tasks: (1 + 0 + 2/3 + 0)/4 = 5/12, then (1 + 0 + 1 + 0)/4 twice.
    expect(k(summary.overall.passAtK)).toEqual([0.4167, 0.5, 0.5]);

    const results = await readResults(out);
    expect(results).toHaveLength(12);
    const failures = results.filter((x) => x.outcome === 'failed');
    // The cassette that gives up changes nothing: its trials say so, not "tests failed".
    expect(new Set(failures.map((x) => x.category))).toEqual(new Set(['no-changes', 'not-approved']));
    // Every trial had containers of its own, and none is left.
    const ids = results.flatMap((x) => x.containerIds);
    expect(new Set(ids).size).toBe(ids.length);
    for (const x of results) expect(x.containerIds.length).toBeGreaterThanOrEqual(1);
    // One image, one catalog, one test command: the baseline ran once, and every other
    // trial's record says whose it reused.
    const baselines = await Promise.all(
      results.map(async (x) => {
        const record = JSON.parse(await readFile(join(out, 'runs', x.runId, 'run.json'), 'utf8')) as {
          baseline: { reusedFrom?: string };
        };
        return record.baseline.reusedFrom;
      }),
    );
    // One baseline per catalog (the reviewed task has its own): measured once each, reused by the rest.
    const measured = results.filter((_, i) => baselines[i] === undefined);
    expect(measured.map((x) => x.taskId === 'hard-codes-reviewed').sort()).toEqual([false, true]);
    results.forEach((x, i) => {
      const from = baselines[i];
      if (from === undefined) return;
      const source = measured.find((m) => m.runId === from)!;
      expect(source).toBeDefined();
      expect(source.taskId === 'hard-codes-reviewed').toBe(x.taskId === 'hard-codes-reviewed');
    });
    for (const x of results)
      expect(await dockerEngine().containers.list({ [LABEL.run]: x.runId })).toEqual([]);
    expect(treeHash(copy.repo)).toBe(before);

    // Concurrency 2 really overlapped trials: from the event log's times per trial.
    const events = (await readFile(join(out, 'events.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { time: string; trial: string });
    const spans = new Map<string, [number, number]>();
    for (const e of events) {
      const t = Date.parse(e.time);
      const span = spans.get(e.trial) ?? [t, t];
      spans.set(e.trial, [Math.min(span[0], t), Math.max(span[1], t)]);
    }
    const list = [...spans.values()];
    const overlapping = list.some((a, i) => list.some((b, j) => i < j && a[0] < b[1] && b[0] < a[1]));
    expect(overlapping).toBe(true);

    const html = await readFile(join(out, 'report.html'), 'utf8');
    expect(html).toContain('fixes-threshold');
    expect(html).not.toMatch(/<script[^>]*src|<link[^>]*href=["']?https?:/i);
    await expect(readFile(join(out, 'report.md'), 'utf8')).resolves.toContain('flaky-fix');
  });

  it('--keep on-failure keeps the containers of failed trials only', async () => {
    const { suite, root } = await exampleWithSuite();
    const text = await readFile(suite, 'utf8');
    // Only the first two tasks: one passes, one fails.
    await writeFile(suite, text.slice(0, text.indexOf('  - id: flaky-fix')));
    const out = join(root, 'out-keep');
    const r = await runCli(['eval', suite, '-n', '1', '--keep', 'on-failure', '--out', out, '--json'], {
      cwd: root,
    });
    expect(r.code, r.stderr).toBe(0);
    const results = await readResults(out);
    const passed = results.find((x) => x.taskId === 'fixes-threshold')!;
    const failed = results.find((x) => x.taskId === 'gives-up')!;
    expect(await dockerEngine().containers.list({ [LABEL.run]: passed.runId })).toEqual([]);
    const kept = await dockerEngine().containers.list({ [LABEL.run]: failed.runId });
    expect(kept.length).toBeGreaterThan(0);
    for (const c of kept) expect(c.state).not.toBe('running');
    // Only this trial's containers: an eval trial's run id, its record under the eval's own folder.
    const gc = await runCli(['gc', '--run', failed.runId, '--runs-dir', join(out, 'runs'), '--json'], {
      cwd: root,
    });
    expect(gc.code, gc.stderr).toBe(0);
    expect(JSON.parse(gc.stdout)).toMatchObject({ run: failed.runId });
    expect(await dockerEngine().containers.list({ [LABEL.run]: failed.runId })).toEqual([]);
  });

  it('--pool: the same outcomes, the progress counts what the warm pools gave, doctor sees the pool while it runs, nothing of any pool is left', async () => {
    const { suite, root } = await exampleWithSuite();
    const text = await readFile(suite, 'utf8');
    await writeFile(suite, text.slice(0, text.indexOf('  - id: flaky-fix')));
    const out = join(root, 'out-pool');
    // Two trials per task: the second of each finds its sandboxes warmed by the first.
    const cache = join(root, 'cache');
    const started = startCli(['eval', suite, '-n', '2', '--concurrency', '2', '--pool', '--out', out], {
      cwd: root,
      env: cleanEnv({ XDG_CACHE_HOME: cache }),
    });
    // What doctor reads: the eval's pool, by its process, while it runs.
    const statusDir = join(cache, 'sandbox-harness', 'pools');
    let ended = false;
    void started.done.then(() => (ended = true));
    let seen: FoundPool | undefined;
    while (!ended && !seen) {
      seen = (await findPools(statusDir)).find((p) => p.pid === started.child.pid);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const r = await started.done;
    expect(r.code, r.stderr).toBe(0);
    expect(seen).toMatchObject({ owner: 'eval', engine: 'local', alive: true });
    expect((await poolCheck(statusDir)).detail).toMatch(/^none running/);
    const results = (await readResults(out)).sort(
      (a, b) => a.taskId.localeCompare(b.taskId) || a.trial - b.trial,
    );
    expect(results.map((x) => [x.taskId, x.category])).toEqual([
      ['fixes-threshold', 'ready-for-review'],
      ['fixes-threshold', 'ready-for-review'],
      ['gives-up', 'no-changes'],
      ['gives-up', 'no-changes'],
    ]);
    // A log line per finished trial, with the pools summed: sandboxes were taken warm.
    const taken = [...r.stderr.matchAll(/ pool \d+ warm \((\d+) taken, \d+ cold\)/g)].map((m) =>
      Number(m[1]),
    );
    expect(taken.length, r.stderr).toBeGreaterThan(0);
    expect(Math.max(...taken)).toBeGreaterThan(0);
    // Drained at the end of each trial: no container of either run, pooled or not.
    for (const x of results)
      expect(await dockerEngine().containers.list({ [LABEL.run]: x.runId })).toEqual([]);
  });

  it("--pool: one pool for the eval; a trial's first sandbox was made while the trial before it ran; nothing is left", async () => {
    const { suite, root } = await exampleWithSuite();
    const text = await readFile(suite, 'utf8');
    // One task, two trials one after the other, every sandbox kept: each one's age can be read.
    await writeFile(
      suite,
      text.slice(0, text.indexOf('  - id: gives-up')).replace('keep: never', 'keep: always'),
    );
    const out = join(root, 'out-shared-pool');
    const r = await runCli(['eval', suite, '-n', '2', '--concurrency', '1', '--pool', '--out', out], {
      cwd: root,
    });
    expect(r.code, r.stderr).toBe(0);
    const results = (await readResults(out)).sort((a, b) => a.trial - b.trial);
    expect(results.map((x) => x.category)).toEqual(['ready-for-review', 'ready-for-review']);
    try {
      const second = JSON.parse(await readFile(join(out, 'runs', results[1]!.runId!, 'run.json'), 'utf8'));
      const attempt = (second.containers as { role: string; id: string }[]).find(
        (c) => c.role === 'attempt-1',
      )!;
      const made = await dockerEngine().containers.inspect(attempt.id);
      // Its labels are its own run's, and it existed before that run began: the pool warmed it
      // for trial 1 while trial 0 ran.
      expect(made?.labels[LABEL.run]).toBe(results[1]!.runId);
      const created = JSON.parse(
        await new Promise<string>((resolve, reject) => {
          const child = spawn('docker', ['inspect', '--format', '{{json .Created}}', attempt.id]);
          let text = '';
          child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
          child.on('error', reject);
          child.on('close', () => resolve(text));
        }),
      ) as string;
      expect(Date.parse(created)).toBeLessThan(Date.parse(second.startedAt));
      // Every container of either run is one its record names (kept): none waits in a pool.
      for (const x of results) {
        const record = JSON.parse(await readFile(join(out, 'runs', x.runId!, 'run.json'), 'utf8'));
        const recorded = (record.containers as { id: string }[]).map((c) => c.id).sort();
        const there = (await dockerEngine().containers.list({ [LABEL.run]: x.runId! }))
          .map((c) => c.id)
          .sort();
        expect(there).toEqual(recorded);
      }
    } finally {
      for (const x of results) await runCli(['gc', '--run', x.runId!, '--json'], { cwd: root });
    }
    for (const x of results)
      expect(await dockerEngine().containers.list({ [LABEL.run]: x.runId })).toEqual([]);
  });

  it('killed part-way, --resume completes without re-running finished trials', async () => {
    const { suite, root } = await exampleWithSuite();
    const text = await readFile(suite, 'utf8');
    // The first three tasks: six trials with -n 2.
    await writeFile(suite, text.slice(0, text.indexOf('  - id: hard-codes-reviewed')));
    const out = join(root, 'out-resume');
    const first = startCli(['eval', suite, '-n', '2', '--concurrency', '1', '--out', out, '--json'], {
      cwd: root,
    });
    const deadline = Date.now() + 300_000;
    let finishedBefore: Result[] = [];
    for (;;) {
      if (Date.now() > deadline) throw new Error('no trial finished');
      finishedBefore = await readResults(out).catch(() => []);
      if (finishedBefore.length >= 2) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    first.child.kill('SIGKILL');
    await first.done;
    finishedBefore = await readResults(out);
    expect(finishedBefore.length).toBeLessThan(6);

    const r = await runCli(
      ['eval', suite, '-n', '2', '--concurrency', '2', '--out', out, '--resume', '--json'],
      { cwd: root },
    );
    expect(r.code, r.stderr).toBe(0);
    const results = await readResults(out);
    expect(results).toHaveLength(6);
    expect(new Set(results.map((x) => `${x.taskId}#${x.trial}`)).size).toBe(6);
    // Every finished trial removed its containers. The killed process's in-flight trials
    // are orphans: the resumed eval's start-up reaper removes those it can see, but one whose
    // create the daemon was still finishing can appear after that, so this test removes
    // them itself, by their run ids.
    for (const x of results)
      expect(await dockerEngine().containers.list({ [LABEL.run]: x.runId }), x.runId).toEqual([]);
    const finished = new Set(results.map((x) => x.runId));
    for (const runDir of await readdir(join(out, 'runs')))
      if (!finished.has(runDir)) await runCli(['gc', '--run', runDir]);
    // The trials finished before the kill kept their results and were not run again.
    for (const done of finishedBefore) {
      expect(results.filter((x) => x.taskId === done.taskId && x.trial === done.trial)).toEqual([done]);
      const runDirs = (await readdir(join(out, 'runs'))).filter((d) =>
        d.startsWith(`${done.taskId}-t${done.trial}-`),
      );
      expect(runDirs).toHaveLength(1);
    }
  });

  it('started with SIGINT ignored (a background job of a script), SIGINT still stops it, and so does SIGTERM', async () => {
    const { suite, root } = await exampleWithSuite();
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const out = join(root, `out-${signal}`);
      // What `sandbox-harness eval ... &` in a script does: the shell starts it with SIGINT ignored.
      const child = spawn(
        'sh',
        [
          '-c',
          'trap "" INT; exec "$0" "$@"',
          process.execPath,
          CLI,
          'eval',
          suite,
          '-n',
          '2',
          '--concurrency',
          '1',
          '--out',
          out,
          '--json',
        ],
        { cwd: root, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      const deadline = Date.now() + 300_000;
      // Once a trial has started (its run folder exists), the eval is well under way.
      while ((await readdir(join(out, 'runs')).catch(() => [])).length === 0) {
        if (Date.now() > deadline) throw new Error('no trial started');
        await new Promise((r) => setTimeout(r, 200));
      }
      const sent = Date.now();
      child.kill(signal);
      expect(await exited, stdout).toBe(130);
      expect(Date.now() - sent).toBeLessThan(60_000);
      expect(JSON.parse(stdout)).toMatchObject({ interrupted: true });
      for (const runDir of await readdir(join(out, 'runs'))) await runCli(['gc', '--run', runDir]);
    }
  });

  it('a bad suite file gives file:line:col errors and exit 2', async () => {
    const { suite, root } = await exampleWithSuite();
    await writeFile(
      suite,
      (await readFile(suite, 'utf8'))
        .replace('  n: 3', '  n: three')
        .replace('catalog: shipping-eval.yaml', 'catalgo: shipping-eval.yaml'),
    );
    const r = await runCli(['eval', suite], { cwd: root });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/suite\.yaml:\d+:\d+ defaults\.n: /);
    expect(r.stderr).toMatch(/suite\.yaml:\d+:\d+ tasks\[0\]\.catalgo: /);
  });
});
