/**
 * Who failed is decided by evidence: a sandbox that stops after the agent's loop, while the
 * change is checked, is the attempt's failure (`sandbox-stopped`, scored), not infrastructure
 * (unscored, retried, exit 3), as long as the engine itself answers. Real
 * Docker, the built CLI, the offline example's cassette: the verification sandbox is killed
 * the moment the change's tests start in it, as a change that takes its sandbox down would.
 */
import { spawn } from 'node:child_process';
import { cp, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { runCli, ROOT } from '../helpers/cli.js';

/** Kills each container with role `verify-1` as soon as a test command starts in it. */
/**
 * This test's own test command: the killer matches it, so a verification of another file's run
 * beside this one on the engine (role verify-1, `npm test` too) is never killed.
 */
const SLOW_TEST_COMMAND = 'sleep 3.0417 && npm test';
const OWN_COMMAND_MARK = 'sleep 3.0417';

function killVerificationOnTests(): { stop: () => void; killed: string[] } {
  const killed: string[] = [];
  const events = spawn(
    'docker',
    [
      'events',
      '--filter',
      'event=exec_start',
      '--filter',
      `label=${LABEL.role}=verify-1`,
      '--format',
      '{{.Actor.ID}} {{json .Action}}',
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  let buffered = '';
  events.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      const [id] = line.split(' ');
      if (!id || !line.includes(OWN_COMMAND_MARK) || killed.includes(id)) continue;
      killed.push(id);
      spawn('docker', ['kill', id], { stdio: 'ignore' });
    }
  });
  return { stop: () => events.kill(), killed };
}

describe('a sandbox that stops while the change is checked (real Docker)', { timeout: 600_000 }, () => {
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
  }, 900_000);
  afterAll(async () => {
    await removeExampleCopies();
  });

  it('is the trial failing as sandbox-stopped: scored, not retried, not exit 3', async () => {
    const copy = await exampleCopy();
    const root = dirname(copy.root);
    await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
    // A test command slow enough that the kill lands while it runs, whatever the load.
    const catalog = join(root, 'evals', 'shipping-eval.yaml');
    const yaml = await readFile(catalog, 'utf8');
    expect(yaml).toContain('testCommand: npm test');
    await writeFile(catalog, yaml.replace('testCommand: npm test', `testCommand: ${SLOW_TEST_COMMAND}`));
    const suite = join(root, 'evals', 'one.yaml');
    await writeFile(
      suite,
      [
        'name: sandbox-stops',
        'defaults:',
        '  n: 1',
        '  concurrency: 1',
        '  keep: never',
        'tasks:',
        '  - id: fixes-threshold',
        '    catalog: shipping-eval.yaml',
        '    ticket: ../shipping-service/tickets/OPS-412.md',
        '    cassette: cassettes/fixes.json',
        '',
      ].join('\n'),
    );
    const killer = killVerificationOnTests();
    const out = join(root, 'out');
    try {
      const r = await runCli(['eval', suite, '--out', out, '--json'], { cwd: root });
      expect(killer.killed.length).toBeGreaterThanOrEqual(1);
      // Every trial scored (the failure counts against the agent): 0, as `eval --help` says;
      // an unscored infrastructure trial would make it 3.
      expect(r.code, r.stderr).toBe(0);
    } finally {
      killer.stop();
    }
    const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { category: string; outcome: string; retried?: boolean });
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ outcome: 'failed', category: 'sandbox-stopped' });
    expect(results[0]?.retried ?? false).toBe(false);
    const summary = JSON.parse(await readFile(join(out, 'summary.json'), 'utf8')) as {
      overall: { scored: number; passes: number };
    };
    expect(summary.overall).toMatchObject({ scored: 1, passes: 0 });
  });
});
