/**
 * SWE-bench-style instances end to end: the built CLI, real Docker, two local git repos with
 * different runners (vitest, node:test). The gold patches resolve every instance under
 * --oracle, an empty patch none; a planted flaky test is found by N oracle runs, written to
 * a quarantine file, and left out (and recorded) by the eval after it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, readlink, rename, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ROOT, runCli, treeHash } from '../helpers/cli.js';
import { jsonl, makeInstanceRepos, REPO_SPECS, type InstanceRepos } from '../helpers/instance-repos.js';

interface Result {
  taskId: string;
  trial: number;
  category: string;
  runId?: string;
  tests?: { verdict?: string; exitCode: number; failing: string[]; quarantined?: string[] };
}

async function results(out: string): Promise<Result[]> {
  return (await readFile(join(out, 'results.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result);
}

describe('instances end to end (real Docker, two local repos)', { timeout: 900_000 }, () => {
  let root: string;
  let repos: InstanceRepos;
  const suite = (name: string, file: string, extra = '') =>
    `name: ${name}\ninstances: ${file}\nrepos: clones\nrepoSpecs: ${JSON.stringify(REPO_SPECS)}\ndefaults:\n  concurrency: 2\n${extra}`;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-instances-e2e-'));
    repos = await makeInstanceRepos(root);
    await writeFile(join(root, 'set.jsonl'), jsonl([repos.fees, repos.parcels]));
    await writeFile(join(root, 'flaky.jsonl'), jsonl([repos.flaky]));
    await writeFile(join(root, 'suite.yaml'), suite('two-repos', 'set.jsonl'));
  }, 900_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('--oracle resolves every instance (vitest and node:test); the clones are not touched', async () => {
    const before = [
      treeHash(join(repos.clones, 'acme__fees'), /^$/),
      treeHash(join(repos.clones, 'acme__parcels'), /^$/),
    ];
    const out = join(root, 'oracle');
    const r = await runCli(['eval', 'suite.yaml', '--oracle', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary;
    expect(summary.overall).toMatchObject({ scored: 2, passes: 2 });
    expect(summary.instances).toMatchObject({ oracle: true, goldFails: [] });
    for (const t of await results(out)) {
      expect(t.category).toBe('ready-for-review');
      expect(t.tests).toMatchObject({ verdict: 'resolved', failing: [] });
      // The gold patch went straight into its verification sandbox: no attempt sandbox.
      const record = JSON.parse(await readFile(join(out, 'runs', t.runId!, 'run.json'), 'utf8'));
      const roles = (record.containers as { role: string }[])
        .map((c) => c.role)
        .filter((r) => r !== 'baseline');
      expect(roles).toEqual(['verify-1']);
    }
    expect([
      treeHash(join(repos.clones, 'acme__fees'), /^$/),
      treeHash(join(repos.clones, 'acme__parcels'), /^$/),
    ]).toEqual(before);
    // inspect shows the verdict next to the exit code.
    const [first] = await results(out);
    const inspect = await runCli(['inspect', first!.runId!, '--runs-dir', join(out, 'runs')], { cwd: root });
    expect(inspect.stdout).toMatch(
      /resolved: FAIL_TO_PASS 1\/1, PASS_TO_PASS \d\/\d \(test command exit code 0\)/,
    );
    expect(await readFile(join(out, 'report.md'), 'utf8')).toContain('## Per-test results');
  });

  it('an empty patch resolves nothing', async () => {
    const cassettes = join(root, 'empty');
    await mkdir(cassettes, { recursive: true });
    const idle = {
      version: 1,
      model: 'does nothing',
      turns: [{ content: [{ type: 'text', text: 'No change.' }], stopReason: 'end_turn' }],
    };
    for (const id of [repos.fees.instance_id, repos.parcels.instance_id])
      await writeFile(join(cassettes, `${id}.json`), JSON.stringify(idle));
    await writeFile(join(root, 'empty.yaml'), suite('empty-patch', 'set.jsonl', 'cassettes: empty\n'));
    const out = join(root, 'empty-out');
    const r = await runCli(['eval', 'empty.yaml', '--out', out, '--json'], { cwd: root });
    // Every trial scored (as failures of the agent): exit 0.
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary;
    expect(summary.overall).toMatchObject({ scored: 2, passes: 0 });
    expect((await results(out)).map((t) => t.category)).toEqual(['no-changes', 'no-changes']);
  });

  it('a planted flaky test is found by N oracle runs, quarantined, and left out of the next eval (recorded there)', async () => {
    await writeFile(join(root, 'flaky.yaml'), suite('flaky', 'flaky.jsonl'));
    const quarantine = join(root, 'quarantine.json');
    let found: string[] | undefined;
    // It fails on about half of its runs: 5 runs miss it 1 time in 16; three rounds make that 1 in 4,096.
    for (let round = 0; round < 3 && !found; round++) {
      const out = join(root, `flaky-oracle-${round}`);
      const r = await runCli(
        ['eval', 'flaky.yaml', '--oracle', '-n', '5', '--out', out, '--quarantine', quarantine, '--json'],
        {
          cwd: root,
        },
      );
      expect([0, 1], r.stderr).toContain(r.code);
      const q = JSON.parse(await readFile(quarantine, 'utf8'));
      found = q.tests[repos.flaky.instance_id];
    }
    expect(found).toEqual(['the clock is steady']);
    // The next eval (a recorded session: the oracle's own cassette) leaves the flaky test out.
    const recorded = join(root, 'recorded');
    await mkdir(recorded, { recursive: true });
    await writeFile(
      join(recorded, `${repos.flaky.instance_id}.json`),
      await readFile(join(root, 'flaky-oracle-0', 'instances', repos.flaky.instance_id, 'oracle.json')),
    );
    await writeFile(
      join(root, 'flaky-replay.yaml'),
      suite('flaky-replay', 'flaky.jsonl', 'cassettes: recorded\n'),
    );
    const out = join(root, 'flaky-after');
    const r = await runCli(
      ['eval', 'flaky-replay.yaml', '-n', '2', '--quarantine', quarantine, '--out', out, '--json'],
      {
        cwd: root,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    for (const t of await results(out)) {
      expect(t.category).toBe('ready-for-review');
      expect(t.tests?.quarantined).toEqual(['the clock is steady']);
    }
    expect(await readFile(join(out, 'report.md'), 'utf8')).toContain('quarantined tests left out');
  });

  it("the host's git runs nothing the clone's git config names: a smudge filter never runs, the trial still resolves; a .git pointing out of the clone is refused", async () => {
    const marker = join(root, 'FILTER-RAN');
    const filter = `sh -c 'echo ran >> ${marker}; cat'`;
    const plain = { PATH: process.env.PATH, HOME: root, GIT_CONFIG_NOSYSTEM: '1' };
    const git = (cwd: string, ...args: string[]) =>
      execFileSync('git', args, { cwd, env: plain, stdio: 'pipe' });
    // A clone whose .git is a file naming a git folder kept inside it, whose config and
    // attributes send every file through a filter.
    const hostile = join(root, 'hostile');
    const clone = join(hostile, 'acme__parcels');
    await mkdir(hostile, { recursive: true });
    git(hostile, 'clone', '-q', '--no-local', join(repos.clones, 'acme__parcels'), clone);
    await rename(join(clone, '.git'), join(clone, '.gitdata'));
    await writeFile(join(clone, '.git'), 'gitdir: .gitdata\n');
    git(clone, 'config', 'filter.evil.smudge', filter);
    git(clone, 'config', 'filter.evil.clean', filter);
    await writeFile(join(clone, '.gitdata', 'info', 'attributes'), '* filter=evil\n');
    // Plain git on that clone runs the filter: the planted config is live.
    git(clone, 'archive', '--format=tar', '-o', join(root, 'plain.tar'), repos.parcels.base_commit);
    expect(await readFile(marker, 'utf8')).toMatch(/ran/);
    await rm(marker);

    await writeFile(join(root, 'parcels.jsonl'), jsonl([repos.parcels]));
    const hostileSuite = suite('hostile-git', 'parcels.jsonl').replace('repos: clones', 'repos: hostile');
    await writeFile(join(root, 'hostile.yaml'), hostileSuite);
    const out = join(root, 'hostile-out');
    const r = await runCli(['eval', 'hostile.yaml', '--oracle', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).summary.overall).toMatchObject({ scored: 1, passes: 1 });
    await expect(stat(marker)).rejects.toThrow();

    // The same clone with its .git file naming the git folder where it is kept elsewhere.
    const elsewhere = join(root, 'elsewhere.git');
    await rename(join(clone, '.gitdata'), elsewhere);
    await writeFile(join(clone, '.git'), `gitdir: ${elsewhere}\n`);
    const refused = await runCli(
      ['eval', 'hostile.yaml', '--oracle', '--out', join(root, 'hostile-out-2'), '--json'],
      {
        cwd: root,
      },
    );
    expect(refused.code, refused.stdout + refused.stderr).toBe(2);
    expect(refused.stdout + refused.stderr).toContain(
      `${clone}: .git points at ${elsewhere}, outside the repo`,
    );
    await expect(stat(marker)).rejects.toThrow();
  });

  it('the example instance suite (the bundled shipping service and examples/parcels) resolves with its gold cassettes', async () => {
    const out = join(root, 'example');
    const r = await runCli(
      ['eval', join(ROOT, 'examples', 'instances', 'suite.yaml'), '--out', out, '--json'],
      {
        cwd: root,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).summary.overall).toMatchObject({ scored: 2, passes: 2 });
    // A folder is copied with its links as written (node_modules/.bin), never made absolute.
    expect(
      await readlink(
        join(out, 'instances', 'shipping-service-OPS-412', 'repo', 'node_modules', '.bin', 'tsc'),
      ),
    ).toBe('../typescript/bin/tsc');
  });
});
