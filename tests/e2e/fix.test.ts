/**
 * `sandbox-harness fix` end to end: the built CLI, real Docker, recorded model
 * conversations (cassettes). Each test works on its own temporary copy of the bundled
 * example, so the example itself never changes.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { readFile, writeFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExampleCopy } from '../../src/demo.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { cleanEnv, runCli, startCli, treeHash, ROOT } from '../helpers/cli.js';
import { atifTrajectorySchema } from '../helpers/atif-schema.js';
import { inspectLogSchema } from '../helpers/inspect-schema.js';
import { canaryEnv, expectNoCanary, expectNoCanaryIn } from '../helpers/canary.js';
import { engineGet } from '../helpers/engine-api.js';

const CASSETTES = join(ROOT, 'tests', 'e2e', 'cassettes');
/** Model keys and tokens in the environment of every run here: none may reach a sandbox or a record. */
const { env: ENV, canary: CANARY } = canaryEnv();
/** Runs this file started; only their containers are cleaned up. */
const runIds = new Set<string>();

interface FixJson {
  runId: string;
  runDir: string;
  outcome: string;
  exitCode: number;
  applied: boolean;
  attempts: { n: number; verdict: string; changedFiles: string[] }[];
  keptContainers: { role: string; id: string; kept: boolean }[];
}

async function fix(copy: ExampleCopy, cassette: string, extra: string[] = []) {
  const result = await runCli(
    ['fix', 'OPS-412', '--catalog', copy.catalog, '--cassette', cassette, '--json', ...extra],
    { cwd: copy.root, env: ENV },
  );
  let json: FixJson | undefined;
  try {
    json = JSON.parse(result.stdout) as FixJson;
  } catch {
    throw new Error(`fix did not print JSON (exit ${result.code}):\n${result.stdout}\n${result.stderr}`);
  }
  runIds.add(json.runId);
  expectNoCanaryIn(CANARY, result.stdout + result.stderr, "fix's output");
  await expectNoCanary(CANARY, json.runDir);
  return { ...result, json };
}

/** Waits until the run's first model call is in its event log; returns the run id. */
async function waitForFirstModelCall(runsDir: string): Promise<string> {
  const deadline = Date.now() + 240_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error('the attempt never started');
    const [runId] = await readdir(runsDir).catch(() => [] as string[]);
    if (runId) {
      runIds.add(runId);
      const events = await readFile(join(runsDir, runId, 'events.jsonl'), 'utf8').catch(() => '');
      if (events.includes('"model_call"')) return runId;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function containersOfRun(runId: string) {
  return dockerEngine().containers.list({ [LABEL.run]: runId });
}

/**
 * Waits until a process whose command line contains `command` runs in a container of the
 * run, asked of the daemon (`top`), so an interrupt is known to hit a running command.
 */
async function waitForCommand(runId: string, command: string): Promise<void> {
  const deadline = Date.now() + 240_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`\`${command}\` never ran in a container of run ${runId}`);
    for (const c of await containersOfRun(runId)) {
      if (c.state !== 'running') continue;
      const top = await engineGet<{ Titles: string[]; Processes: string[][] }>(
        `/containers/${c.id}/top`,
      ).catch(() => undefined);
      const cmd = top?.Titles.indexOf('CMD') ?? -1;
      if (top && cmd >= 0 && top.Processes.some((p) => p[cmd]?.includes(command))) return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Removes the containers of one run this file made, the way a user would. */
async function gcRun(runId: string) {
  const r = await runCli(['gc', '--run', runId, '--json']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { run: string; containers: { id: string; kept: boolean }[] };
}

// Each run builds or reuses an image and starts several containers: a minute or more when loaded.
describe('fix end to end (real Docker, replayed model)', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
  }, 900_000);

  afterAll(async () => {
    for (const runId of runIds) await gcRun(runId);
    await removeExampleCopies();
  });

  it('(a) the demo cassette reaches ready-for-review and the host file uses 39', async () => {
    const copy = await exampleCopy();
    const { code, json } = await fix(copy, join(copy.cassettes, 'OPS-412.json'));
    expect(json!.outcome).toBe('ready-for-review');
    expect(code).toBe(0);
    expect(json!.applied).toBe(true);
    const source = await readFile(join(copy.repo, 'src', 'shipping.ts'), 'utf8');
    expect(source).toMatch(/FREE_SHIPPING_THRESHOLD = 39;/);
    const patch = await readFile(join(json!.runDir, 'patch.diff'), 'utf8');
    expect(patch).toContain('+export const FREE_SHIPPING_THRESHOLD = 39;');
    expect(patch).toContain('-export const FREE_SHIPPING_THRESHOLD = 50;');
    const record = JSON.parse(await readFile(join(json!.runDir, 'run.json'), 'utf8'));
    expect(record.baseline.failing).toBe(true);
    expect(record.attempts).toHaveLength(1);
    expect(record.attempts[0].verdict).toBe('passed');
    for (const file of [
      'events.jsonl',
      'transcript.json',
      'attempts/1/test-output.txt',
      'attempts/1/patch.diff',
    ]) {
      await expect(stat(join(json!.runDir, file))).resolves.toBeTruthy();
    }
    // A successful run keeps no container (default policy on-failure).
    expect(await containersOfRun(json!.runId)).toEqual([]);
    // The demo run as a portable trajectory (Harbor's ATIF), valid against the format.
    const exported = await runCli(['export', json!.runId, '--format', 'atif', '--catalog', copy.catalog], {
      cwd: copy.root,
    });
    expect(exported.code).toBe(0);
    const atif = atifTrajectorySchema.safeParse(JSON.parse(exported.stdout));
    expect(atif.success, atif.success ? '' : atif.error.message).toBe(true);
    const agentSteps = atif.data!.steps.filter((s) => s.source === 'agent');
    expect(agentSteps.length).toBe(record.turns);
    expect(agentSteps.some((s) => s.tool_calls?.some((c) => c.function_name === 'edit_file'))).toBe(true);
    // And as an Inspect AI eval log of one sample, valid against Inspect's log format.
    const inspect = await runCli(['export', json!.runId, '--format', 'inspect', '--catalog', copy.catalog], {
      cwd: copy.root,
    });
    expect(inspect.code, inspect.stderr).toBe(0);
    const log = inspectLogSchema.safeParse(JSON.parse(inspect.stdout));
    expect(log.success, log.success ? '' : log.error.message).toBe(true);
    expect(log.data!.samples![0]).toMatchObject({ id: 'OPS-412', scores: { verified: { value: 'C' } } });
    expect(log.data!.samples![0]!.events.filter((e) => e.event === 'model')).toHaveLength(record.turns);
  });

  it('(b) an edit to the test file is rejected, the reason reaches attempt 2, which fixes the code', async () => {
    const copy = await exampleCopy();
    const testFile = join(copy.repo, 'test', 'shipping.test.ts');
    const before = await readFile(testFile, 'utf8');
    const { code, json } = await fix(copy, join(CASSETTES, 'edits-test-then-fixes.json'));
    expect(json!.outcome).toBe('ready-for-review');
    expect(code).toBe(0);
    expect(json!.attempts.map((a) => a.verdict)).toEqual(['rejected', 'passed']);
    const rejection = await readFile(join(json!.runDir, 'attempts', '1', 'rejection.txt'), 'utf8');
    expect(rejection).toContain('test/shipping.test.ts');
    const transcript = JSON.parse(await readFile(join(json!.runDir, 'transcript.json'), 'utf8')) as {
      attempt: number;
      messages: { role: string; content: { type: string; text?: string }[] }[];
    }[];
    const secondInput = JSON.stringify(transcript.find((t) => t.attempt === 2)!.messages[0]);
    expect(secondInput).toContain('test/shipping.test.ts');
    expect(secondInput).toContain(rejection.trim().split('\n')[0]!.slice(0, 60).replace(/"/g, '\\"'));
    expect(await readFile(testFile, 'utf8')).toBe(before);
    expect(await readFile(join(copy.repo, 'src', 'shipping.ts'), 'utf8')).toMatch(/THRESHOLD = 39;/);
  });

  it('(c) a model that never fixes: failed after maxAttempts, container kept; inspect, rerun-tests and gc work', async () => {
    const copy = await exampleCopy();
    const hash = treeHash(copy.repo);
    const { code, json } = await fix(copy, join(CASSETTES, 'never-fixes.json'), ['--max-attempts', '2']);
    expect(json!.outcome).toBe('failed');
    expect(code).toBe(1);
    expect(json!.attempts.map((a) => a.verdict)).toEqual(['tests-failed', 'no-changes']);
    expect(treeHash(copy.repo)).toBe(hash);
    expect(json!.keptContainers.length).toBeGreaterThan(0);
    const kept = await containersOfRun(json!.runId);
    expect(kept.map((c) => c.id).sort()).toEqual(json!.keptContainers.map((c) => c.id).sort());
    for (const c of kept) {
      expect(c.state).not.toBe('running');
      expect(c.labels[LABEL.run]).toBe(json!.runId);
      expect(c.name).toMatch(/^sandbox-harness-kept-/);
      // What the daemon holds for the container: no host variable in its configuration.
      expectNoCanaryIn(
        CANARY,
        JSON.stringify(await engineGet(`/containers/${c.id}/json`)),
        `container ${c.name}`,
      );
    }

    const prefix = json!.runId.slice(0, 17);
    const inspect = await runCli(['inspect', prefix, '--catalog', copy.catalog], { cwd: copy.root });
    expect(inspect.code).toBe(0);
    expect(inspect.stdout).toContain('outcome   failed');
    expect(inspect.stdout).toContain('tests-failed');
    expect(inspect.stdout).toMatch(/attempt-1\s+[0-9a-f]{12}\s+exited/);
    // Attempt 2 ran no command (the model gave up at once): its sandbox is the pristine image,
    // with nothing to look at, so it is not kept and no hint points into it.
    expect(inspect.stdout).not.toMatch(/attempt-2\s+[0-9a-f]{12}/);
    expect(inspect.stdout).not.toContain('--attempt 2');

    const rerun = await runCli(['rerun-tests', 'last', '--catalog', copy.catalog], { cwd: copy.root });
    expect(rerun.code).toBe(1);
    // The last kept sandbox is attempt 1's: its wrong fix (threshold 45) breaks the rule at 50.
    expect(rerun.stdout).toMatch(/not ok .*orders at the catalog threshold ship free/);
    expect(rerun.stdout).toMatch(/^ok .*an order of 45 EUR ships free/m);

    const logs = await runCli(['logs', 'last', '--catalog', copy.catalog, '--json'], { cwd: copy.root });
    const events = JSON.parse(logs.stdout) as { kind: string }[];
    expect(events.map((e) => e.kind)).toEqual(
      expect.arrayContaining(['attempt_start', 'model_call', 'tool_call', 'run_end']),
    );

    // gc finds the run like inspect does (a prefix, with the catalog), says first, then removes.
    const dry = await runCli(['gc', '--run', prefix, '--catalog', copy.catalog, '--dry-run', '--json'], {
      cwd: copy.root,
    });
    expect(dry.code, dry.stderr).toBe(0);
    const planned = JSON.parse(dry.stdout) as { run: string; containers: { id: string; kept: boolean }[] };
    expect(planned.run).toBe(json!.runId);
    expect(planned.containers.map((c) => c.id).sort()).toEqual(kept.map((c) => c.id).sort());
    expect((await containersOfRun(json!.runId)).length).toBe(kept.length);
    const gc = await runCli(['gc', '--run', 'last', '--catalog', copy.catalog, '--json'], { cwd: copy.root });
    expect(gc.code, gc.stderr).toBe(0);
    expect(JSON.parse(gc.stdout)).toMatchObject({ run: json!.runId, containers: planned.containers });
    expect(await containersOfRun(json!.runId)).toEqual([]);
  });

  it('(d) edits to node_modules that make the tests pass in the agent sandbox are refused, even when the catalog ignores node_modules', async () => {
    const copy = await exampleCopy();
    // The catalog ignores node_modules churn, but the hack rewrites a file the pristine image
    // has (the compiler): a path of the pristine tree is never ignored, so the gate sees it.
    const catalogText = await readFile(copy.catalog, 'utf8');
    await writeFile(
      copy.catalog,
      catalogText.replace(
        '  testCommand: npm test',
        '  testCommand: npm test\n  ignoreChanges:\n    - node_modules/**',
      ),
    );
    const { code, json } = await fix(copy, join(CASSETTES, 'hacks-node-modules.json'), [
      '--max-attempts',
      '1',
    ]);
    expect(json!.outcome).toBe('rejected');
    expect(code).toBe(1);
    expect(json!.attempts[0]!.verdict).toBe('rejected');
    expect(json!.attempts[0]!.changedFiles).toEqual(['node_modules/typescript/bin/tsc', 'src/shipping.ts']);
    const transcript = await readFile(join(json!.runDir, 'transcript.json'), 'utf8');
    // In the agent's own sandbox, the hacked compiler made `npm test` pass.
    expect(transcript).toMatch(
      /exit code: 0\\ntimed out: no\\ntruncated: no\\nstdout:\\n[^"]*# pass 1\\n# fail 0/,
    );
    const rejection = await readFile(join(json!.runDir, 'attempts', '1', 'rejection.txt'), 'utf8');
    expect(rejection).toMatch(/node_modules\/typescript\/bin\/tsc is not in the editable files/);
  });

  it('(e) Ctrl-C during an attempt: interrupted, the host repo unchanged, nothing left running', async () => {
    const copy = await exampleCopy();
    const hash = treeHash(copy.repo);
    const { child, done } = startCli(
      ['fix', 'OPS-412', '--catalog', copy.catalog, '--cassette', join(CASSETTES, 'sleeps.json'), '--json'],
      { cwd: copy.root, env: ENV },
    );
    const runsDir = join(copy.repo, '.sandbox-harness', 'runs');
    // Interrupt only once the agent's long command is seen running in the attempt sandbox.
    const runId = await waitForFirstModelCall(runsDir);
    await waitForCommand(runId, 'sleep 600');
    child.kill('SIGINT');
    const result = await done;
    expect(result.code).toBe(130);
    const record = JSON.parse(await readFile(join(runsDir, runId, 'run.json'), 'utf8'));
    expect(record.outcome).toBe('interrupted');
    expect(treeHash(copy.repo)).toBe(hash);
    const running = (await containersOfRun(runId)).filter((c) => c.state === 'running');
    expect(running).toEqual([]);
    await expectNoCanary(CANARY, join(runsDir, runId));
  });

  it('(e) a second Ctrl-C exits at once, still without touching the repo', async () => {
    const copy = await exampleCopy();
    const hash = treeHash(copy.repo);
    const { child, done } = startCli(
      ['fix', 'OPS-412', '--catalog', copy.catalog, '--cassette', join(CASSETTES, 'sleeps.json')],
      { cwd: copy.root, env: ENV },
    );
    const runsDir = join(copy.repo, '.sandbox-harness', 'runs');
    const runId = await waitForFirstModelCall(runsDir);
    // The second press comes while the first one's clean-up (killing the command, stopping
    // containers: several daemon round trips) is still under way, and only once the first was
    // heard: two SIGINTs sent 5 ms apart to a process the loaded host has not scheduled yet
    // are one pending signal to the kernel (seen in a CI-like run: no "second interrupt").
    const heard = new Promise<void>((resolve) => {
      let said = '';
      const listen = (chunk: Buffer) => {
        said += chunk.toString();
        if (!said.includes('stopping (press Ctrl-C again')) return;
        child.stderr?.off('data', listen);
        resolve();
      };
      child.stderr?.on('data', listen);
    });
    child.kill('SIGINT');
    await heard;
    const second = Date.now();
    child.kill('SIGINT');
    const result = await done;
    expect(result.code).toBe(130);
    // The evidence that it did not wait is the handler's own line: a second press that was
    // not honoured ends 130 after the clean-up, without it. The bound only guards against a
    // hang (the agent's command sleeps 600 s); it is loose, as a loaded host (CI's load
    // average passes 30) delays the signal's delivery and the exit by seconds.
    expect(result.stderr).toMatch(/second interrupt/);
    expect(Date.now() - second).toBeLessThan(60_000);
    expect(treeHash(copy.repo)).toBe(hash);
    // What the process left behind when it exited at once belongs to a dead owner: gc of
    // this run removes it (as the next run's start-up reaper would).
    await gcRun(runId);
    expect(await containersOfRun(runId)).toEqual([]);
  });

  describe('(f) bad input: a clear error, exit 2 or 3, nothing written into the repo', () => {
    let copy: ExampleCopy;
    let hash: string;
    beforeAll(async () => {
      copy = await exampleCopy();
    });
    // Per test, so one that writes cannot make the next one fail too.
    beforeEach(() => {
      hash = treeHash(copy.repo, /^$/);
    });
    const expectUntouched = () => expect(treeHash(copy.repo, /^$/)).toBe(hash);

    it('a missing catalog', async () => {
      const r = await runCli(['fix', 'OPS-412', '--catalog', join(copy.root, 'nope.yaml')], {
        cwd: copy.root,
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/nope\.yaml/);
      expectUntouched();
    });

    it('an invalid catalog, with file:line:col', async () => {
      const bad = join(copy.root, 'bad.yaml');
      await writeFile(
        bad,
        (await readFile(copy.catalog, 'utf8')).replace('maxAttempts: 3', 'maxAttempts: three'),
      );
      const r = await runCli(
        ['fix', 'OPS-412', '--catalog', bad, '--cassette', join(copy.cassettes, 'OPS-412.json')],
        {
          cwd: copy.root,
        },
      );
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        /bad\.yaml:\d+:\d+ agent\.maxAttempts: expected an integer from 1 to 10, got "three"/,
      );
      expectUntouched();
    });

    it('an empty ticket', async () => {
      const r = await runCli(
        ['fix', '-', '--catalog', copy.catalog, '--cassette', join(copy.cassettes, 'OPS-412.json')],
        {
          cwd: copy.root,
          input: '   \n',
        },
      );
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/empty/i);
      expectUntouched();
    });

    it('an unknown run id', async () => {
      const r = await runCli(['inspect', 'zzz-not-a-run', '--catalog', copy.catalog], { cwd: copy.root });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/no runs recorded|unknown run id/);
      expectUntouched();
    });

    it('a stopped daemon', async () => {
      const r = await runCli(
        ['fix', 'OPS-412', '--catalog', copy.catalog, '--cassette', join(copy.cassettes, 'OPS-412.json')],
        {
          cwd: copy.root,
          env: cleanEnv({ DOCKER_HOST: 'unix:///tmp/sandbox-harness-stopped-daemon.sock' }),
        },
      );
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(/cannot reach the Docker daemon/);
      // What doctor says: start that engine or unset DOCKER_HOST (setup would start another one).
      expect(r.stderr).toMatch(/hint: Nothing answers at DOCKER_HOST=.*`unset DOCKER_HOST`/);
      expect(r.stderr).not.toMatch(/sandbox-harness setup/);
      expectUntouched();
    });

    it('no provider chosen', async () => {
      const r = await runCli(['fix', 'OPS-412', '--catalog', copy.catalog], { cwd: copy.root });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--provider/);
      expectUntouched();
    });
  });
});
