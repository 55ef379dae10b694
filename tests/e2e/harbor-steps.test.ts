/**
 * Harbor as Harbor runs it, end to end (the built CLI, real Docker, task folders this test
 * writes FROM the harness's base image): a two-step task (`[[steps]]`, each step's own
 * instruction and tests laid over the task's) records both steps' rewards, its oracle scores
 * 1 with both; an agent that does only the first step scores the steps' mean, 0.5; an
 * untouched environment that passes one test of two scores 0.5, because the verifier always
 * runs (no "no changes, 0").
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { runCli } from '../helpers/cli.js';

interface Result {
  taskId: string;
  category: string;
  runId?: string;
  score?: number;
  reward?: { values?: Record<string, number>; steps?: Array<{ name: string; score?: number }> };
}

async function results(out: string): Promise<Result[]> {
  return (await readFile(join(out, 'results.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result)
    .sort((a, b) => (a.taskId < b.taskId ? -1 : 1));
}

async function write(root: string, files: Record<string, string>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(join(root, rel, '..'), { recursive: true });
    await writeFile(join(root, rel), content);
  }
}

const FROM_BASE = 'FROM sandbox-harness/base-node:20\nUSER root\nWORKDIR /app\n';
const ENVIRONMENT = '[environment]\ncpus = 1\nmemory_mb = 1024\nstorage_mb = 2048\nallow_internet = false\n';

/** A verifier that scores whether `file` holds `text`, as reward.txt. */
const check = (file: string, text: string) =>
  `#!/bin/bash\n. /tests/helper.sh\nif [ "$(cat /app/${file} 2>/dev/null)" = ${text} ]; then score 1; else score 0; fi\n`;

const turn = (command: string) => ({
  content: [{ type: 'tool_use', id: `t-${command.length}`, name: 'run_command', input: { command } }],
  stopReason: 'tool_use',
});
const done = { content: [{ type: 'text', text: 'Done.' }], stopReason: 'end_turn' };

describe('Harbor rewards and steps as Harbor gives them (real Docker)', { timeout: 900_000 }, () => {
  let root: string;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-harbor-steps-'));
    await write(join(root, 'tasks', 'two-step'), {
      'task.toml': `version = "1.0"\nmulti_step_reward_strategy = "mean"\n[agent]\ntimeout_sec = 300.0\n[verifier]\ntimeout_sec = 120.0\n${ENVIRONMENT}\n[[steps]]\nname = "first"\nmin_reward = 0.0\n[[steps]]\nname = "second"\n[steps.verifier]\ntimeout_sec = 60.0\n`,
      'environment/Dockerfile': FROM_BASE,
      // Shared by both steps' verifiers; each step's test.sh is its own.
      'tests/helper.sh': 'score() { echo "$1" > /logs/verifier/reward.txt; }\n',
      'steps/first/instruction.md': 'Write A into /app/a.txt.\n',
      'steps/first/tests/test.sh': check('a.txt', 'A'),
      'steps/first/solution/solve.sh': '#!/bin/bash\necho A > a.txt\n',
      'steps/second/instruction.md': 'Write B into /app/b.txt.\n',
      'steps/second/tests/test.sh': check('b.txt', 'B'),
      'steps/second/solution/solve.sh': '#!/bin/bash\necho B > b.txt\n',
    });
    // One test of two passes on the untouched environment: reward.json says 0.5.
    await write(join(root, 'tasks', 'half'), {
      'task.toml': `version = "1.0"\n[agent]\ntimeout_sec = 300.0\n[verifier]\ntimeout_sec = 120.0\n${ENVIRONMENT}`,
      'instruction.md': 'Make both checks pass: /app/one.txt and /app/two.txt must say yes.\n',
      'environment/Dockerfile': `${FROM_BASE}RUN echo yes > /app/one.txt\n`,
      'tests/test.sh':
        '#!/bin/bash\np=0\n[ "$(cat /app/one.txt 2>/dev/null)" = yes ] && p=$((p+1))\n[ "$(cat /app/two.txt 2>/dev/null)" = yes ] && p=$((p+1))\necho "{\\"reward\\": $(awk "BEGIN { print $p / 2 }"), \\"passed\\": $p}" > /logs/verifier/reward.json\n',
      'solution/solve.sh': '#!/bin/bash\necho yes > two.txt\n',
    });
  }, 900_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('--oracle: each step runs its own solution; both steps score 1, so does the task', async () => {
    const out = join(root, 'oracle');
    const r = await runCli(['eval', 'tasks', '--oracle', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const [half, twoStep] = await results(out);
    expect(half).toMatchObject({ category: 'ready-for-review', score: 1 });
    expect(twoStep).toMatchObject({
      category: 'ready-for-review',
      score: 1,
      reward: {
        steps: [
          { name: 'first', score: 1 },
          { name: 'second', score: 1 },
        ],
      },
    });
    const run = JSON.parse(await readFile(join(out, 'runs', twoStep!.runId!, 'run.json'), 'utf8'));
    const attempt = run.attempts[0];
    expect(
      attempt.steps.map((s: { name: string; changedCount: number }) => [s.name, s.changedCount]),
    ).toEqual([
      ['first', 1],
      ['second', 2],
    ]);
    expect(attempt.stepsReward).toEqual({ strategy: 'mean', ran: 2, of: 2 });
    expect(attempt.changedFiles.sort()).toEqual(['a.txt', 'b.txt']);
  });

  it('an agent that does the first step only scores the mean, 0.5; an untouched half-passing environment scores 0.5', async () => {
    await write(root, {
      // The first step's agent writes a.txt; the second step's does nothing.
      'agents/two-step.json': JSON.stringify({
        version: 1,
        model: 'first-only',
        turns: [
          turn('echo A > a.txt'),
          done,
          { content: [{ type: 'text', text: 'Nothing.' }], stopReason: 'end_turn' },
        ],
      }),
      // Changes nothing: Harbor's verifier still runs, and its 0.5 counts.
      'agents/half.json': JSON.stringify({ version: 1, model: 'idle', turns: [done] }),
      'agents.yaml': 'name: agents\nharbor: tasks\ncassettes: agents\n',
    });
    const out = join(root, 'agents-out');
    const r = await runCli(['eval', 'agents.yaml', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary;
    expect(summary.harbor.meanScore).toEqual({ half: 0.5, 'two-step': 0.5 });
    const [half, twoStep] = await results(out);
    expect(half).toMatchObject({
      category: 'tests-failed',
      score: 0.5,
      reward: { values: { reward: 0.5, passed: 1 } },
    });
    expect(twoStep).toMatchObject({
      category: 'tests-failed',
      score: 0.5,
      reward: {
        steps: [
          { name: 'first', score: 1 },
          { name: 'second', score: 0 },
        ],
      },
    });
    const run = JSON.parse(await readFile(join(out, 'runs', half!.runId!, 'run.json'), 'utf8'));
    expect(run.attempts[0]).toMatchObject({ changedFiles: [], reward: { status: 'read', score: 0.5 } });
  });
});
