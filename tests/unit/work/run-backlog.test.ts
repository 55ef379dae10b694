/**
 * The backlog flow with fake fix and verification: WIP = 1 in order, dependencies, passing
 * only after apply + verification, blocked with the reason and the output, a killed work that
 * continues without redoing what passed, and backlog files validated with every problem.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { terminalProgress } from '../../../src/cli/progress-line.js';
import { exitCodeForWork, exitCodeForWorkStatus } from '../../../src/cli/exit-codes.js';
import { ConfigError, Interrupted } from '../../../src/errors.js';
import type { FixResult } from '../../../src/fix/run-fix.js';
import type { RunOutcome } from '../../../src/outcomes.js';
import { loadBacklog, type BacklogItem } from '../../../src/work/backlog.js';
import { runBacklog, stateFileFor, type Verification, type WorkDeps } from '../../../src/work/run-backlog.js';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function backlogFile(yaml: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-work-'));
  dirs.push(dir);
  const file = join(dir, 'backlog.yaml');
  await writeFile(file, yaml);
  return file;
}

const THREE = `catalog: svc.yaml
items:
  - id: one
    ticket: ONE
  - id: two
    ticket: TWO
    dependsOn: [one]
  - id: three
    ticket: THREE
    verify: make check
`;

function fakeResult(id: string, outcome: RunOutcome, applied = outcome === 'ready-for-review'): FixResult {
  return {
    runId: `run-${id}`,
    runDir: `/runs/run-${id}`,
    outcome,
    record: { applied, message: `${id} ${outcome}` } as FixResult['record'],
  };
}

/** Fake deps: every fix applies and every verification passes unless told otherwise. */
function fakes(
  options: {
    outcome?: (item: BacklogItem) => RunOutcome;
    verify?: (item: BacklogItem) => Verification;
    onFix?: (item: BacklogItem) => void;
  } = {},
) {
  const calls: string[] = [];
  const deps: WorkDeps = {
    fix: async (item) => {
      calls.push(`fix ${item.id}`);
      options.onFix?.(item);
      return fakeResult(item.id, options.outcome?.(item) ?? 'ready-for-review');
    },
    verify: async (item) => {
      calls.push(`verify ${item.id}`);
      return options.verify?.(item) ?? { passed: true, exitCode: 0, output: 'ok' };
    },
  };
  return { calls, deps };
}

const signal = new AbortController().signal;

describe('runBacklog', () => {
  it('works the items one at a time, in order, each fixed then verified; all passing', async () => {
    const file = await backlogFile(THREE);
    const backlog = await loadBacklog(file);
    const { calls, deps } = fakes();
    const state = await runBacklog(
      { backlog, stateFile: stateFileFor(file), keepGoing: false, signal },
      deps,
    );
    expect(calls).toEqual(['fix one', 'verify one', 'fix two', 'verify two', 'fix three', 'verify three']);
    expect(Object.values(state.items).map((s) => s.status)).toEqual(['passing', 'passing', 'passing']);
    expect(state.items['two']).toMatchObject({ runId: 'run-two', outcome: 'ready-for-review' });
    // The state is on disk beside the backlog.
    const onDisk = JSON.parse(await readFile(join(backlog.dir, 'backlog.state.json'), 'utf8'));
    expect(onDisk.items.three.status).toBe('passing');
  });

  it('an item whose verification fails is blocked with its output; work stops there', async () => {
    const file = await backlogFile(THREE);
    const backlog = await loadBacklog(file);
    const { calls, deps } = fakes({
      verify: (item) =>
        item.id === 'one'
          ? { passed: false, exitCode: 1, output: 'not ok 1 - totals\n' }
          : { passed: true, exitCode: 0, output: '' },
    });
    const state = await runBacklog(
      { backlog, stateFile: stateFileFor(file), keepGoing: false, signal },
      deps,
    );
    expect(calls).toEqual(['fix one', 'verify one']);
    expect(state.items['one']).toMatchObject({
      status: 'blocked',
      reason: expect.stringMatching(/verification failed \(exit 1\)/),
      output: 'not ok 1 - totals\n',
    });
    expect(state.items['two']?.status).toBe('pending');
  });

  it('with --keep-going, items behind a blocked one are blocked by it and the others still run', async () => {
    const file = await backlogFile(THREE);
    const backlog = await loadBacklog(file);
    const { calls, deps } = fakes({ outcome: (item) => (item.id === 'one' ? 'failed' : 'ready-for-review') });
    const state = await runBacklog({ backlog, stateFile: stateFileFor(file), keepGoing: true, signal }, deps);
    expect(calls).toEqual(['fix one', 'fix three', 'verify three']);
    expect(state.items['one']).toMatchObject({ status: 'blocked', reason: 'fix ended failed: one failed' });
    expect(state.items['two']).toMatchObject({
      status: 'blocked',
      reason: 'depends on one, which is blocked',
    });
    expect(state.items['three']?.status).toBe('passing');
  });

  it('a verified patch that was not applied is not passing', async () => {
    const file = await backlogFile(THREE);
    const backlog = await loadBacklog(file);
    const deps: WorkDeps = {
      fix: async (item) => fakeResult(item.id, 'ready-for-review', false),
      verify: async () => ({ passed: true, exitCode: 0, output: '' }),
    };
    const state = await runBacklog(
      { backlog, stateFile: stateFileFor(file), keepGoing: false, signal },
      deps,
    );
    expect(state.items['one']).toMatchObject({
      status: 'blocked',
      reason: expect.stringMatching(/not applied/),
    });
  });

  it('killed during item two, a second work finishes without redoing item one', async () => {
    const file = await backlogFile(THREE);
    const backlog = await loadBacklog(file);
    const controller = new AbortController();
    const first = fakes({
      onFix: (item) => {
        if (item.id === 'two') {
          controller.abort();
          throw new Interrupted();
        }
      },
    });
    await expect(
      runBacklog(
        { backlog, stateFile: stateFileFor(file), keepGoing: false, signal: controller.signal },
        first.deps,
      ),
    ).rejects.toThrow(Interrupted);
    const midway = JSON.parse(await readFile(stateFileFor(file), 'utf8'));
    expect(midway.items.one.status).toBe('passing');
    expect(midway.items.two.status).toBe('running');
    const second = fakes();
    const state = await runBacklog(
      { backlog, stateFile: stateFileFor(file), keepGoing: false, signal },
      second.deps,
    );
    expect(second.calls).toEqual(['fix two', 'verify two', 'fix three', 'verify three']);
    expect(Object.values(state.items).every((s) => s.status === 'passing')).toBe(true);
  });
});

describe('loadBacklog', () => {
  it('names every problem: unknown keys, a missing dependency, a dependency after its dependant, twice the same id', async () => {
    const file = await backlogFile(`items:
  - id: a
    ticket: A
    catalog: x.yaml
    dependsOn: [b, nope]
  - id: b
    ticket: B
    catalog: x.yaml
    colour: red
`);
    await expect(loadBacklog(file)).rejects.toThrow(ConfigError);
    const error = (await loadBacklog(file).catch((e: unknown) => e)) as ConfigError;
    expect(error.problems.join('\n')).toMatch(/colour: unknown key/);
    const dupes = await backlogFile(
      'catalog: c.yaml\nitems:\n  - {id: a, ticket: A}\n  - {id: a, ticket: B, dependsOn: [z]}\n',
    );
    const problems = ((await loadBacklog(dupes).catch((e: unknown) => e)) as ConfigError).problems.join('\n');
    expect(problems).toMatch(/"a" is used twice/);
    expect(problems).toMatch(/dependsOn: no item "z"/);
    const order = await backlogFile(
      'catalog: c.yaml\nitems:\n  - {id: a, ticket: A, dependsOn: [b]}\n  - {id: b, ticket: B}\n',
    );
    expect(((await loadBacklog(order).catch((e: unknown) => e)) as ConfigError).problems.join('\n')).toMatch(
      /"b" must come before "a"/,
    );
  });
});

describe('watching a backlog', () => {
  it("each item is one line from its start to its verdict, its fix's steps shown inside it, with real durations", async () => {
    const file = await backlogFile(THREE);
    const backlog = await loadBacklog(file);
    const out = new PassThrough();
    let text = '';
    out.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const deps: WorkDeps = {
      fix: async (item, _signal, progress) => {
        progress.phase('attempt', 'attempt 1/3');
        progress.detail('turn 1: run_command npm test (exit 1, 7.1s)');
        await new Promise((r) => setTimeout(r, 120));
        progress.end('agent completed after 1 turns');
        progress.phase('apply', 'applying the verified patch to the host repo');
        progress.end('1 file(s) written');
        return fakeResult(item.id, 'ready-for-review');
      },
      verify: async () => ({ passed: true, exitCode: 0, output: '' }),
    };
    await runBacklog(
      {
        backlog,
        stateFile: stateFileFor(file),
        keepGoing: false,
        signal,
        progress: terminalProgress(out, false),
      },
      deps,
    );
    const lines = text.split('\n');
    const one = lines.slice(0, lines.findIndex((l) => l.startsWith('  -> one:')) + 1);
    expect(one).toEqual([
      '[item] one: fix ONE',
      '  attempt 1/3',
      '  turn 1: run_command npm test (exit 1, 7.1s)',
      '  agent completed after 1 turns',
      '  applying the verified patch to the host repo',
      '  1 file(s) written',
      "  one: verifying with the catalog's tests in a fresh sandbox with every applied item",
      expect.stringMatching(/^ {2}-> one: passing \((\d+)ms\)$/),
    ]);
    // The item's time is its fix's and its verification's, not the 0 ms of a line said at the start.
    expect(Number(/\((\d+)ms\)$/.exec(one.at(-1)!)![1])).toBeGreaterThanOrEqual(100);
    expect(text).toContain('three: verifying (make check) in a fresh sandbox with every applied item');
  });
});

describe('work --status', () => {
  it('exits 0 while items are pending or were left running, 1 once one is blocked', () => {
    expect(exitCodeForWorkStatus(['passing', 'pending', 'pending'])).toBe(0);
    expect(exitCodeForWorkStatus(['passing', 'running', 'pending'])).toBe(0);
    expect(exitCodeForWorkStatus(['passing', 'blocked', 'pending'])).toBe(1);
    // A work that ran and left items undone is not a success.
    expect(exitCodeForWork(['passing', 'pending'])).toBe(1);
  });
});
