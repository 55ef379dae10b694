/**
 * The catalog's setup (`sandbox.setup`) on real Docker, through the whole `fix` flow with
 * replayed models. The agent's sandbox starts from the setup's result, yet what the setup
 * wrote is never part of the change; verification is pristine plus exactly the change, with
 * the setup run again before the tests (they fail without it). A shared setup is made once
 * for the runs of an eval and removed at its end; a run's own goes with the run. A setup that
 * fails on the untouched repo ends the run as an error of the configuration.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FixOptions } from '../../src/fix/run-fix.js';
import { SetupStates } from '../../src/fix/setup-states.js';
import { runSuite } from '../../src/evals/run-suite.js';
import type { RunRecord } from '../../src/runs/record.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { collectGarbage } from '../../src/sandbox/docker/operator/collect-garbage.js';
import { requireDocker } from '../helpers/docker.js';
import { cassette, cleanUp, leftOf, replayedFix, replayedRuns } from '../helpers/replayed-fix.js';
import { text, toolUse } from '../unit/agent/helpers.js';
import type { AssistantContent } from '../../src/llm/types.js';

const runs = replayedRuns();

/** Writes what the tests need (they fail without it) and changes a pristine file of the repo. */
const SETUP =
  'mkdir -p generated && printf 12 > generated/expected.txt && echo "# set up" >> README.md && echo ok > "$HOME/.setup-ran"';

async function project(setup: string, shared = false): Promise<{ root: string; catalog: string }> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-setup-'));
  runs.roots.push(root);
  const repo = join(root, 'repo');
  await mkdir(join(repo, 'src'), { recursive: true });
  await mkdir(join(repo, 'test'), { recursive: true });
  await writeFile(
    join(repo, 'package.json'),
    JSON.stringify({
      name: 'setup',
      private: true,
      type: 'module',
      scripts: { test: 'node test/app.test.js' },
    }),
  );
  await writeFile(join(repo, 'README.md'), '# setup\n');
  await writeFile(join(repo, 'src', 'app.js'), 'export const limit = 10;\n');
  await writeFile(
    join(repo, 'test', 'app.test.js'),
    [
      "import { readFileSync } from 'node:fs';",
      "import { limit } from '../src/app.js';",
      "const expected = Number(readFileSync('generated/expected.txt', 'utf8'));",
      'if (limit !== expected) { console.error(`limit is ${limit}, not ${expected}`); process.exit(1); }',
      '',
    ].join('\n'),
  );
  const catalog = join(root, 'setup.yaml');
  await writeFile(
    catalog,
    [
      'name: setup',
      'owner: tests',
      'repo: repo',
      'agent:',
      // The setup's files would be allowed: they stay out of the change all the same.
      '  editableFiles: ["src/**", "generated/**", "README.md"]',
      '  testCommand: npm test',
      '  maxAttempts: 1',
      '  maxTurns: 6',
      'sandbox:',
      '  timeouts: { commandSec: 60, testSec: 60 }',
      `  setup: { command: ${JSON.stringify(setup)}, shared: ${shared} }`,
      '',
    ].join('\n'),
  );
  return { root, catalog };
}

const run = (id: string, command: string) => toolUse(id, 'run_command', { command });
const fixing = (root: string, more: AssistantContent[][] = []) =>
  cassette(root, `fix-${Math.random().toString(16).slice(2)}`, [
    [run('c', 'echo SEES-$(cat generated/expected.txt)-$(tail -n1 README.md)-$(cat "$HOME/.setup-ran")')],
    ...more,
    [toolUse('w', 'write_file', { path: 'src/app.js', content: 'export const limit = 12;\n' })],
    [text('fixed')],
  ]);

const fix = (root: string, catalog: string, options: Partial<FixOptions>) =>
  replayedFix(runs, root, catalog, 'Make the limit what the generated file says.', options);

describe('the catalog setup on real Docker', () => {
  beforeAll(async () => {
    await requireDocker();
    await ensureBaseImage('node', {});
  }, 900_000);

  afterAll(() => cleanUp(runs));

  it("the agent starts from the setup's result, its change leaves the setup's files out, and verification runs the setup again", async () => {
    const { root, catalog } = await project(SETUP);
    // A file only the setup made, removed by the agent: against the pristine tree, no change.
    const cassetteFile = await fixing(root, [[run('r', 'rm generated/expected.txt')]]);
    const result = await fix(root, catalog, { cassette: cassetteFile });
    expect(result.error?.message).toBeUndefined();
    expect(result.outcome).toBe('ready-for-review');
    // The agent's sandbox held what the setup wrote, in the workspace and outside it.
    expect(await readFile(join(result.runDir, 'transcript.json'), 'utf8')).toContain('SEES-12-# set up-ok');
    // The change is the agent's alone, though the setup's files are editable ones.
    const attempt = result.record.attempts[0]!;
    expect(attempt.changedFiles).toEqual(['src/app.js']);
    expect(attempt.verdict).toBe('passed');
    expect(result.patch).not.toContain('generated');
    expect(result.patch).not.toContain('set up');
    // The verification ran the setup, then the tests (which read the setup's file).
    expect(result.record.testCommand.map((l) => l.name)).toEqual(['setup', 'test']);
    const verification = await readFile(join(result.runDir, 'attempts', '1', 'test-output.txt'), 'utf8');
    expect(verification).toContain(SETUP);
    expect(result.record.setup).toMatchObject({ command: SETUP, shared: false, image: expect.any(String) });
    expect(result.record.setup!.reusedFrom).toBeUndefined();
    // The setup's sandbox was never kept, and its image went with the run.
    expect(result.record.containers.map((c) => c.role)).toContain('setup');
    expect(await leftOf(result.runId)).toEqual({ containers: [], forks: [] });
  }, 600_000);

  it('a shared setup is made once for the runs given the same setups, and removed when they are drained', async () => {
    const { root, catalog } = await project(SETUP, true);
    const setups = new SetupStates();
    const first = await fix(root, catalog, { cassette: await fixing(root), sharedSetups: setups });
    const second = await fix(root, catalog, { cassette: await fixing(root), sharedSetups: setups });
    expect([first.outcome, second.outcome]).toEqual(['ready-for-review', 'ready-for-review']);
    expect(first.record.setup!.reusedFrom).toBeUndefined();
    expect(second.record.setup).toMatchObject({ reusedFrom: first.runId, image: first.record.setup!.image });
    expect(second.record.containers.map((c) => c.role)).not.toContain('setup');
    expect(await readFile(join(second.runDir, 'transcript.json'), 'utf8')).toContain('SEES-12-# set up-ok');
    // The image outlives the runs (it is the eval's), and goes when the eval drains its setups.
    expect((await leftOf(first.runId)).forks).toHaveLength(1);
    expect(await setups.drain()).toEqual([]);
    expect(await leftOf(first.runId)).toEqual({ containers: [], forks: [] });
    expect(await leftOf(second.runId)).toEqual({ containers: [], forks: [] });
  }, 600_000);

  it("a setup not shared is each run's own even within an eval, and gone with that run", async () => {
    const { root, catalog } = await project(SETUP, false);
    const setups = new SetupStates();
    const result = await fix(root, catalog, { cassette: await fixing(root), sharedSetups: setups });
    expect(result.outcome).toBe('ready-for-review');
    expect(setups.isTrialOwn(result.record.setup!.image)).toBe(true);
    expect(await leftOf(result.runId)).toEqual({ containers: [], forks: [] });
  }, 600_000);

  it('an eval makes a shared setup once per task, every trial starts from it, and nothing of it is left at the end', async () => {
    const { root, catalog } = await project(SETUP, true);
    await writeFile(join(root, 'ticket.md'), '# Make the limit what the generated file says\n');
    await writeFile(join(root, 'fixes.json'), await readFile(await fixing(root)));
    const suite = join(root, 'suite.yaml');
    await writeFile(
      suite,
      [
        'name: setup-eval',
        'defaults: { n: 3, concurrency: 2, keep: never }',
        'tasks:',
        '  - id: shared',
        `    catalog: ${catalog}`,
        '    ticket: ticket.md',
        '    cassette: fixes.json',
        '',
      ].join('\n'),
    );
    const result = await runSuite({
      suiteFile: suite,
      displayPath: 'suite.yaml',
      cwd: root,
      env: { XDG_STATE_HOME: join(root, 'state'), XDG_CACHE_HOME: join(root, 'cache') },
      signal: new AbortController().signal,
      outDir: join(root, 'out'),
      resume: false,
    });
    const trials = result.run.results;
    expect(trials.map((t) => t.outcome)).toEqual(['passed', 'passed', 'passed']);
    const records = await Promise.all(
      trials.map(
        async (t) =>
          JSON.parse(await readFile(join(result.outDir, 'runs', t.runId!, 'run.json'), 'utf8')) as RunRecord,
      ),
    );
    runs.runIds.push(...records.map((r) => r.id));
    const makers = records.filter((r) => r.setup && r.setup.reusedFrom === undefined);
    expect(makers).toHaveLength(1);
    for (const record of records) {
      expect(record.setup?.image).toBe(makers[0]!.setup!.image);
      if (record !== makers[0]) expect(record.setup?.reusedFrom).toBe(makers[0]!.id);
    }
    for (const record of records) expect(await leftOf(record.id)).toEqual({ containers: [], forks: [] });
  }, 600_000);

  it('a run killed while its agent works from the setup leaves nothing that gc does not remove: the attempt sandbox, the setup image', async () => {
    const { root, catalog } = await project(SETUP);
    const runId = `setup-crash-${process.pid}`;
    runs.runIds.push(runId);
    const working = await cassette(root, 'working', [[run('s', 'sleep 120')], [text('done')]]);
    const script = `
      import { runFix } from './src/fix/run-fix.ts';
      import { fixDeps } from './src/fix/deps.ts';
      import { sandboxProvider } from './src/sandbox/backend-registry.ts';
      await runFix({ ticket: 'Make the limit what the generated file says.', catalogFile: ${JSON.stringify(catalog)}, keep: 'never', apply: false,
        force: false, rebuild: false, cwd: ${JSON.stringify(root)}, env: {}, runId: '${runId}',
        signal: new AbortController().signal, readStdin: async () => '', provider: 'replay',
        cassette: ${JSON.stringify(working)} }, fixDeps(await sandboxProvider()));
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: new URL('../..', import.meta.url).pathname,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let said = '';
    child.stdout.on('data', (c: Buffer) => (said += c.toString()));
    child.stderr.on('data', (c: Buffer) => (said += c.toString()));
    let gone = false;
    const exited = new Promise((resolve) => child.once('exit', resolve)).then(() => (gone = true));
    const engine = dockerEngine();
    // The agent works (its sandbox made from the setup's image): then the process dies.
    const end = Date.now() + 120_000;
    let attempt: Awaited<ReturnType<typeof engine.containers.list>> = [];
    while (Date.now() < end && attempt.length === 0 && !gone) {
      attempt = (await engine.containers.list({ [LABEL.run]: runId })).filter(
        (c) => c.labels[LABEL.role] === 'attempt-1' && c.image.startsWith('sandbox-harness-fork:'),
      );
      if (attempt.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    expect(attempt, said).toHaveLength(1);
    expect((await leftOf(runId)).forks).toHaveLength(1);
    child.kill('SIGKILL');
    await exited;
    // gc without a run named: what a process that is gone left, its setup's image included.
    const report = await collectGarbage(engine);
    expect(report.images.flatMap((i) => i.tags)).toContain(attempt[0]!.image);
    expect(await leftOf(runId)).toEqual({ containers: [], forks: [] });
  }, 300_000);

  it('a setup that fails on the untouched repo ends the run as a configuration error, with its output kept', async () => {
    const { root, catalog } = await project('echo setup-went-wrong >&2; exit 3');
    const result = await fix(root, catalog, { cassette: await fixing(root) });
    expect(result.outcome).toBe('error');
    expect(result.error?.category).toBe('config');
    expect(result.error?.message).toMatch(/setup command failed \(exit 3\).*setup-went-wrong/s);
    expect(await readFile(join(result.runDir, 'setup-output.txt'), 'utf8')).toContain('setup-went-wrong');
    // No model call was made: the agent never started.
    expect(result.record.attempts).toEqual([]);
    expect(await leftOf(result.runId)).toEqual({ containers: [], forks: [] });
  }, 600_000);
});
