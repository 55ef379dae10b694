/**
 * An eval's out folder across processes, end to end (the built CLI, real Docker, the offline
 * example suite): an eval killed part-way is finished by `--resume` alone (n and the other
 * settings from the folder's lock), each missing trial run exactly once; and two shards run
 * at the same time into one out folder, then `eval merge`, give the outcomes and summary the
 * unsharded eval gives.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { cp, readFile, readdir, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { dirname, join } from 'node:path';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { cleanEnv, CLI, runCli, startCli, ROOT } from '../helpers/cli.js';

interface Result {
  taskId: string;
  trial: number;
  outcome: string;
  category: string;
  runId: string;
}

async function readResults(outDir: string): Promise<Result[]> {
  const text = await readFile(join(outDir, 'results.jsonl'), 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result);
}

const label = (r: { taskId: string; trial: number }) => `${r.taskId}#${r.trial}`;
/** Each trial's outcome and category, by trial, in one order. */
const outcomes = (results: Result[]) =>
  Object.fromEntries(results.map((r) => [label(r), `${r.outcome}/${r.category}`]).sort());
/** The trial a run folder belongs to (`<task>-t<trial>-<id>`). */
const runDirsOf = async (out: string) => readdir(join(out, 'runs')).catch(() => [] as string[]);

/** A summary without what differs between two runs of the same trials: times, durations, the suite's place. */
function comparable(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(comparable);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => !/(At|Ms|Sec|Seconds|[dD]uration.*)$/.test(key))
        .map(([key, v]) => [key, comparable(v)]),
    );
  return value;
}

describe('the out folder across processes (real Docker, offline suite)', { timeout: 900_000 }, () => {
  let root = '';
  let suite = '';
  /** The unsharded eval, finished by --resume: the reference for the sharded one. */
  let unsharded: { results: Result[]; summary: unknown } | undefined;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    const copy = await exampleCopy();
    root = dirname(copy.root);
    await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
    suite = join(root, 'evals', 'suite.yaml');
    const text = await readFile(suite, 'utf8');
    // The first three tasks (always, never, every other trial): six trials with -n 2.
    await writeFile(suite, text.slice(0, text.indexOf('  - id: hard-codes-reviewed')));
  }, 900_000);

  afterAll(async () => {
    await removeExampleCopies();
  });

  it('killed part-way, `--resume` with no other flag takes n from the lock and runs each missing trial exactly once', async () => {
    const out = join(root, 'out-resume');
    // -n 2 where the suite says 3: the resume must read it from the lock.
    const first = startCli(['eval', suite, '-n', '2', '--concurrency', '1', '--out', out, '--json'], {
      cwd: root,
    });
    const deadline = Date.now() + 400_000;
    for (;;) {
      if (Date.now() > deadline) throw new Error('no trial finished');
      if ((await readResults(out).catch(() => [])).length >= 2) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    first.child.kill('SIGKILL');
    await first.done;
    const before = await readResults(out);
    expect(before.length).toBeLessThan(6);
    const dirsBefore = new Set(await runDirsOf(out));

    // As the interrupted eval prints it: the suite, the folder, --resume.
    const r = await runCli(['eval', suite, '--out', out, '--resume', '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const results = await readResults(out);
    expect(results).toHaveLength(6);
    expect(new Set(results.map(label)).size).toBe(6);
    // The trials finished before the kill kept their results and were not run again.
    for (const done of before) expect(results.filter((x) => label(x) === label(done))).toEqual([done]);
    // Every missing trial ran exactly once in the resumed eval (one new run folder each), no other did.
    const missing = results
      .filter((x) => !before.some((b) => label(b) === label(x)))
      .map(label)
      .sort();
    const newDirs = (await runDirsOf(out)).filter((d) => !dirsBefore.has(d));
    const trialOfDir = (dir: string) => {
      const match = /^(.+)-t(\d+)-/.exec(dir);
      return match ? `${match[1]}#${match[2]}` : dir;
    };
    expect(newDirs.map(trialOfDir).sort()).toEqual(missing);
    // The killed process's in-flight trial left containers; removed here by its run id.
    const finished = new Set(results.map((x) => x.runId));
    for (const dir of await runDirsOf(out)) if (!finished.has(dir)) await runCli(['gc', '--run', dir]);
    for (const x of results)
      expect(await dockerEngine().containers.list({ [LABEL.run]: x.runId }), x.runId).toEqual([]);
    unsharded = { results, summary: JSON.parse(await readFile(join(out, 'summary.json'), 'utf8')) };
  });

  it('interrupted with Ctrl-C, it prints the command that finishes it, and that command, run as printed by a shell, does', async () => {
    const out = join(root, 'out-interrupted');
    const first = startCli(['eval', suite, '-n', '1', '--concurrency', '1', '--out', out], { cwd: root });
    const deadline = Date.now() + 400_000;
    for (;;) {
      if (Date.now() > deadline) throw new Error('no trial finished');
      if ((await readResults(out).catch(() => [])).length >= 1) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    first.child.kill('SIGINT');
    const stopped = await first.done;
    expect(stopped.code, stopped.stderr).toBe(130);
    const printed = /^resume with: (.+)$/m.exec(stopped.stdout)?.[1];
    expect(printed, stopped.stdout).toBeDefined();
    expect(printed).not.toMatch(/ -n /);
    // The line as a user pastes it, `sandbox-harness` being this build.
    await promisify(execFile)(
      'bash',
      ['-c', `sandbox-harness() { "${process.execPath}" "${CLI}" "$@"; }\n${printed!}`],
      {
        cwd: root,
        env: cleanEnv(),
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    const results = await readResults(out);
    expect(results.map(label).sort()).toEqual(['fixes-threshold#0', 'flaky-fix#0', 'gives-up#0']);
    for (const x of results)
      expect(await dockerEngine().containers.list({ [LABEL.run]: x.runId }), x.runId).toEqual([]);
  });

  it('two shards at once into one out folder (one from --shard, one from a Slurm array id), merged, equal the unsharded eval', async () => {
    expect(unsharded, 'the unsharded eval ran').toBeDefined();
    const out = join(root, 'out-sharded');
    const args = ['eval', suite, '-n', '2', '--concurrency', '1', '--out', out, '--json'];
    const [one, two] = await Promise.all([
      runCli([...args, '--shard', '1/2'], { cwd: root }),
      runCli(args, {
        cwd: root,
        env: cleanEnv({ SLURM_ARRAY_TASK_ID: '1', SLURM_ARRAY_TASK_MIN: '0', SLURM_ARRAY_TASK_COUNT: '2' }),
      }),
    ]);
    expect(one.code, one.stderr).toBe(0);
    expect(two.code, two.stderr).toBe(0);
    expect((JSON.parse(one.stdout) as { shard: unknown }).shard).toEqual({ index: 1, count: 2 });
    expect((JSON.parse(two.stdout) as { shard: unknown }).shard).toEqual({ index: 2, count: 2 });
    // A shard writes no reports: the merge does.
    await expect(readFile(join(out, 'summary.json'))).rejects.toThrow();

    const merged = await runCli(['eval', 'merge', out, '--json'], { cwd: root });
    expect(merged.code, merged.stderr).toBe(0);
    const results = await readResults(out);
    expect(results).toHaveLength(6);
    expect(outcomes(results)).toEqual(outcomes(unsharded!.results));
    const summary: unknown = JSON.parse(await readFile(join(out, 'summary.json'), 'utf8'));
    expect(comparable(summary)).toEqual(comparable(unsharded!.summary));
    for (const x of results)
      expect(await dockerEngine().containers.list({ [LABEL.run]: x.runId }), x.runId).toEqual([]);
  });
});
