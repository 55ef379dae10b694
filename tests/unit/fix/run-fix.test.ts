/**
 * The fix loop with fakes: in-memory sandboxes whose `npm test` passes only when the
 * threshold reads 39, a replayed model, and a real temporary host repo. Pins the outcome
 * rules, container keep policies, the all-or-nothing apply and interruption.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { runFix, type FixDeps, type FixOptions, type SnapshotFile } from '../../../src/fix/run-fix.js';
import { SandboxDead } from '../../../src/errors.js';
import type { ModelProvider } from '../../../src/llm/types.js';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../../../src/sandbox/types.js';
import { MemorySandbox, type ExecHandler } from '../../fakes/memory-sandbox.js';
import { scripted, text, toolUse, type Turn } from '../agent/helpers.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';

const FIX_EDIT = toolUse('e1', 'edit_file', {
  path: 'src/shipping.ts',
  search: 'FREE_SHIPPING_THRESHOLD = 50;',
  replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
});

async function listFiles(dir: string, base = dir): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.name === 'node_modules' || entry.name === '.sandbox-harness') continue;
    if (entry.isDirectory()) out.push(...(await listFiles(full, base)));
    else out.push(relative(base, full));
  }
  return out;
}

interface Harness {
  root: string;
  repo: string;
  catalog: string;
  created: { spec: SandboxSpec; sandbox: MemorySandbox }[];
  deps: (provider: ModelProvider, onExec?: ExecHandler) => FixDeps;
  options: (overrides?: Partial<FixOptions>) => FixOptions;
}

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

/** `npm test` passes when the threshold is 39, as the example's real tests do. */
const npmTest: ExecHandler = (command, _options, sandbox) => {
  if (command !== 'npm test') return { exitCode: 0 };
  const source = sandbox.files.get('src/shipping.ts')?.content.toString() ?? '';
  return source.includes('FREE_SHIPPING_THRESHOLD = 39;')
    ? { exitCode: 0, stdout: '# pass 4\n# fail 0\n' }
    : { exitCode: 1, stdout: 'not ok 2 - an order of 45 EUR ships free (OPS-412)\n# pass 2\n# fail 2\n' };
};

async function harness(): Promise<Harness> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-fix-unit-'));
  roots.push(root);
  await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
  const repo = join(root, 'repo');
  const files: Record<string, Buffer> = {};
  const snapshot = new Map<string, SnapshotFile>();
  for (const path of await listFiles(repo)) {
    const content = await readFile(join(repo, path));
    files[path] = content;
    snapshot.set(path, {
      sha256: createHash('sha256').update(content).digest('hex'),
      mode: 0o644,
      type: 'file',
    });
  }
  const created: Harness['created'] = [];
  return {
    root,
    repo,
    catalog: join(root, 'shipping-service.yaml'),
    created,
    deps: (provider, onExec = npmTest) => {
      const backend: SandboxBackend = {
        name: 'memory',
        async create(spec) {
          const sandbox = new MemorySandbox(files, onExec, `${spec.role}-${created.length}`);
          created.push({ spec, sandbox });
          return sandbox as Sandbox;
        },
      };
      return {
        backend,
        ping: async () => undefined,
        image: async () => ({ tag: 'memory:repo', imageId: 'sha256:memory', reused: true, snapshot }),
        createProvider: async () => provider,
      };
    },
    options: (overrides = {}) => ({
      ticket: 'OPS-412',
      catalogFile: join(root, 'shipping-service.yaml'),
      keep: 'on-failure',
      apply: true,
      force: false,
      rebuild: false,
      cwd: root,
      env: {},
      signal: new AbortController().signal,
      readStdin: async () => '',
      // The provider itself comes from the deps; the name only has to be valid.
      provider: 'replay',
      ...overrides,
    }),
  };
}

const fixingTurns: Turn[] = [{ content: [FIX_EDIT] }, { content: [text('fixed')] }];
const idleTurns: Turn[] = [{ content: [text('no idea')] }];

describe('runFix with fakes', () => {
  it('a verified fix is applied to the host repo and every container is removed', async () => {
    const h = await harness();
    const result = await runFix(h.options(), h.deps(scripted(fixingTurns)));
    expect(result.outcome).toBe('ready-for-review');
    expect(result.exitCode).toBe(0);
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toContain(
      'FREE_SHIPPING_THRESHOLD = 39;',
    );
    expect(h.created.map((c) => c.spec.role)).toEqual(['baseline', 'attempt-1', 'verify-1']);
    // The run record is in the repo, kept out of git status by its own .gitignore.
    expect(result.runDir.startsWith(join(h.repo, '.sandbox-harness', 'runs'))).toBe(true);
    expect(await readFile(join(h.repo, '.sandbox-harness', '.gitignore'), 'utf8')).toBe('*\n');
    for (const c of h.created) expect(c.sandbox.disposed).toEqual({ keep: false });
    // The catalog is injected read-only into every sandbox, and named by SERVICE_CATALOG.
    for (const c of h.created) {
      expect(c.spec.env?.SERVICE_CATALOG).toBe('/etc/sandbox-harness/catalog.json');
      expect(c.spec.files?.[0]).toMatchObject({ path: '/etc/sandbox-harness/catalog.json', owner: 'root' });
    }
  });

  it('verification runs on the pristine files plus the allowed diff only', async () => {
    const h = await harness();
    await runFix(h.options(), h.deps(scripted(fixingTurns)));
    const verify = h.created.find((c) => c.spec.role === 'verify-1')!.sandbox;
    expect(verify.commands).toEqual(['npm test']);
    expect(verify.files.get('src/shipping.ts')?.content.toString()).toContain('= 39;');
  });

  it('--no-apply saves the patch and leaves the host repo alone', async () => {
    const h = await harness();
    const before = await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8');
    const result = await runFix(h.options({ apply: false }), h.deps(scripted(fixingTurns)));
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.applied).toBe(false);
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toBe(before);
    expect(await readFile(join(result.runDir, 'patch.diff'), 'utf8')).toContain(
      '+export const FREE_SHIPPING_THRESHOLD = 39;',
    );
  });

  it('stops with nothing-to-fix when the tests already pass, unless forced', async () => {
    const h = await harness();
    const passing: ExecHandler = () => ({ exitCode: 0 });
    const first = await runFix(h.options(), h.deps(scripted(fixingTurns), passing));
    expect(first.outcome).toBe('nothing-to-fix');
    expect(first.exitCode).toBe(0);
    expect(first.record.attempts).toEqual([]);
    const forced = await runFix(h.options({ force: true }), h.deps(scripted(fixingTurns), passing));
    expect(forced.outcome).toBe('ready-for-review');
  });

  it('a failed run keeps the last attempt container by default, and none with --keep never', async () => {
    const h = await harness();
    const failed = await runFix(
      h.options({ maxAttempts: 2 }),
      h.deps(scripted([...idleTurns, ...idleTurns])),
    );
    expect(failed.outcome).toBe('failed');
    expect(failed.exitCode).toBe(1);
    const kept = h.created.filter((c) => c.sandbox.disposed?.keep).map((c) => c.spec.role);
    expect(kept).toEqual(['attempt-2']);

    const h2 = await harness();
    await runFix(h2.options({ maxAttempts: 1, keep: 'never' }), h2.deps(scripted(idleTurns)));
    expect(h2.created.filter((c) => c.sandbox.disposed?.keep)).toEqual([]);
  });

  it('--keep always keeps the containers of a successful run too', async () => {
    const h = await harness();
    const result = await runFix(h.options({ keep: 'always' }), h.deps(scripted(fixingTurns)));
    expect(result.outcome).toBe('ready-for-review');
    expect(h.created.filter((c) => c.sandbox.disposed?.keep).map((c) => c.spec.role)).toEqual([
      'baseline',
      'attempt-1',
      'verify-1',
    ]);
  });

  it('refuses to apply when the host file changed during the run, keeping the patch', async () => {
    const h = await harness();
    const target = join(h.repo, 'src', 'shipping.ts');
    // Someone edits the host file while the verification runs.
    const meddling: ExecHandler = async (command, options, sandbox) => {
      if (sandbox.id.startsWith('verify')) await writeFile(target, '// edited by a person meanwhile\n');
      return npmTest(command, options, sandbox);
    };
    const result = await runFix(h.options(), h.deps(scripted(fixingTurns), meddling));
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.applied).toBe(false);
    expect(result.record.applyError).toMatch(/src\/shipping\.ts/);
    expect(result.exitCode).toBe(1);
    expect(await readFile(target, 'utf8')).toBe('// edited by a person meanwhile\n');
    expect(await readFile(join(result.runDir, 'patch.diff'), 'utf8')).toContain('= 39;');
  });

  it('Ctrl-C during a command: interrupted, exit 130, host untouched, record written', async () => {
    const h = await harness();
    const controller = new AbortController();
    const before = await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8');
    const interrupting: ExecHandler = (command, options, sandbox) => {
      if (command === 'sleep 100') {
        controller.abort();
        return new Promise((_, reject) =>
          options.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
        );
      }
      return npmTest(command, options, sandbox);
    };
    const turns: Turn[] = [
      { content: [FIX_EDIT] },
      { content: [toolUse('s', 'run_command', { command: 'sleep 100' })] },
    ];
    const result = await runFix(
      h.options({ signal: controller.signal }),
      h.deps(scripted(turns), interrupting),
    );
    expect(result.outcome).toBe('interrupted');
    expect(result.exitCode).toBe(130);
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toBe(before);
    const record = JSON.parse(await readFile(join(result.runDir, 'run.json'), 'utf8'));
    expect(record.outcome).toBe('interrupted');
    expect(h.created.every((c) => c.sandbox.disposed !== undefined)).toBe(true);
  });

  it('a sandbox that dies mid-attempt ends the run as an infrastructure error (exit 3)', async () => {
    const h = await harness();
    const dying: ExecHandler = (command, options, sandbox) => {
      if (command === 'crash') throw new SandboxDead(`sandbox ${sandbox.id} is gone`);
      return npmTest(command, options, sandbox);
    };
    const turns: Turn[] = [{ content: [toolUse('c', 'run_command', { command: 'crash' })] }];
    const result = await runFix(h.options(), h.deps(scripted(turns), dying));
    expect(result.outcome).toBe('error');
    expect(result.exitCode).toBe(3);
    expect(result.error?.code).toBe('SANDBOX_DEAD');
    const record = JSON.parse(await readFile(join(result.runDir, 'run.json'), 'utf8'));
    expect(record.outcome).toBe('error');
  });

  it('a rejected change is explained to the model in the next attempt', async () => {
    const h = await harness();
    const turns: Turn[] = [
      { content: [toolUse('w', 'run_command', { command: 'touch-test-file' })] },
      { content: [text('done')] },
      { content: [FIX_EDIT] },
      { content: [text('fixed')] },
    ];
    const provider = scripted(turns);
    const editsTest: ExecHandler = (command, options, sandbox) => {
      if (command === 'touch-test-file') {
        sandbox.files.set('test/shipping.test.ts', { content: Buffer.from('// weakened\n'), mode: 0o644 });
        return { exitCode: 0 };
      }
      return npmTest(command, options, sandbox);
    };
    const result = await runFix(h.options(), h.deps(provider, editsTest));
    expect(result.record.attempts.map((a) => a.verdict)).toEqual(['rejected', 'passed']);
    const secondAttemptFirstRequest = provider.requests[2]!;
    expect(JSON.stringify(secondAttemptFirstRequest.messages[0])).toContain('test/shipping.test.ts');
    expect(await readFile(join(h.repo, 'test', 'shipping.test.ts'), 'utf8')).not.toContain('weakened');
  });

  it('with agent.delegate, a sub-agent plays its own cassette queue, and --record writes both roles', async () => {
    const h = await harness();
    const catalogText = await readFile(h.catalog, 'utf8');
    await writeFile(h.catalog, catalogText.replace('  maxTurns: 20\n', '  maxTurns: 20\n  delegate: true\n'));
    const turn = (content: Turn['content']) => ({
      content,
      stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
    });
    const cassette = join(h.root, 'delegating.json');
    await writeFile(
      cassette,
      JSON.stringify({
        version: 2,
        model: 'scripted',
        roles: {
          main: {
            turns: [
              turn([toolUse('d1', 'delegate', { task: 'Where is the free-shipping threshold set?' })]),
              turn([FIX_EDIT]),
              turn([text('fixed')]),
            ],
          },
          delegate: {
            turns: [
              turn([toolUse('s1', 'read_file', { path: 'src/shipping.ts' })]),
              turn([text('src/shipping.ts sets FREE_SHIPPING_THRESHOLD = 50.')]),
            ],
          },
        },
      }),
    );
    const recording = join(h.root, 'recorded.json');
    const { createProvider: _injected, ...deps } = h.deps(scripted([]));
    const result = await runFix(h.options({ cassette, record: recording }), deps);

    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.turns).toBe(5);
    const saved = JSON.parse(await readFile(recording, 'utf8')) as {
      version: number;
      roles: Record<string, { turns: unknown[] }>;
    };
    expect(saved.version).toBe(2);
    expect(
      Object.fromEntries(Object.entries(saved.roles).map(([role, tape]) => [role, tape.turns.length])),
    ).toEqual({
      main: 3,
      delegate: 2,
    });
    const transcript = JSON.parse(await readFile(join(result.runDir, 'transcript.json'), 'utf8')) as {
      messages: unknown[];
      delegations?: { toolUseId: string; messages: unknown[] }[];
    }[];
    expect(transcript[0]?.messages).toHaveLength(6);
    expect(transcript[0]?.delegations).toMatchObject([{ toolUseId: 'd1' }]);
    const events = (await readFile(join(result.runDir, 'events.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { kind: string; agent?: string; parent?: string });
    expect(events.filter((e) => e.agent === 'delegate' && e.parent === 'd1').map((e) => e.kind)).toEqual([
      'model_call',
      'tool_call',
      'model_call',
      'loop_end',
    ]);
  });
});
