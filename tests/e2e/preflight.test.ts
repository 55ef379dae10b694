/**
 * The preflight and broken test commands, end to end: the built CLI, real Docker, replayed
 * model. `check` on the bundled example; `fix` whose test command cannot run (`npm run tset`,
 * no package.json) ending exit 2 at the baseline without a single model call (the cassette is
 * never asked); an eval whose task has such a command (trials `error`, not scored); and a
 * genuinely failing ticket that still goes on to its attempts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ExampleCopy } from '../../src/demo.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { runCli, cleanEnv, ROOT } from '../helpers/cli.js';

const ENV = cleanEnv();
const runs: { id: string; runsDir: string }[] = [];

interface FixJson {
  runId: string;
  runDir: string;
  outcome: string;
  exitCode: number;
  message?: string;
  attempts: unknown[];
  turns: number;
  error?: { code: string; message: string; hint?: string };
}

async function fix(copy: ExampleCopy, cassette: string) {
  const r = await runCli(['fix', 'OPS-412', '--catalog', copy.catalog, '--cassette', cassette, '--json'], {
    cwd: copy.root,
    env: ENV,
  });
  let json: FixJson;
  try {
    json = JSON.parse(r.stdout) as FixJson;
  } catch {
    throw new Error(`fix did not print JSON (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
  }
  runs.push({ id: json.runId, runsDir: dirname(json.runDir) });
  return { ...r, json };
}

async function setTestCommand(copy: ExampleCopy, command: string): Promise<void> {
  const text = await readFile(copy.catalog, 'utf8');
  expect(text).toContain('testCommand: npm test');
  await writeFile(copy.catalog, text.replace('testCommand: npm test', `testCommand: ${command}`));
}

/** What the model was asked, from the run's own event log: nothing, for a broken command. */
async function modelCalls(runDir: string): Promise<number> {
  const events = await readFile(join(runDir, 'events.jsonl'), 'utf8');
  return events.split('\n').filter((l) => l.includes('"kind":"model_call"')).length;
}

describe('preflight and broken test commands (real Docker, replayed model)', { timeout: 400_000 }, () => {
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
  }, 900_000);

  afterAll(async () => {
    for (const run of runs) await runCli(['gc', '--run', run.id, '--runs-dir', run.runsDir, '--json']);
    await removeExampleCopies();
  });

  it('check on the bundled example reports image, base, size, times and exit code, and that the tests fail as a ticket expects', async () => {
    const copy = await exampleCopy();
    const r = await runCli(['check', '--catalog', copy.catalog, '--json'], { cwd: copy.root, env: ENV });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      exitCode: number;
      verdict: string;
      asExpected: boolean;
      image: { tag: string; id: string; base: string; sizeBytes: number };
      buildMs: number;
      tests: { exitCode: number; durationMs: number; layers: { command: string; exitCode: number }[] };
      dir: string;
    };
    expect(report).toMatchObject({ exitCode: 0, verdict: 'failing', asExpected: true });
    expect(report.image.tag).toMatch(/^sandbox-harness\/repo-/);
    expect(report.image.id).toMatch(/^sha256:/);
    expect(report.image.base).toBe('sandbox-harness/base-node:20');
    expect(report.image.sizeBytes).toBeGreaterThan(10_000_000);
    expect(report.buildMs).toBeGreaterThanOrEqual(0);
    expect(report.tests.exitCode).toBe(1);
    expect(report.tests.durationMs).toBeGreaterThan(0);
    expect(report.tests.layers).toEqual([expect.objectContaining({ command: 'npm test', exitCode: 1 })]);
    // The whole output is kept for a person to read: the example's failing test is in it.
    expect(await readFile(join(report.dir, 'test-output.txt'), 'utf8')).toMatch(/OPS-412/);

    // The same, for a person; and --expect passing says the tests did not do that (exit 1).
    const human = await runCli(['check', '--catalog', copy.catalog, '--expect', 'passing'], {
      cwd: copy.root,
      env: ENV,
    });
    expect(human.code, human.stderr).toBe(1);
    expect(human.stdout).toMatch(/^base {8}sandbox-harness\/base-node:20$/m);
    expect(human.stdout).toMatch(/^ {12}exit 1 after /m);
    expect(human.stdout).toMatch(/^verdict {5}! failing: /m);
    expect(human.stdout).toMatch(/expected the tests to be passing/);
  });

  it('fix with `npm run tset` ends exit 2 at the baseline, without spending an attempt or asking the model', async () => {
    const copy = await exampleCopy();
    await setTestCommand(copy, 'npm run tset');
    const { code, json } = await fix(copy, join(copy.cassettes, 'OPS-412.json'));
    expect(code).toBe(2);
    expect(json.outcome).toBe('error');
    expect(json.exitCode).toBe(2);
    expect(json.message).toMatch(/^the test command itself failed to run: package.json has no "tset" script/);
    expect(json.error?.code).toBe('TEST_COMMAND_BROKEN');
    expect(json.attempts).toEqual([]);
    expect(json.turns).toBe(0);
    expect(await modelCalls(json.runDir)).toBe(0);
    const record = JSON.parse(await readFile(join(json.runDir, 'run.json'), 'utf8'));
    expect(record.baseline.brokenCommand).toMatchObject({ kind: 'missing-script', command: 'npm run tset' });
    expect(await readFile(join(json.runDir, 'baseline-test-output.txt'), 'utf8')).toMatch(
      /Missing script: "tset"/,
    );

    // check says the same, with the same exit code.
    const checked = await runCli(['check', '--catalog', copy.catalog, '--json'], {
      cwd: copy.root,
      env: ENV,
    });
    expect(checked.code, checked.stderr).toBe(2);
    expect(JSON.parse(checked.stdout)).toMatchObject({
      verdict: 'broken',
      broken: { kind: 'missing-script' },
    });
  });

  it('fix of a repo without package.json ends exit 2 the same way (npm ENOENT)', async () => {
    const copy = await exampleCopy();
    await rm(join(copy.repo, 'package.json'));
    const { code, json } = await fix(copy, join(copy.cassettes, 'OPS-412.json'));
    expect(code).toBe(2);
    expect(json.message).toMatch(/^the test command itself failed to run: npm found no package.json/);
    expect(json.attempts).toEqual([]);
    expect(await modelCalls(json.runDir)).toBe(0);
  });

  it('in an eval, the trials of a task whose test command cannot run end error with the reason (exit 2), not scored', async () => {
    const copy = await exampleCopy();
    const root = dirname(copy.root);
    await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
    const catalog = join(root, 'evals', 'shipping-eval.yaml');
    await writeFile(
      catalog,
      (await readFile(catalog, 'utf8')).replace('testCommand: npm test', 'testCommand: npm run tset'),
    );
    const suite = join(root, 'evals', 'suite.yaml');
    const text = await readFile(suite, 'utf8');
    await writeFile(suite, text.slice(0, text.indexOf('  - id: gives-up')));
    const out = join(root, 'out-broken');
    const r = await runCli(['eval', suite, '-n', '2', '--concurrency', '1', '--out', out, '--json'], {
      cwd: root,
      env: ENV,
    });
    expect(r.code, r.stderr).toBe(2);
    const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter((l) => l.trim())
      .map(
        (l) => JSON.parse(l) as { category: string; error?: string; turns: number; attemptsUsed?: number },
      );
    expect(results).toHaveLength(2);
    for (const result of results) {
      expect(result.category).toBe('error');
      expect(result.error).toMatch(
        /^the test command itself failed to run: package.json has no "tset" script/,
      );
      expect(result.turns).toBe(0);
      expect(result.attemptsUsed).toBe(0);
    }
  });

  it('a genuinely failing ticket still goes on to its attempts and is fixed', async () => {
    const copy = await exampleCopy();
    const { code, json } = await fix(copy, join(copy.cassettes, 'OPS-412.json'));
    expect(json.outcome, json.message).toBe('ready-for-review');
    expect(code).toBe(0);
    expect(await modelCalls(json.runDir)).toBeGreaterThan(0);
  });
});
