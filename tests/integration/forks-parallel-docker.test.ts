/**
 * Forks and parallel attempts on real Docker, through the whole `fix` flow with replayed
 * models. A fork's sandbox starts from the kept sandbox's state (files in and out of the
 * workspace), and its change against the pristine tree includes what the fork carried; but
 * verification is pristine plus exactly that change: what the fork holds outside the change
 * never reaches it. Parallel attempts: the first verified one wins and is applied, the one
 * still working is stopped and recorded, and nothing of the run is left on the engine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FixOptions } from '../../src/fix/run-fix.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { collectGarbage } from '../../src/sandbox/docker/operator/collect-garbage.js';
import { forkSandbox, forkedSandbox } from '../../src/sandbox/fork/fork.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { requireDocker } from '../helpers/docker.js';
import { cassette, cleanUp, leftOf, replayedFix, replayedRuns } from '../helpers/replayed-fix.js';
import { text, toolUse } from '../unit/agent/helpers.js';

const runs = replayedRuns();

/** What the test command refuses: anything planted outside the change must not reach verification. */
const TEST_COMMAND = 'test ! -e coverage/.planted && test ! -e "$HOME/.planted" && npm test';

async function project(): Promise<{ root: string; repo: string; catalog: string }> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-forks-'));
  runs.roots.push(root);
  const repo = join(root, 'repo');
  await mkdir(join(repo, 'src'), { recursive: true });
  await mkdir(join(repo, 'test'), { recursive: true });
  await writeFile(
    join(repo, 'package.json'),
    JSON.stringify({
      name: 'forks',
      private: true,
      type: 'module',
      scripts: { test: 'node test/app.test.js' },
    }),
  );
  await writeFile(join(repo, 'src', 'app.js'), 'export const limit = 10;\n');
  await writeFile(
    join(repo, 'test', 'app.test.js'),
    "import { limit } from '../src/app.js';\nif (limit !== 12) { console.error(`limit is ${limit}`); process.exit(1); }\n",
  );
  const catalog = join(root, 'forks.yaml');
  await writeFile(
    catalog,
    [
      'name: forks',
      'owner: tests',
      'repo: repo',
      'rules: {}',
      'agent:',
      '  editableFiles: ["src/**"]',
      `  testCommand: ${JSON.stringify(TEST_COMMAND)}`,
      '  maxAttempts: 1',
      '  maxTurns: 6',
      'sandbox:',
      '  timeouts: { commandSec: 60, testSec: 60 }',
      '',
    ].join('\n'),
  );
  return { root, repo, catalog };
}

const run = (id: string, command: string) => toolUse(id, 'run_command', { command });
const setLimit = (id: string, to: string) =>
  toolUse(id, 'write_file', { path: 'src/app.js', content: `${to}\n` });

const fix = (root: string, catalog: string, options: Partial<FixOptions>) =>
  replayedFix(runs, root, catalog, 'Make the limit 12.', options);

function toolResults(runDir: string): Promise<string> {
  return readFile(join(runDir, 'transcript.json'), 'utf8');
}

describe('forks and parallel attempts on real Docker', () => {
  beforeAll(async () => {
    await requireDocker();
    await ensureBaseImage('node', {});
  }, 900_000);

  afterAll(() => cleanUp(runs));

  it('--continue --from-sandbox starts from the kept sandbox, and its verification sees pristine plus the change only', async () => {
    const { root, catalog } = await project();
    // The earlier run: a helper file in the change, and files planted outside it (an ignored
    // folder of the workspace, the home folder); its tests fail, so its sandbox is kept.
    const earlier = await fix(root, catalog, {
      keep: 'on-failure',
      cassette: await cassette(root, 'earlier', [
        [run('p', 'mkdir -p coverage && echo x > coverage/.planted && echo x > "$HOME/.planted"')],
        [toolUse('h', 'write_file', { path: 'src/helper.js', content: 'export const twelve = 12;\n' })],
        [toolUse('x', 'write_file', { path: 'src/extra.js', content: 'export const extra = 1;\n' })],
        [text('done')],
      ]),
    });
    expect(earlier.outcome).toBe('failed');
    expect(earlier.record.containers.find((c) => c.role === 'attempt-1')?.kept).toBe(true);

    const continued = await fix(root, catalog, {
      continueFrom: earlier.runId,
      fromSandbox: true,
      cassette: await cassette(root, 'continued', [
        // The fork holds everything the kept sandbox had, in the workspace and outside it.
        [
          run(
            'c',
            'test -e coverage/.planted && test -e "$HOME/.planted" && echo FORK-SEES-$(cat src/helper.js)',
          ),
        ],
        // A file the fork added, removed again: no longer part of the change.
        [run('r', 'rm src/extra.js')],
        [setLimit('e', "import { twelve } from './helper.js';\nexport const limit = twelve;")],
        [text('fixed')],
      ]),
    });
    expect(continued.error?.message).toBeUndefined();
    expect(continued.outcome).toBe('ready-for-review');
    expect(await toolResults(continued.runDir)).toContain('FORK-SEES-export const twelve = 12;');
    expect(continued.record.fork).toMatchObject({ container: expect.any(String), image: expect.any(String) });
    expect(continued.record.fork!.inherited).toBeGreaterThanOrEqual(1);
    // The change is the fork's own (the helper) plus this run's; nothing planted is in it, and
    // the tests that refuse the planted files passed in verification.
    const attempt = continued.record.attempts[0]!;
    expect(attempt.changedFiles.sort()).toEqual(['src/app.js', 'src/helper.js']);
    expect(attempt.verdict).toBe('passed');
    expect(continued.patch).toContain('export const twelve = 12;');
    expect(continued.patch).not.toContain('planted');
    // The fork image went with the run; its sandboxes too.
    expect(await leftOf(continued.runId)).toEqual({ containers: [], forks: [] });
  }, 600_000);

  it('--parallel 2: the verified attempt wins and is applied, the one still working is stopped and recorded, nothing is left', async () => {
    const { root, repo, catalog } = await project();
    const slow = await cassette(root, 'slow', [
      [setLimit('w', 'export const limit = 11;')],
      // Still working when the other attempt passes: stopped mid-command.
      [run('s', 'sleep 50')],
      [text('done')],
    ]);
    const right = await cassette(root, 'right', [
      [setLimit('r', 'export const limit = 12;')],
      [text('fixed')],
    ]);
    const started = Date.now();
    const result = await fix(root, catalog, {
      apply: true,
      keep: 'on-failure',
      parallel: 2,
      cassette: slow,
      laneCassettes: [slow, right],
    });
    expect(result.error?.message).toBeUndefined();
    expect(result.outcome).toBe('ready-for-review');
    expect(Date.now() - started).toBeLessThan(45_000);
    expect(result.record.parallelAttempts).toBe(2);
    const [loser, winner] = result.record.attempts;
    expect(winner).toMatchObject({ n: 2, verdict: 'passed', changedFiles: ['src/app.js'] });
    expect(loser).toMatchObject({ n: 1, verdict: 'interrupted', stoppedBy: 2 });
    expect(await readFile(join(repo, 'src', 'app.js'), 'utf8')).toBe('export const limit = 12;\n');
    // The loser's sandbox was removed, not kept; nothing of the run is left on the engine.
    expect(result.record.containers.filter((c) => c.kept)).toEqual([]);
    expect(result.record.containers.map((c) => c.role)).toEqual(
      expect.arrayContaining(['attempt-1', 'attempt-2']),
    );
    expect(await leftOf(result.runId)).toEqual({ containers: [], forks: [] });
  }, 600_000);

  it("a fork is hardened as any sandbox, refuses another run's container, and gc --run removes its image", async () => {
    const backend = dockerBackend();
    const image = (await ensureBaseImage('node', {})).tag;
    const runId = `forks-test-${process.pid}`;
    runs.runIds.push(runId);
    const source = await backend.create({ image, runId, role: 'source' });
    await source.writeFiles([{ path: 'state.txt', content: 'forked\n' }]);
    await expect(
      backend.forkImage!({ id: source.id, runId: 'another-run' }, { owner: runId }),
    ).rejects.toThrow(/is not a sandbox of run another-run/);
    const fork = await forkSandbox(backend, source, { id: source.id, runId }, { owner: runId });
    expect(fork.inherited.map((c) => c.path)).toEqual(['state.txt']);
    const child = forkedSandbox(
      await backend.create({ image: fork.image, runId, role: 'child', scanAgainst: image }),
      fork,
    );
    expect((await child.readFile('state.txt')).toString()).toBe('forked\n');
    expect((await child.changes()).changes.map((c) => [c.path, c.kind])).toEqual([['state.txt', 'added']]);
    const host = (await dockerEngine().containers.inspect(child.id))!.hostConfig;
    expect(host).toMatchObject({ NetworkMode: 'none', CapDrop: ['ALL'], Privileged: false });
    expect(host['SecurityOpt']).toContain('no-new-privileges');
    await child.dispose();
    await source.dispose();
    const report = await collectGarbage(dockerEngine(), { runId });
    expect(report.images.map((i) => i.tags)).toEqual([[fork.image]]);
    expect(await leftOf(runId)).toEqual({ containers: [], forks: [] });
  }, 300_000);
});
