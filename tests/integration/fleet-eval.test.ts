/**
 * `eval` over a fleet, for real: the local engine plus two extra engines on this machine (each
 * in its own network namespace, TCP with mutual TLS; tests/helpers/engines.ts), the offline
 * example suite with its cassettes, run by the built CLI. One engine is killed mid-eval: every
 * trial is still scored once, the lost ones were retried on the other engines, kept containers
 * are reached where they are, `--resume` finishes an eval on other engines, and nothing this
 * file made is left on any engine. Everything started here is stopped here.
 */
import { cp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareExampleCopy } from '../../src/demo.js';
import { dockerEngine, type DockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { cleanEnv, ROOT, runCli, startCli } from '../helpers/cli.js';
import { killEngine, restartEngine, startEngines, stopEngines, type TestEngine } from '../helpers/engines.js';

interface Result {
  taskId: string;
  trial: number;
  category: string;
  engine: string;
  runId?: string;
  startedAt: string;
  finishedAt: string;
  infraRetried?: boolean;
  firstTry?: { engine: string; category: string; error?: string; runId?: string };
}

interface RunJson {
  id: string;
  engine: string;
  engineRef?: unknown;
  outcome: string;
  containers: Array<{ role: string; id: string; kept: boolean; engine: string }>;
}

let engines: TestEngine[] = [];
let a: TestEngine;
let b: TestEngine;
let root: string;
let suite: string;
const outDirs: string[] = [];

beforeAll(async () => {
  await dockerEngine().ping(5000);
  await ensureBaseImage('node', { onLine: () => undefined });
  const copy = await prepareExampleCopy();
  root = dirname(copy.root);
  await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
  // The example suite's first three tasks (passes, fails, flaky); its reviewed task adds a
  // checker to every trial and nothing to what is tested here.
  const example = await readFile(join(root, 'evals', 'suite.yaml'), 'utf8');
  const reviewed = example.indexOf('  - id: hard-codes-reviewed');
  suite = join(root, 'evals', 'fleet-suite.yaml');
  await writeFile(suite, reviewed < 0 ? example : example.slice(0, reviewed));
  // Fresh engines without any image: the eval makes its images present there itself.
  engines = await startEngines({ count: 2 });
  [a, b] = engines as [TestEngine, TestEngine];
  await enginesFile('engines.yaml', [
    '  - context: default',
    '    capacity: 1',
    ...entry('a', a),
    ...entry('b', b),
  ]);
}, 600_000);

afterAll(async () => {
  await stopEngines(engines);
  // On the shared local engine, only the containers of this file's runs.
  for (const runId of await runIdsOf(outDirs)) {
    for (const c of await dockerEngine().containers.list({ [LABEL.run]: runId })) {
      await dockerEngine().containers.remove(c.id);
    }
  }
  if (root) await rm(root, { recursive: true, force: true });
}, 120_000);

function entry(name: string, e: TestEngine): string[] {
  const tls = (part: string) => join(e.clientTlsDir, `${part}.pem`);
  return [
    `  - name: ${name}`,
    `    host: ${e.url}`,
    `    tls: { ca: ${tls('ca')}, cert: ${tls('cert')}, key: ${tls('key')} }`,
    '    capacity: 1',
  ];
}

async function enginesFile(name: string, lines: string[]): Promise<string> {
  const file = join(root, name);
  await writeFile(file, ['engines:', ...lines, ''].join('\n'));
  return file;
}

async function readResults(out: string): Promise<Result[]> {
  return (await readFile(join(out, 'results.jsonl'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Result);
}

async function runJson(out: string, runId: string): Promise<RunJson> {
  return JSON.parse(await readFile(join(out, 'runs', runId, 'run.json'), 'utf8')) as RunJson;
}

async function runIdsOf(outs: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const out of outs) ids.push(...(await readdir(join(out, 'runs')).catch(() => [] as string[])));
  return ids;
}

/** Containers of this tool on an engine that belong to the given runs. */
async function containersOf(engine: DockerEngine, runIds: string[]) {
  const all = await engine.containers.list({ [LABEL.marker]: true });
  return all.filter((c) => runIds.includes(c.labels[LABEL.run] ?? ''));
}

const key = (r: Pick<Result, 'taskId' | 'trial'>) => `${r.taskId}#${r.trial}`;

describe('eval over three engines, one killed mid-eval', () => {
  let out: string;
  let killedAt = 0;

  it('scores every trial once, retries the lost engine’s trials elsewhere, and says so per engine', async () => {
    out = join(root, 'out-fleet');
    outDirs.push(out);
    const cli = startCli(
      ['eval', suite, '-n', '3', '--engines', 'engines.yaml', '--keep', 'on-failure', '--out', out],
      { cwd: root, env: cleanEnv() },
    );
    let exited = false;
    void cli.done.then(() => (exited = true));
    // As soon as a trial's agent works on b, b dies the way a crashed machine does.
    const deadline = Date.now() + 480_000;
    for (;;) {
      if (exited) throw new Error(`the eval ended before a trial ran on b:\n${(await cli.done).stderr}`);
      if (Date.now() > deadline) throw new Error('no trial reached engine b');
      const onB = await b.engine.containers.list({ [LABEL.marker]: true }).catch(() => []);
      if (onB.some((c) => c.labels[LABEL.role]?.startsWith('attempt-') && c.state === 'running')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await killEngine(b);
    killedAt = Date.now();
    const r = await cli.done;
    expect(r.code, r.stderr).toBe(0);

    const results = await readResults(out);
    expect(results).toHaveLength(9);
    expect(new Set(results.map(key)).size).toBe(9);
    // The trial that was on b when it died ran again on another engine, and says so.
    const retried = results.filter((x) => x.firstTry?.engine === 'b');
    expect(retried.length).toBeGreaterThanOrEqual(1);
    for (const x of retried) {
      expect(x.infraRetried).toBe(true);
      expect(x.firstTry?.category).toBe('infrastructure');
      expect(['default', 'a']).toContain(x.engine);
    }
    // Nothing ran on b after it died; the other two engines both ran trials.
    for (const x of results.filter((y) => y.engine === 'b')) {
      expect(Date.parse(x.finishedAt)).toBeLessThan(killedAt);
    }
    expect(results.some((x) => x.engine === 'default')).toBe(true);
    expect(results.some((x) => x.engine === 'a')).toBe(true);
    // The outcomes are the example's: fixes 3/3, gives-up 0/3, flaky 2/3.
    const passes = (task: string) =>
      results.filter((x) => x.taskId === task && x.category === 'ready-for-review').length;
    expect([passes('fixes-threshold'), passes('gives-up'), passes('flaky-fix')]).toEqual([3, 0, 2]);

    // Progress named engines, and the loss of b when it happened.
    expect(r.stderr).toMatch(/engine b lost \(/);
    expect(r.stderr).toMatch(/ on (default|a) \(/);

    const summary = JSON.parse(await readFile(join(out, 'summary.json'), 'utf8')) as {
      overall: { scored: number };
      engines: Array<{ engine: string; trials: number; infrastructure: number; retriedElsewhere: number }>;
    };
    expect(summary.overall.scored).toBe(9);
    const onB = summary.engines.find((e) => e.engine === 'b');
    expect(onB?.infrastructure).toBeGreaterThanOrEqual(1);
    expect(onB?.retriedElsewhere).toBe(retried.length);
    expect(summary.engines.reduce((n, e) => n + e.trials, 0)).toBe(9 + retried.length);
    expect(await readFile(join(out, 'report.md'), 'utf8')).toMatch(/## Engines[\s\S]*\| b \|/);
    expect(await readFile(join(out, 'report.html'), 'utf8')).toContain('<h2>Engines</h2>');
  }, 900_000);

  it('records the engine of every kept container and leaves nothing else on the engines that live', async () => {
    const results = await readResults(out);
    for (const x of results) {
      const record = await runJson(out, x.runId!);
      expect(record.engine).toBe(x.engine);
      for (const c of record.containers) expect(c.engine).toBe(x.engine);
      // (A trial that finished on b before it died left its containers there; b is checked below.)
      if (x.engine === 'b') continue;
      const engine = x.engine === 'a' ? a.engine : dockerEngine();
      const left = await containersOf(engine, [x.runId!]);
      // Failed trials keep their attempt container (stopped) where they ran; passing ones keep nothing.
      const kept = record.containers.filter((c) => c.kept).map((c) => c.id);
      expect(left.map((c) => c.id).sort()).toEqual(kept.sort());
      for (const c of left) expect(c.state).not.toBe('running');
      if (x.category === 'ready-for-review') expect(kept).toEqual([]);
    }
  });

  it('cleans the killed engine once it is back: gc --engines removes what its lost trial left', async () => {
    await restartEngine(b);
    const lostRuns = (await readResults(out)).flatMap((x) =>
      x.firstTry?.engine === 'b' && x.firstTry.runId ? [x.firstTry.runId] : [],
    );
    expect(lostRuns.length).toBeGreaterThanOrEqual(1);
    // The lost trial's record says where its containers were; they are still there.
    for (const runId of lostRuns) expect((await runJson(out, runId)).engine).toBe('b');
    const left = await containersOf(b.engine, lostRuns);
    expect(left.length).toBeGreaterThanOrEqual(1);
    const onB = await enginesFile('engines-b.yaml', entry('b', b));
    const r = await runCli(['gc', '--engines', onB, '--json'], { cwd: root, env: cleanEnv() });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      engines: Array<{ name: string; containers: Array<{ id: string }> }>;
    };
    expect(report.engines.map((e) => e.name)).toEqual(['b']);
    expect(report.engines[0]?.containers.map((c) => c.id)).toEqual(
      expect.arrayContaining(left.map((c) => c.id)),
    );
    expect(await b.engine.containers.list({ [LABEL.marker]: true })).toEqual([]);
  }, 180_000);
});

describe('kept containers on another engine', () => {
  it('inspect, rerun-tests and gc reach them from the run record, an engine given by URL', async () => {
    const out = join(root, 'out-url');
    outDirs.push(out);
    // `--engine tcp://...` takes its TLS files from DOCKER_CERT_PATH, as the docker CLI does.
    const env = cleanEnv({ DOCKER_CERT_PATH: a.clientTlsDir });
    const r = await runCli(
      ['eval', suite, '-n', '1', '--engine', a.url, '--keep', 'on-failure', '--out', out, '--json'],
      {
        cwd: root,
        env,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    const failed = (await readResults(out)).find((x) => x.taskId === 'gives-up')!;
    const engineName = `${a.address}-2376`;
    expect(failed.engine).toBe(engineName);
    const record = await runJson(out, failed.runId!);
    expect(record.engineRef).toEqual({ backend: 'docker', url: a.url });
    const kept = record.containers.find((c) => c.kept)!;
    expect((await a.engine.containers.inspect(kept.id))?.running).toBe(false);

    const runsDir = join(out, 'runs');
    const inspect = await runCli(['inspect', failed.runId!, '--runs-dir', runsDir, '--json'], {
      cwd: root,
      env,
    });
    expect(inspect.code, inspect.stderr).toBe(0);
    const shown = JSON.parse(inspect.stdout) as {
      containers: Array<{ id: string; exists: boolean; status: string }>;
    };
    expect(shown.containers).toEqual([
      expect.objectContaining({ id: kept.id, exists: true, status: 'exited' }),
    ]);

    // The gives-up cassette changes nothing, so the tests fail there as they did (exit 1).
    const rerun = await runCli(['rerun-tests', failed.runId!, '--runs-dir', runsDir, '--json'], {
      cwd: root,
      env,
    });
    expect(rerun.code, rerun.stderr).toBe(1);
    expect(JSON.parse(rerun.stdout)).toMatchObject({ container: kept.id, passed: false });
    expect((await a.engine.containers.inspect(kept.id))?.running).toBe(false);

    // Without the TLS files the record's URL cannot be reached; the record is still shown.
    const blind = await runCli(['inspect', failed.runId!, '--runs-dir', runsDir, '--json'], {
      cwd: root,
      env: cleanEnv({ DOCKER_CERT_PATH: join(root, 'nowhere') }),
    });
    expect(blind.code, blind.stderr).toBe(0);
    expect(
      (JSON.parse(blind.stdout) as { containers: Array<{ status: string }> }).containers[0]?.status,
    ).toMatch(/^unknown \(run .* ran on engine .*, which cannot be reached as its record says/);

    const gc = await runCli(['gc', '--engine', a.url, '--older-than', '0s', '--json'], { cwd: root, env });
    expect(gc.code, gc.stderr).toBe(0);
    expect(await containersOf(a.engine, await runIdsOf([out]))).toEqual([]);
  }, 600_000);
});

describe('--resume across engines', () => {
  it('finishes an eval started on two engines with another two, running each trial once', async () => {
    const out = join(root, 'out-resume');
    outDirs.push(out);
    const first = await enginesFile('engines-first.yaml', [
      '  - context: default',
      '    capacity: 1',
      ...entry('a', a),
    ]);
    const then = await enginesFile('engines-then.yaml', [...entry('a', a), ...entry('b', b)]);
    const cli = startCli(['eval', suite, '-n', '2', '--engines', first, '--out', out, '--json'], {
      cwd: root,
      env: cleanEnv(),
    });
    const deadline = Date.now() + 480_000;
    let before: Result[] = [];
    for (;;) {
      if (Date.now() > deadline) throw new Error('no trial finished');
      before = await readResults(out).catch(() => []);
      if (before.length >= 2) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    cli.child.kill('SIGKILL');
    await cli.done;
    before = await readResults(out);
    expect(before.length).toBeLessThan(6);

    const r = await runCli(
      ['eval', suite, '-n', '2', '--engines', then, '--out', out, '--resume', '--json'],
      {
        cwd: root,
        env: cleanEnv(),
      },
    );
    expect(r.code, r.stderr).toBe(0);
    const results = await readResults(out);
    expect(results).toHaveLength(6);
    expect(new Set(results.map(key)).size).toBe(6);
    for (const done of before) expect(results.filter((x) => key(x) === key(done))).toEqual([done]);
    const resumed = results.filter((x) => !before.some((d) => key(d) === key(x)));
    for (const x of resumed) expect(['a', 'b']).toContain(x.engine);
    const summary = (JSON.parse(r.stdout) as { summary: { engines: Array<{ engine: string }> } }).summary;
    expect(summary.engines.map((e) => e.engine).sort()).toEqual(
      [...new Set(results.map((x) => x.engine))].sort(),
    );
    // The resumed run cleaned up after itself on a and b; the killed run's containers on a
    // were reaped there (their owner is gone), and those on the local engine go in afterAll.
    const ids = await runIdsOf([out]);
    expect(await containersOf(a.engine, ids)).toEqual([]);
    expect(await containersOf(b.engine, ids)).toEqual([]);
  }, 900_000);
});

describe('--rerun-unscored after a killed engine', () => {
  it('runs again exactly the trial the lost engine left unscored, keeps the scored ones, and leaves none unscored', async () => {
    const out = join(root, 'out-rerun-unscored');
    outDirs.push(out);
    // One engine only: a trial lost with it has nowhere to go, so it ends unscored.
    const onlyA = await enginesFile('engines-only-a.yaml', entry('a', a));
    const cli = startCli(['eval', suite, '-n', '1', '--engines', onlyA, '--out', out, '--json'], {
      cwd: root,
      env: cleanEnv(),
    });
    let exited = false;
    void cli.done.then(() => (exited = true));
    // Once one trial is scored and the next one's agent works on a, a dies as a crashed machine does.
    const deadline = Date.now() + 480_000;
    for (;;) {
      if (exited)
        throw new Error(`the eval ended before a second trial ran on a:\n${(await cli.done).stderr}`);
      if (Date.now() > deadline) throw new Error('no second trial reached engine a');
      const done = await readResults(out).catch(() => []);
      const onA = await a.engine.containers.list({ [LABEL.marker]: true }).catch(() => []);
      const working = onA.some(
        (c) =>
          c.labels[LABEL.role]?.startsWith('attempt-') &&
          c.state === 'running' &&
          !done.some((x) => x.runId === c.labels[LABEL.run]),
      );
      if (done.length >= 1 && working) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await killEngine(a);
    const lost = await cli.done;
    // Unscored trials make the eval exit non-zero: it could not score them.
    expect(lost.code, lost.stderr).not.toBe(0);
    const before = await readResults(out);
    const unscored = before.filter((x) => ['infrastructure', 'error'].includes(x.category));
    expect(unscored.length).toBeGreaterThanOrEqual(1);
    const scored = before.filter((x) => !unscored.includes(x));
    expect(scored.length).toBeGreaterThanOrEqual(1);

    await restartEngine(a);
    const r = await runCli(['eval', suite, '--engines', onlyA, '--out', out, '--rerun-unscored', '--json'], {
      cwd: root,
      env: cleanEnv(),
    });
    expect(r.code, r.stderr).toBe(0);
    const results = await readResults(out);
    expect(results).toHaveLength(3);
    expect(new Set(results.map(key)).size).toBe(3);
    expect(results.filter((x) => ['infrastructure', 'error'].includes(x.category))).toEqual([]);
    // The scored ones are kept as they were; the unscored ones ran again and their old results moved aside.
    for (const done of scored) expect(results.filter((x) => key(x) === key(done))).toEqual([done]);
    for (const old of unscored) {
      const again = results.find((x) => key(x) === key(old))!;
      expect(again.runId).not.toBe(old.runId);
    }
    const superseded = (await readFile(join(out, 'superseded.jsonl'), 'utf8')).split('\n').filter(Boolean);
    expect(superseded.map((l) => key(JSON.parse(l) as Result)).sort()).toEqual(unscored.map(key).sort());
    const summary = (JSON.parse(r.stdout) as { summary: { overall: { scored: number } } }).summary;
    expect(summary.overall.scored).toBe(3);
  }, 900_000);
});
