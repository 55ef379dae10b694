/**
 * Harbor task folders end to end: the built CLI, real Docker, task folders this test writes
 * (FROM the harness's base image, so they build offline). Their oracles (solution/solve.sh)
 * score 1.0, an empty change 0.0 (its verifier ran); the tests are never in the agent's sandbox; a reward that
 * is a link is refused with its reason; a FROM image the engine lacks is refused before any
 * trial; the example task folder scores 1.0 with its oracle.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ROOT, runCli } from '../helpers/cli.js';

interface Result {
  taskId: string;
  category: string;
  runId?: string;
  score?: number;
  reward?: { values?: Record<string, number>; refused?: string };
}

async function results(out: string): Promise<Result[]> {
  return (await readFile(join(out, 'results.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result)
    .sort((a, b) => (a.taskId < b.taskId ? -1 : 1));
}

interface TaskFiles {
  toml: string;
  dockerfile: string;
  env?: Record<string, string>;
  test: string;
  solve?: string;
}

async function writeTask(dir: string, files: TaskFiles, instruction: string): Promise<void> {
  for (const sub of ['environment', 'tests', 'solution']) await mkdir(join(dir, sub), { recursive: true });
  await writeFile(join(dir, 'task.toml'), files.toml);
  await writeFile(join(dir, 'instruction.md'), `${instruction}\n`);
  await writeFile(join(dir, 'environment', 'Dockerfile'), files.dockerfile);
  for (const [name, content] of Object.entries(files.env ?? {}))
    await writeFile(join(dir, 'environment', name), content);
  await writeFile(join(dir, 'tests', 'test.sh'), files.test);
  if (files.solve) await writeFile(join(dir, 'solution', 'solve.sh'), files.solve);
}

const TOML = `version = "1.0"

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 300.0

[environment]
cpus = 1
memory_mb = 1024
storage_mb = 2048
allow_internet = false
`;

const FROM_BASE = 'FROM sandbox-harness/base-node:20\nUSER root\nWORKDIR /app\n';

describe('Harbor task folders end to end (real Docker)', { timeout: 900_000 }, () => {
  let root: string;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-harbor-e2e-'));
    // reward.txt, with the task's absolute paths (/app) and its working directory.
    await writeTask(
      join(root, 'tasks', 'greet'),
      {
        toml: TOML,
        dockerfile: `${FROM_BASE}COPY greeting.txt /app/greeting.txt\n`,
        env: { 'greeting.txt': 'hello\n' },
        test: '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = HELLO ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
        solve: '#!/bin/bash\ntr a-z A-Z < greeting.txt > out.txt\n',
      },
      'Upper-case the greeting in /app/greeting.txt and write it to /app/out.txt.',
    );
    // reward.json with named values; the default network (allow_internet) is marked, not given.
    await writeTask(
      join(root, 'tasks', 'count'),
      {
        toml: TOML.replace('allow_internet = false\n', ''),
        dockerfile: `${FROM_BASE}RUN printf 'a\\nb\\nc\\n' > /app/lines.txt\n`,
        test: '#!/bin/bash\nn="$(cat /app/count.txt 2>/dev/null)"\nif [ "$n" = 3 ]; then r=1; else r=0; fi\necho "{\\"reward\\": $r, \\"lines\\": 3}" > /logs/verifier/reward.json\n',
        solve: '#!/bin/bash\nwc -l < /app/lines.txt | tr -d " " > count.txt\n',
      },
      'Write the number of lines of lines.txt into count.txt.',
    );
  }, 900_000);
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('--oracle: solution/solve.sh scores 1.0 for each task (reward.txt and reward.json)', async () => {
    const out = join(root, 'oracle');
    const r = await runCli(['eval', 'tasks', '--oracle', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary;
    expect(summary.overall).toMatchObject({ scored: 2, passes: 2 });
    expect(summary.harbor.meanScore).toEqual({ count: 1, greet: 1 });
    expect(summary.harbor.marks.count.join('\n')).toMatch(/agent phase may use the internet.*network none/);
    const [count, greet] = await results(out);
    expect(greet).toMatchObject({
      category: 'ready-for-review',
      score: 1,
      reward: { values: { reward: 1 } },
    });
    expect(count).toMatchObject({
      category: 'ready-for-review',
      score: 1,
      reward: { values: { reward: 1, lines: 3 } },
    });
    // The change is the working directory's, as the solution left it.
    const run = JSON.parse(await readFile(join(out, 'runs', greet!.runId!, 'run.json'), 'utf8'));
    expect(run.attempts[0].changedFiles).toEqual(['out.txt']);
    expect(run.attempts[0].reward).toMatchObject({ status: 'read', score: 1, file: 'reward.txt' });
  });

  it('an empty change is verified as Harbor verifies it and scores 0.0; the agent never sees tests/', async () => {
    const cassettes = join(root, 'peek');
    await mkdir(cassettes, { recursive: true });
    // Looks for the tests, changes nothing.
    const peek = {
      version: 1,
      model: 'peeks',
      turns: [
        {
          content: [
            { type: 'text', text: 'Looking.' },
            {
              type: 'tool_use',
              id: 't1',
              name: 'run_command',
              input: { command: 'ls /tests; cat /tests/test.sh; ls -a' },
            },
          ],
          stopReason: 'tool_use',
        },
        { content: [{ type: 'text', text: 'No change.' }], stopReason: 'end_turn' },
      ],
    };
    for (const id of ['greet', 'count']) await writeFile(join(cassettes, `${id}.json`), JSON.stringify(peek));
    await writeFile(join(root, 'empty.yaml'), 'name: empty\nharbor: tasks\ncassettes: peek\n');
    const out = join(root, 'empty');
    const r = await runCli(['eval', 'empty.yaml', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary;
    expect(summary.overall).toMatchObject({ scored: 2, passes: 0 });
    expect(summary.harbor.meanScore).toEqual({ count: 0, greet: 0 });
    for (const t of await results(out)) {
      // Harbor's rule: the verifier runs on the untouched environment, and its 0 counts.
      expect(t).toMatchObject({ category: 'tests-failed', score: 0 });
      const transcript = await readFile(join(out, 'runs', t.runId!, 'transcript.json'), 'utf8');
      expect(transcript).toContain("ls: cannot access '/tests': No such file or directory");
      expect(transcript).not.toContain('/logs/verifier/reward');
    }
  });

  it('a wrong change reaches the verifier and reads 0.0; a reward that is a link is refused with its reason', async () => {
    await writeTask(
      join(root, 'liar', 'link'),
      {
        toml: TOML,
        dockerfile: FROM_BASE,
        test: '#!/bin/bash\necho 1 > /tmp/one\nln -s /tmp/one /logs/verifier/reward.txt\n',
        solve: '#!/bin/bash\necho done > done.txt\n',
      },
      'Write done.txt.',
    );
    await writeTask(
      join(root, 'liar', 'wrong'),
      {
        toml: TOML,
        dockerfile: `${FROM_BASE}COPY greeting.txt /app/greeting.txt\n`,
        env: { 'greeting.txt': 'hello\n' },
        test: '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = HELLO ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
        solve: '#!/bin/bash\ncp greeting.txt out.txt\n',
      },
      'Upper-case the greeting into out.txt.',
    );
    const out = join(root, 'liar-out');
    const r = await runCli(['eval', 'liar', '--oracle', '--out', out, '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(0);
    const [link, wrong] = await results(out);
    expect(link).toMatchObject({ category: 'tests-failed', score: 0 });
    expect(link!.reward?.refused).toMatch(/reward\.txt refused: it is a symlink/);
    expect(wrong).toMatchObject({ category: 'tests-failed', score: 0, reward: { values: { reward: 0 } } });
  });

  it('a hostile task.toml is refused with file:line, field, expected and got, before anything is built', async () => {
    await writeTask(
      join(root, 'hostile', 't'),
      {
        toml: '[environment]\ngpus = 2\n[environment.env]\nTOKEN = "${HOME}"\n',
        dockerfile: FROM_BASE,
        test: '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      },
      'Anything.',
    );
    const r = await runCli(['eval', 'hostile', '--out', join(root, 'hostile-out')], { cwd: root });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'hostile/t/task.toml:2: environment.gpus: GPUs are not available to sandboxes here; expected 0, got 2',
    );
    expect(r.stderr).toMatch(
      /task\.toml:4: environment\.env\.TOKEN: a \$\{VAR\} template would copy a host variable.*got "\$\{HOME\}"/,
    );
  });

  it('a FROM image the engine lacks is refused with the reason, before any trial', async () => {
    await writeTask(
      join(root, 'missing-base'),
      {
        toml: TOML,
        dockerfile: 'FROM sandbox-harness/not-on-this-engine:1\nWORKDIR /app\n',
        test: '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      },
      'Anything.',
    );
    const r = await runCli(['eval', 'missing-base', '--out', join(root, 'missing-out')], { cwd: root });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/sandbox-harness\/not-on-this-engine:1 is not on this engine/);
    expect(r.stderr).toMatch(/no network/);
  });

  it('the example task folder (examples/harbor, from the bundled shipping service) scores 1.0 with its oracle', async () => {
    const out = join(root, 'example');
    const r = await runCli(['eval', join(ROOT, 'examples', 'harbor'), '--oracle', '--out', out, '--json'], {
      cwd: root,
    });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary;
    expect(summary.overall).toMatchObject({ passes: summary.overall.scored });
    for (const score of Object.values(summary.harbor.meanScore)) expect(score).toBe(1);
  });
});
