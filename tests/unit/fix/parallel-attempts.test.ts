/**
 * Parallel attempts and `--from-sandbox` with fakes: the first verified attempt of a round
 * wins, the others are stopped (their sandboxes removed, the record says who stopped them),
 * each lane talks to its own model, and a backend that cannot fork says so.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { runFix, type FixDeps, type FixOptions } from '../../../src/fix/run-fix.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';
import type { Completion, CompletionRequest, ModelProvider } from '../../../src/llm/types.js';
import { Interrupted } from '../../../src/errors.js';
import { MemoryBackend, type ExecHandler, type MemorySandbox } from '../../fakes/memory-sandbox.js';
import type { SandboxSpec } from '../../../src/sandbox/types.js';
import { scripted, text, toolUse } from '../agent/helpers.js';
import { expectRecordIsFoldOfEvents, runFoldersUnder } from '../../helpers/journal.js';
import { forkSpec } from '../../../src/fix/continue-fork.js';

const roots: string[] = [];
afterEach(async () => {
  const done = roots.splice(0);
  for (const root of done)
    for (const dir of await runFoldersUnder(root)) await expectRecordIsFoldOfEvents(dir);
  await Promise.all(done.map((r) => rm(r, { recursive: true, force: true })));
});

async function repoFiles(dir: string, base = dir, out: Record<string, Buffer> = {}) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.name === 'node_modules' || entry.name === '.sandbox-harness') continue;
    if (entry.isDirectory()) await repoFiles(full, base, out);
    else out[relative(base, full)] = await readFile(full);
  }
  return out;
}

const npmTest: ExecHandler = (command, _options, sandbox) => {
  if (command !== 'npm test') return { exitCode: 0 };
  return { exitCode: (sandbox.text('src/shipping.ts') ?? '').includes('THRESHOLD = 39;') ? 0 : 1 };
};

const FIX = [
  {
    content: [
      toolUse('e1', 'edit_file', {
        path: 'src/shipping.ts',
        search: 'FREE_SHIPPING_THRESHOLD = 50;',
        replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
      }),
    ],
  },
  { content: [text('fixed')] },
];

/** A model that answers nothing until its call is cancelled (an attempt still thinking). */
class ThinkingProvider implements ModelProvider {
  readonly name = 'thinking';
  readonly model = 'thinking';
  calls = 0;
  complete(request: CompletionRequest): Promise<Completion> {
    this.calls++;
    return new Promise((_resolve, reject) => {
      const signal = request.signal;
      if (!signal) return reject(new Error('no signal to stop on'));
      signal.addEventListener('abort', () => reject(new Interrupted()), { once: true });
    });
  }
  async countTokens(): Promise<number> {
    return 1;
  }
}

async function setUp(providers: ModelProvider[]) {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-parallel-unit-'));
  roots.push(root);
  await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
  const files = await repoFiles(join(root, 'repo'));
  const created: { spec: SandboxSpec; sandbox: MemorySandbox }[] = [];
  let made = 0;
  const deps: FixDeps = {
    backend: new MemoryBackend(files, npmTest, (sandbox, spec) => created.push({ spec, sandbox })),
    ping: async () => undefined,
    image: async () => ({ tag: 'memory:repo', imageId: 'sha256:memory', reused: true, hostFiles: new Map() }),
    // Lane by lane, in the order prepare asks for them.
    createProvider: async () => providers[made++]!,
  };
  const options = (overrides: Partial<FixOptions> = {}): FixOptions => ({
    ticket: 'OPS-412',
    catalogFile: join(root, 'shipping-service.yaml'),
    keep: 'on-failure',
    apply: false,
    force: false,
    rebuild: false,
    cwd: root,
    env: { XDG_STATE_HOME: join(root, 'state') },
    signal: new AbortController().signal,
    readStdin: async () => '',
    provider: 'replay',
    ...overrides,
  });
  return { deps, options, created };
}

describe('fix --parallel', () => {
  it('the first verified attempt wins; the one still working is stopped, its sandbox removed, and recorded', async () => {
    const thinking = new ThinkingProvider();
    const { deps, options, created } = await setUp([thinking, scripted(FIX)]);
    const result = await runFix(options({ parallel: 2, maxAttempts: 1 }), deps);
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.parallelAttempts).toBe(2);
    const [one, two] = result.record.attempts;
    expect(two).toMatchObject({ n: 2, verdict: 'passed' });
    expect(one).toMatchObject({ n: 1, verdict: 'interrupted', stoppedBy: 2 });
    expect(thinking.calls).toBe(1);
    // Both attempts ran at once, each in a sandbox of its own; none is left.
    const roles = created.map((c) => c.spec.role);
    expect(roles).toEqual(expect.arrayContaining(['attempt-1', 'attempt-2', 'verify-2']));
    for (const c of created) expect(c.sandbox.disposed).toEqual({ keep: false });
    expect(result.record.containers.find((c) => c.role === 'attempt-1')).toMatchObject({ kept: false });
  });

  it('a round where none passes is one of maxAttempts; every lane is an attempt of its own', async () => {
    const idle = () => scripted([{ content: [text('no idea')] }]);
    const { deps, options } = await setUp([idle(), idle(), idle()]);
    const result = await runFix(options({ parallel: 3, maxAttempts: 1 }), deps);
    expect(result.outcome).toBe('failed');
    expect(result.record.attempts.map((a) => a.n)).toEqual([1, 2, 3]);
    expect(result.record.attempts.every((a) => a.stoppedBy === undefined)).toBe(true);
  });

  it('refuses to record parallel attempts, and a cassette count that fits no lane count', async () => {
    const { deps, options } = await setUp([scripted(FIX), scripted(FIX)]);
    await expect(runFix(options({ parallel: 2, record: 'out.json' }), deps)).rejects.toThrow(
      /--record cannot record parallel attempts/,
    );
    await expect(
      runFix(options({ parallel: 3, laneCassettes: ['a.json', 'b.json'], cassette: 'a.json' }), deps),
    ).rejects.toThrow(/2 cassettes for 3 parallel attempts/);
  });
});

describe('fix --continue --from-sandbox', () => {
  it('on a backend that cannot fork is a clear error, never a silent start from the image', async () => {
    const { deps, options } = await setUp([scripted([{ content: [text('no idea')] }]), scripted(FIX)]);
    const failed = await runFix(options({ maxAttempts: 1 }), deps);
    expect(failed.outcome).toBe('failed');
    const result = await runFix(options({ continueFrom: failed.runId, fromSandbox: true }), deps);
    expect(result.outcome).toBe('error');
    expect(result.error?.message).toMatch(/the memory backend cannot fork a sandbox/);
    expect(result.record.attempts).toEqual([]);
  });
});

describe('fix --parallel, interrupted', () => {
  it('Ctrl-C stops every attempt of the round: the run is interrupted, and no attempt reads as stopped by another', async () => {
    const { deps, options, created } = await setUp([new ThinkingProvider(), new ThinkingProvider()]);
    const controller = new AbortController();
    const running = runFix(options({ parallel: 2, signal: controller.signal, keep: 'always' }), deps);
    // Both attempts are waiting on their models.
    while (created.filter((c) => c.spec.role?.startsWith('attempt-')).length < 2)
      await new Promise((r) => setTimeout(r, 5));
    controller.abort();
    const result = await running;
    expect(result.outcome).toBe('interrupted');
    expect(result.record.attempts.map((a) => [a.n, a.verdict, a.stoppedBy])).toEqual([
      [1, 'interrupted', undefined],
      [2, 'interrupted', undefined],
    ]);
  });
});

describe('a fork is never a verification base', () => {
  it('only the first round of attempt sandboxes starts from the fork; verification, review and baseline never do', () => {
    const fork = { image: 'sandbox-harness-fork:x', imageId: 'sha256:x', inherited: [], durationMs: 1 };
    const run = { fork, continuation: { runId: 'r', attemptsBefore: 2, files: [], deletions: [] } };
    expect(forkSpec(run, 'attempt-3', 'pristine:1')).toEqual({
      image: fork.image,
      scanAgainst: 'pristine:1',
    });
    for (const role of ['attempt-4', 'attempt-2', 'verify-3', 'verify-3-visible', 'review-3', 'baseline'])
      expect(forkSpec(run, role, 'pristine:1')).toEqual({});
    const twoLanes = { ...run, laneProviders: [scripted(FIX), scripted(FIX)] };
    expect(forkSpec(twoLanes, 'attempt-4', 'pristine:1')).toMatchObject({ image: fork.image });
    expect(forkSpec(twoLanes, 'attempt-5', 'pristine:1')).toEqual({});
  });
});
