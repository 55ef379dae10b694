/**
 * Harbor's multi-step tasks read and mapped: `[[steps]]` with `steps/<name>/` folders (the
 * instruction required, tests laid over the task's, same-named files the step's), what is
 * refused by name (a step's workdir/, a missing test.sh, a duplicate name, a step key this
 * cannot honour), and the steps' rewards formed as Harbor forms a trial's (mean per name over
 * the steps that left one, or the last; min_reward stops the steps after).
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadHarborTask, parseTaskToml } from '../../../../src/evals/sources/harbor.js';
import { materializeHarbor } from '../../../../src/evals/sources/harbor-materialize.js';
import { suiteDefaults } from '../../../../src/evals/suite.js';
import {
  combineStepRewards,
  minRewardShortfall,
  type RewardReading,
} from '../../../../src/test-results/reward.js';

const read = (score: number, extra: Record<string, number> = {}): RewardReading => ({
  ok: true,
  reward: { score, values: { reward: score, ...extra }, file: 'reward.json' },
});

describe("a multi-step task's reward, as Harbor forms it", () => {
  it('mean: per name, over the steps whose verifier left a reward; a name a step lacks counts 0 there', () => {
    const r = combineStepRewards(
      [
        { name: 'a', reading: read(1, { style: 1 }) },
        { name: 'b', reading: read(0) },
        { name: 'c', reading: { ok: false, reason: 'no file' } },
      ],
      'mean',
    );
    expect(r).toEqual({
      ok: true,
      reward: { score: 0.5, values: { reward: 0.5, style: 0.5 }, file: 'steps' },
    });
  });

  it("final: the last step's reward as it is; a last step without one is no reward", () => {
    expect(
      combineStepRewards(
        [
          { name: 'a', reading: read(0) },
          { name: 'b', reading: read(0.75) },
        ],
        'final',
      ),
    ).toMatchObject({ ok: true, reward: { score: 0.75 } });
    expect(combineStepRewards([{ name: 'a', reading: read(1) }, { name: 'b' }], 'final')).toEqual({
      ok: false,
      reason: 'the last step run (b) was not verified',
    });
  });

  it('no step with a reward is no reward, with each step said', () => {
    const r = combineStepRewards([{ name: 'a', reading: { ok: false, reason: 'a link' } }], 'mean');
    expect(r).toEqual({ ok: false, reason: "no step's verifier left a reward (a: a link)" });
  });

  it('min_reward: a number gates "reward", a table each name it lists; a missing name or no reward is below', () => {
    expect(minRewardShortfall(read(0.5), 0.5)).toBeUndefined();
    expect(minRewardShortfall(read(0.4), 0.5)).toBe('reward=0.4 below min_reward 0.5');
    expect(minRewardShortfall(read(1, { safety: 0 }), { safety: 1 })).toBe('safety=0 below min_reward 1');
    expect(minRewardShortfall(read(1), { safety: 1 })).toBe(
      'safety below min_reward 1 (no safety in the reward)',
    );
    expect(minRewardShortfall({ ok: false, reason: 'x' }, 0)).toBe('reward below min_reward 0 (no reward)');
  });
});

describe('[[steps]] in task.toml', () => {
  it('reads names, min_reward (number or table), per-step times and verifier variables, and the strategy', () => {
    const parsed = parseTaskToml(
      'multi_step_reward_strategy = "final"\n[[steps]]\nname = "one"\nmin_reward = 0.5\n[steps.agent]\ntimeout_sec = 30\n[[steps]]\nname = "two"\nmin_reward = { safety = 1 }\n[steps.verifier]\ntimeout_sec = 9\nenv = { MODE = "strict" }\n',
      'task.toml',
    );
    expect(parsed).toMatchObject({
      config: {
        multi_step_reward_strategy: 'final',
        steps: [
          { name: 'one', min_reward: 0.5, agent: { timeout_sec: 30 } },
          { name: 'two', min_reward: { safety: 1 }, verifier: { timeout_sec: 9, env: { MODE: 'strict' } } },
        ],
      },
    });
  });

  it('refuses a duplicate name, a bad strategy and a step key it cannot honour, at their lines', () => {
    const parsed = parseTaskToml(
      'multi_step_reward_strategy = "best"\n[[steps]]\nname = "a"\n[[steps]]\nname = "a"\nuser = "root"\n',
      't/task.toml',
    );
    const problems = 'problems' in parsed ? parsed.problems.join('\n') : '';
    expect(problems).toMatch(
      /t\/task\.toml:1: multi_step_reward_strategy: expected "mean" or "final", got "best"/,
    );
    expect(problems).toMatch(/steps\.1\.name: step name "a" is used twice/);
    expect(problems).toMatch(/steps\.1\.user: unknown key "user"/);
  });
});

describe('multi-step task folders', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'harbor-steps-unit-'));
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  async function task(files: Record<string, string>): Promise<string> {
    const dir = join(root, 'multi');
    for (const [rel, content] of Object.entries(files)) {
      await mkdir(join(dir, rel, '..'), { recursive: true });
      await writeFile(join(dir, rel), content);
    }
    return dir;
  }

  const BASE = {
    'task.toml': '[environment]\nallow_internet = false\n[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n',
    'environment/Dockerfile': 'FROM sandbox-harness/base-node:20\nWORKDIR /app\n',
    'tests/test.sh': 'echo task > /logs/verifier/reward.txt\n',
    'tests/helper.sh': 'task helper\n',
    'steps/one/instruction.md': 'Do one.\n',
    'steps/two/instruction.md': 'Do two.\n',
    'steps/two/tests/helper.sh': 'step two helper\n',
  };

  it('needs no task instruction.md; each step its own; the task tests/test.sh serves a step without one', async () => {
    const loaded = await loadHarborTask(await task(BASE), 'multi');
    expect(loaded).toMatchObject({
      instruction: '',
      steps: [
        { name: 'one', instruction: 'Do one.\n' },
        { name: 'two', instruction: 'Do two.\n', testsDir: expect.stringMatching(/steps\/two\/tests$/) },
      ],
    });
  });

  it("refuses, by path, a missing step folder or instruction, a step's workdir/, and a step with no test.sh anywhere", async () => {
    const { 'tests/test.sh': _, ...noTaskTest } = BASE;
    const dir = await task({
      ...noTaskTest,
      'task.toml': BASE['task.toml'] + '[[steps]]\nname = "three"\n[[steps]]\nname = "four"\n',
      'steps/one/workdir/setup.sh': 'true\n',
      'steps/three/tests/test.sh': 'true\n',
    });
    const loaded = await loadHarborTask(dir, 'multi');
    expect('problems' in loaded ? loaded.problems : []).toEqual([
      "multi/steps/one/workdir: a step's workdir/ (files and setup.sh placed before its agent) is not supported by sandbox-harness",
      'multi/steps/one/tests/test.sh: missing, and the task has no tests/test.sh for it either',
      'multi/steps/two/tests/test.sh: missing, and the task has no tests/test.sh for it either',
      'multi/steps/three/instruction.md: missing',
      'multi/steps/four: missing (the folder of [[steps]] name = "four")',
    ]);
  });

  it("maps to catalog steps: each step's ticket, its tests laid over the task's, the strategy as combine", async () => {
    const dir = await task({
      ...BASE,
      'task.toml':
        'multi_step_reward_strategy = "final"\n' +
        BASE['task.toml'].replace('name = "one"\n', 'name = "one"\nmin_reward = 1\n'),
    });
    const loaded = await loadHarborTask(dir, 'multi');
    if ('problems' in loaded) throw new Error(loaded.problems.join('\n'));
    const out = join(root, 'out');
    const made = await materializeHarbor(
      { file: dir, name: 'multi', tasks: [loaded], defaults: suiteDefaults() },
      { outDir: out },
    );
    const catalog = JSON.parse(await readFile(made.suite.tasks[0]!.catalog, 'utf8'));
    expect(catalog.agent.reward).toEqual({ dir: '.harbor-verifier', combine: 'final' });
    expect(catalog.agent.steps).toMatchObject([
      {
        name: 'one',
        ticket: 'steps/one/instruction.md',
        minReward: 1,
        verifierFiles: { from: 'steps/one/tests', to: '/tests' },
      },
      {
        name: 'two',
        ticket: 'steps/two/instruction.md',
        verifierFiles: { from: 'steps/two/tests', to: '/tests' },
      },
    ]);
    // The baseline runs the first step's verifier.
    expect(catalog.agent.verifierFiles).toEqual({ from: 'steps/one/tests', to: '/tests' });
    const taskOut = join(out, 'harbor', 'multi');
    expect(await readFile(join(taskOut, 'steps/one/tests/helper.sh'), 'utf8')).toBe('task helper\n');
    expect(await readFile(join(taskOut, 'steps/two/tests/helper.sh'), 'utf8')).toBe('step two helper\n');
    expect(await readFile(join(taskOut, 'steps/two/tests/test.sh'), 'utf8')).toContain('echo task');
    expect(await readFile(join(taskOut, 'steps/two/instruction.md'), 'utf8')).toBe(
      '---\nid: "multi.two"\n---\nDo two.\n',
    );
  });

  it("--oracle needs every step's solution/solve.sh, and names the ones missing", async () => {
    const dir = await task({ ...BASE, 'steps/one/solution/solve.sh': 'echo one\n' });
    const loaded = await loadHarborTask(dir, 'multi');
    if ('problems' in loaded) throw new Error(loaded.problems.join('\n'));
    await expect(
      materializeHarbor(
        { file: dir, name: 'multi', tasks: [loaded], defaults: suiteDefaults() },
        { outDir: join(root, 'out'), oracle: true },
      ),
    ).rejects.toThrow(/multi: no steps\/two\/solution\/solve\.sh, so --oracle has nothing to run there/);
  });
});
