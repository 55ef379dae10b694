/**
 * The fix flow with fakes: in-memory sandboxes (which pass the same file-level conformance
 * suite as Docker) whose `npm test` passes only when the threshold reads 39, a replayed
 * model, and a real temporary host repo. Pins the outcome rules and their exit codes,
 * keep policies, the all-or-nothing apply, interruption, time limits, the baseline that
 * runs beside the first attempt, held-out tests, and that nothing of the host environment
 * reaches a sandbox.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import {
  runFix,
  type FixDeps,
  type FixOptions,
  type FixResult,
  type HostFile,
} from '../../../src/fix/run-fix.js';
import { memoryBaselineCache } from '../../../src/fix/baseline.js';
import { SandboxDead, SandboxUnavailable } from '../../../src/errors.js';
import { exitCodeForRun } from '../../../src/cli/exit-codes.js';
import { sha256 } from '../../../src/changes/hash.js';
import { defaultJournalDir } from '../../../src/changes/apply-journal.js';
import { applyThatDies } from '../../helpers/apply.js';
import type { ModelProvider } from '../../../src/llm/types.js';
import type { SandboxSpec } from '../../../src/sandbox/types.js';
import {
  MemoryBackend,
  MemorySandbox,
  type ExecHandler,
  type MemoryEntry,
} from '../../fakes/memory-sandbox.js';
import { scripted, text, toolUse, type Turn } from '../agent/helpers.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';

const FIX_EDIT = toolUse('e1', 'edit_file', {
  path: 'src/shipping.ts',
  search: 'FREE_SHIPPING_THRESHOLD = 50;',
  replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
});
const CANARY = 'sk-ant-api03-EXAMPLEcanaryCANARYcanary0123456789';

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

function exitCode(result: FixResult): number {
  return exitCodeForRun({
    outcome: result.outcome,
    ...(result.record.applyError ? { applyError: result.record.applyError } : {}),
    ...(result.error ? { errorCategory: result.error.category } : {}),
  });
}

interface Harness {
  root: string;
  repo: string;
  created: { spec: SandboxSpec; sandbox: MemorySandbox }[];
  deps: (
    provider: ModelProvider,
    onExec?: ExecHandler,
    onCreate?: (s: MemorySandbox, spec: SandboxSpec) => void,
    /** More entries of the image's workspace (links the repo ships, files the build made). */
    extra?: Record<string, MemoryEntry>,
  ) => FixDeps;
  options: (overrides?: Partial<FixOptions>) => FixOptions;
  catalog: (edit: (yaml: string) => string) => Promise<void>;
}

// The test process's own environment holds a credential too, as a developer's shell does.
process.env.SANDBOX_HARNESS_TEST_CANARY_KEY = CANARY;

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

/** `npm test` passes when the threshold is 39, as the example's real tests do. */
const npmTest: ExecHandler = (command, _options, sandbox) => {
  if (command !== 'npm test') return { exitCode: 0 };
  const source = sandbox.text('src/shipping.ts') ?? '';
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
  const hostFiles = new Map<string, HostFile>();
  for (const path of await listFiles(repo)) {
    const content = await readFile(join(repo, path));
    files[path] = content;
    hostFiles.set(path, { sha256: sha256(content), mode: 0o644, type: 'file' });
  }
  const created: Harness['created'] = [];
  const catalogFile = join(root, 'shipping-service.yaml');
  return {
    root,
    repo,
    created,
    deps: (provider, onExec = npmTest, onCreate, extra = {}) => {
      const backend = new MemoryBackend({ ...files, ...extra }, onExec, (sandbox, spec) => {
        created.push({ spec, sandbox });
        onCreate?.(sandbox, spec);
      });
      return {
        backend,
        ping: async () => undefined,
        image: async () => ({ tag: 'memory:repo', imageId: 'sha256:memory', reused: true, hostFiles }),
        createProvider: async () => provider,
      };
    },
    options: (overrides = {}) => ({
      ticket: 'OPS-412',
      catalogFile,
      keep: 'on-failure',
      apply: true,
      force: false,
      rebuild: false,
      cwd: root,
      // The host environment as a user has it: credentials included.
      env: {
        ANTHROPIC_API_KEY: CANARY,
        HOME: '/root',
        PATH: '/usr/bin',
        SECRET_TOKEN: CANARY,
        // Apply journals go here, not into the real home.
        XDG_STATE_HOME: join(root, 'state'),
      },
      signal: new AbortController().signal,
      readStdin: async () => '',
      // The provider itself comes from the deps; the name only has to be valid.
      provider: 'replay',
      ...overrides,
    }),
    catalog: async (edit) => writeFile(catalogFile, edit(await readFile(catalogFile, 'utf8'))),
  };
}

const fixingTurns: Turn[] = [{ content: [FIX_EDIT] }, { content: [text('fixed')] }];
const idleTurns: Turn[] = [{ content: [text('no idea')] }];

describe('runFix with fakes', () => {
  it('a verified fix is applied to the host repo and every sandbox is removed', async () => {
    const h = await harness();
    const result = await runFix(h.options(), h.deps(scripted(fixingTurns)));
    expect(result.outcome).toBe('ready-for-review');
    expect(exitCode(result)).toBe(0);
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toContain(
      'FREE_SHIPPING_THRESHOLD = 39;',
    );
    // The first attempt's sandbox starts as soon as the image is known, before the baseline's.
    expect(h.created.map((c) => c.spec.role)).toEqual(['attempt-1', 'baseline', 'verify-1']);
    // The run record is in the repo, kept out of git status by its own .gitignore.
    expect(result.runDir.startsWith(join(h.repo, '.sandbox-harness', 'runs'))).toBe(true);
    expect(await readFile(join(h.repo, '.sandbox-harness', '.gitignore'), 'utf8')).toBe('*\n');
    for (const c of h.created) expect(c.sandbox.disposed).toEqual({ keep: false });
    // The catalog is injected read-only into every sandbox, and named by SERVICE_CATALOG.
    for (const c of h.created) {
      expect(c.spec.env?.SERVICE_CATALOG).toBe('/etc/sandbox-harness/catalog.json');
      expect(c.spec.files?.[0]?.path).toBe('/etc/sandbox-harness/catalog.json');
    }
  });

  it('gives no sandbox anything of the host environment: not in env, not in files, not anywhere in the spec', async () => {
    const h = await harness();
    await runFix(h.options(), h.deps(scripted(fixingTurns)));
    expect(h.created.length).toBeGreaterThan(0);
    for (const c of h.created) {
      expect(JSON.stringify(c.spec)).not.toContain(CANARY);
      expect(Object.keys(c.spec.env ?? {})).not.toContain('ANTHROPIC_API_KEY');
      expect(Object.keys(c.spec.env ?? {})).not.toContain('HOME');
      expect(Object.keys(c.spec.env ?? {})).not.toContain('PATH');
    }
  });

  it('verification runs on the pristine files plus the allowed diff only', async () => {
    const h = await harness();
    await runFix(h.options(), h.deps(scripted(fixingTurns)));
    const verify = h.created.find((c) => c.spec.role === 'verify-1')!.sandbox;
    // The harness's channel start-up (made ahead), then the tests: nothing else runs there.
    expect(verify.commands).toEqual(['true', 'npm test']);
    expect(verify.text('src/shipping.ts')).toContain('= 39;');
  });

  it('a verification sandbox that does not hold exactly the allowed change ends the run as an error, never a pass', async () => {
    const h = await harness();
    // A writer that also changes what it was not asked to: the invariant must catch it.
    const result = await runFix(
      h.options(),
      h.deps(scripted(fixingTurns), npmTest, (sandbox, spec) => {
        if (spec.role !== 'verify-1') return;
        const write = sandbox.writeFiles.bind(sandbox);
        sandbox.writeFiles = async (files) => {
          await write(files);
          sandbox.set('test/shipping.test.ts', '// replaced behind the allowlist\n');
        };
      }),
    );
    expect(result.outcome).toBe('error');
    expect(result.error?.code).toBe('VERIFY_MISMATCH');
    expect(exitCode(result)).toBe(70);
    expect(result.record.attempts[0]?.verdict).toBe('error');
    const mismatch = JSON.parse(
      await readFile(join(result.runDir, 'attempts/1/verification-mismatch.json'), 'utf8'),
    );
    expect(Object.keys(mismatch.expected)).toEqual(['src/shipping.ts']);
    expect(Object.keys(mismatch.observed).sort()).toEqual(['src/shipping.ts', 'test/shipping.test.ts']);
    expect(await readFile(join(h.repo, 'test', 'shipping.test.ts'), 'utf8')).not.toContain('replaced');
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toContain('= 50;');
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

  it('stops with nothing-to-fix when the tests already pass, even though the first attempt had started; unless forced', async () => {
    const h = await harness();
    const passing: ExecHandler = () => ({ exitCode: 0 });
    const before = await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8');
    const first = await runFix(h.options(), h.deps(scripted(fixingTurns), passing));
    expect(first.outcome).toBe('nothing-to-fix');
    expect(exitCode(first)).toBe(0);
    expect(first.record.baseline?.failing).toBe(false);
    expect(first.record.applied).toBeUndefined();
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toBe(before);
    const forced = await runFix(h.options({ force: true }), h.deps(scripted(fixingTurns), passing));
    expect(forced.outcome).toBe('ready-for-review');
  });

  it('the first attempt starts while the baseline still runs, and is stopped when it passes', async () => {
    const h = await harness();
    let releaseBaseline: () => void = () => undefined;
    const slowPassingBaseline: ExecHandler = (command, options, sandbox) => {
      if (
        options.signal &&
        command === 'npm test' &&
        h.created.find((c) => c.sandbox === sandbox)?.spec.role === 'baseline'
      ) {
        return new Promise((resolve) => {
          releaseBaseline = () => resolve({ exitCode: 0 });
        });
      }
      return { exitCode: 0 };
    };
    const turns: Turn[] = [
      { content: [toolUse('r', 'run_command', { command: 'release-baseline' })] },
      { content: [toolUse('r2', 'run_command', { command: 'never-answered' })] },
    ];
    const handler: ExecHandler = async (command, options, sandbox) => {
      if (command === 'release-baseline') {
        releaseBaseline();
        return { exitCode: 0 };
      }
      if (command === 'never-answered') return new Promise(() => undefined);
      return slowPassingBaseline(command, options, sandbox);
    };
    const result = await runFix(h.options(), h.deps(scripted(turns), handler));
    expect(result.outcome).toBe('nothing-to-fix');
    expect(result.record.attempts.map((a) => a.verdict)).toEqual(['interrupted']);
    expect(result.record.attempts[0]?.message).toMatch(/already pass/);
  });

  it('within an eval, a baseline is measured once and reused, and the record says so', async () => {
    const h = await harness();
    const baselines = memoryBaselineCache();
    const deps = (p: ModelProvider) => ({ ...h.deps(p), baselines });
    const first = await runFix(h.options({ apply: false }), deps(scripted(fixingTurns)));
    const second = await runFix(h.options({ apply: false }), deps(scripted(fixingTurns)));
    expect(first.record.baseline?.reusedFrom).toBeUndefined();
    expect(second.record.baseline?.reusedFrom).toBe(first.runId);
    expect(h.created.filter((c) => c.spec.role === 'baseline')).toHaveLength(1);
    expect(second.outcome).toBe('ready-for-review');
  });

  it("a failed run keeps every failed attempt's sandboxes by default, and none with --keep never", async () => {
    const h = await harness();
    const failed = await runFix(
      h.options({ maxAttempts: 2 }),
      h.deps(scripted([...idleTurns, ...idleTurns])),
    );
    expect(failed.outcome).toBe('failed');
    expect(exitCode(failed)).toBe(1);
    const kept = h.created.filter((c) => c.sandbox.disposed?.keep).map((c) => c.spec.role);
    expect(kept).toEqual(['attempt-1', 'attempt-2']);
    expect(failed.record.attempts.map((a) => a.containers.map((c) => [c.role, c.kept]))).toEqual([
      [['attempt-1', true]],
      [['attempt-2', true]],
    ]);

    const h2 = await harness();
    await runFix(h2.options({ maxAttempts: 1, keep: 'never' }), h2.deps(scripted(idleTurns)));
    expect(h2.created.filter((c) => c.sandbox.disposed?.keep)).toEqual([]);
  });

  it('makes the verification sandbox while the agent works, and removes it unused, even under --keep always', async () => {
    const h = await harness();
    const turns: Turn[] = [
      { content: [toolUse('r', 'run_command', { command: 'ls' })] },
      { content: [text('no idea')] },
    ];
    let madeBeforeFirstCommand: boolean | undefined;
    const onExec: ExecHandler = async (command, options, sandbox) => {
      if (command === 'ls' && madeBeforeFirstCommand === undefined)
        madeBeforeFirstCommand = h.created.some((c) => c.spec.role === 'verify-1');
      return npmTest(command, options, sandbox);
    };
    const result = await runFix(
      h.options({ maxAttempts: 1, keep: 'always' }),
      h.deps(scripted(turns), onExec),
    );
    expect(result.outcome).toBe('failed');
    const verify = h.created.filter((c) => c.spec.role === 'verify-1');
    expect(verify).toHaveLength(1);
    // Made before the agent ran its first command, from the image alone.
    expect(madeBeforeFirstCommand).toBe(true);
    expect(verify[0]!.sandbox.disposed).toEqual({ keep: false });
    expect(h.created.find((c) => c.spec.role === 'attempt-1')?.sandbox.disposed).toEqual({ keep: true });
  });

  it('--keep always keeps the sandboxes of a successful run too', async () => {
    const h = await harness();
    const result = await runFix(h.options({ keep: 'always' }), h.deps(scripted(fixingTurns)));
    expect(result.outcome).toBe('ready-for-review');
    expect(h.created.filter((c) => c.sandbox.disposed?.keep).map((c) => c.spec.role)).toEqual([
      'attempt-1',
      'baseline',
      'verify-1',
    ]);
  });

  it('undoes an earlier apply that a crash interrupted before it builds anything from the repo', async () => {
    const h = await harness();
    const target = join(h.repo, 'src', 'shipping.ts');
    const pristine = await readFile(target);
    const half = {
      path: 'src/shipping.ts',
      kind: 'modified',
      type: 'file',
      allowed: true,
      binary: false,
      modeChanged: false,
    } as const;
    const entries = [
      { ...half, content: Buffer.from('// half of an earlier apply\n'), oldContent: pristine, mode: 0o644 },
      {
        ...half,
        path: 'AGENTS.md',
        content: Buffer.from('x\n'),
        oldContent: await readFile(join(h.repo, 'AGENTS.md')),
        mode: 0o644,
      },
    ];
    // An apply whose second rename never returns: as if the process died right there.
    await applyThatDies(h.repo, entries, { journalDir: defaultJournalDir(h.options().env) });
    expect(await readFile(target, 'utf8')).toBe('// half of an earlier apply\n');
    const deps = h.deps(scripted(fixingTurns));
    let seenByImage = '';
    const image = deps.image;
    deps.image = async (...args) => {
      seenByImage = await readFile(target, 'utf8');
      return image(...args);
    };
    const lines: string[] = [];
    const progress = {
      phase: () => undefined,
      detail: () => undefined,
      end: (t: string) => void lines.push(t),
    };
    const result = await runFix(h.options({ progress }), deps);
    expect(seenByImage).toBe(pristine.toString('utf8'));
    expect(lines).toContain('put back 1 file(s) as they were');
    expect(result.record.applied).toBe(true);
  });

  it('refuses to apply when the host file changed during the run, keeping the patch', async () => {
    const h = await harness();
    const target = join(h.repo, 'src', 'shipping.ts');
    // Someone edits the host file while the verification runs.
    const meddling: ExecHandler = async (command, options, sandbox) => {
      if (h.created.find((c) => c.sandbox === sandbox)?.spec.role === 'verify-1') {
        await writeFile(target, '// edited by a person meanwhile\n');
      }
      return npmTest(command, options, sandbox);
    };
    const result = await runFix(h.options(), h.deps(scripted(fixingTurns), meddling));
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.applied).toBe(false);
    expect(result.record.applyError).toMatch(/src\/shipping\.ts/);
    expect(exitCode(result)).toBe(1);
    expect(await readFile(target, 'utf8')).toBe('// edited by a person meanwhile\n');
    expect(await readFile(join(result.runDir, 'patch.diff'), 'utf8')).toContain('= 39;');
  });

  it('Ctrl-C during a command: interrupted, exit 130, host untouched, record written, sandboxes disposed', async () => {
    const h = await harness();
    const controller = new AbortController();
    const before = await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8');
    let running = false;
    const interrupting: ExecHandler = (command, options, sandbox) => {
      if (command === 'sleep 100') {
        running = true;
        controller.abort();
        return new Promise(() => undefined);
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
    expect(running).toBe(true);
    expect(result.outcome).toBe('interrupted');
    expect(exitCode(result)).toBe(130);
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toBe(before);
    const record = JSON.parse(await readFile(join(result.runDir, 'run.json'), 'utf8'));
    expect(record.outcome).toBe('interrupted');
    expect(h.created.every((c) => c.sandbox.disposed !== undefined)).toBe(true);
  });

  it('the run time limit ends the run as timeout (exit 1), never as interrupted', async () => {
    const h = await harness();
    await h.catalog((yaml) => yaml.replace('    testSec: 300', '    testSec: 300\n    runSec: 0.5'));
    const hanging: ExecHandler = (command, options, sandbox) =>
      command === 'sleep 100' ? new Promise(() => undefined) : npmTest(command, options, sandbox);
    const turns: Turn[] = [{ content: [toolUse('s', 'run_command', { command: 'sleep 100' })] }];
    const result = await runFix(h.options(), h.deps(scripted(turns), hanging));
    expect(result.outcome).toBe('timeout');
    expect(result.error?.code).toBe('RUN_TIMEOUT');
    expect(exitCode(result)).toBe(1);
    expect(result.record.attempts[0]?.verdict).toBe('timeout');
    expect(h.created.every((c) => c.sandbox.disposed !== undefined)).toBe(true);
  });

  it('a cassette that runs out is an error of the run (exit 2), not infrastructure', async () => {
    const h = await harness();
    const result = await runFix(
      h.options(),
      h.deps(scripted([{ content: [toolUse('l', 'list_files', {})] }])),
    );
    expect(result.outcome).toBe('error');
    expect(result.error?.category).toBe('config');
    expect(exitCode(result)).toBe(2);
  });

  it('an engine that stops answering ends the run as infrastructure (exit 3)', async () => {
    const h = await harness();
    const gone: ExecHandler = (command) => {
      if (command === 'crash') throw new SandboxUnavailable('cannot reach the Docker daemon');
      return { exitCode: 0 };
    };
    const turns: Turn[] = [{ content: [toolUse('c', 'run_command', { command: 'crash' })] }];
    const result = await runFix(h.options(), h.deps(scripted(turns), gone));
    expect(result.outcome).toBe('infrastructure');
    expect(exitCode(result)).toBe(3);
  });

  it('an unexpected failure while the engine no longer answers is infrastructure; while it answers, an error', async () => {
    for (const engineAnswers of [false, true]) {
      const h = await harness();
      const deps = h.deps(scripted(fixingTurns));
      // What a stream cut by a dying engine looks like from the caller: a plain error.
      deps.image = async () => {
        throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
      };
      // It answered when the run began (prepare asks), then went away.
      let pings = 0;
      deps.ping = async () => {
        if (++pings > 1 && !engineAnswers)
          throw new SandboxUnavailable('cannot reach the Docker engine (ECONNREFUSED)');
      };
      const result = await runFix(h.options(), deps);
      expect(result.outcome).toBe(engineAnswers ? 'error' : 'infrastructure');
      expect(result.record.error?.message ?? '').toMatch(/socket hang up/);
    }
  });

  it('a sandbox whose processes all died still has what the agent changed until then verified', async () => {
    const h = await harness();
    const killing: ExecHandler = (command, options, sandbox) => {
      if (command === 'kill -9 -1') {
        sandbox.kill();
        return { exitCode: 137 };
      }
      return npmTest(command, options, sandbox);
    };
    const turns: Turn[] = [
      { content: [FIX_EDIT] },
      { content: [toolUse('k', 'run_command', { command: 'kill -9 -1' })] },
      { content: [toolUse('k2', 'run_command', { command: 'true' })] },
    ];
    const result = await runFix(h.options(), h.deps(scripted(turns), killing));
    expect(result.record.attempts[0]?.agentStop).toBe('sandbox-stopped');
    expect(result.outcome).toBe('ready-for-review');
  });

  it.each([
    ['the engine answers: the attempt failed (sandbox-stopped), exit 1', true],
    ['the engine does not answer: infrastructure, exit 3', false],
  ])('a verification sandbox that stops under the change: %s', async (_name, engineAnswers) => {
    const h = await harness();
    // The change's own test run takes its sandbox down (the engine then says it is gone).
    const dying: ExecHandler = (command, options, sandbox) => {
      if (command === 'npm test' && sandbox.labels.role?.startsWith('verify')) {
        sandbox.kill();
        throw new SandboxDead(`sandbox ${sandbox.id.slice(0, 12)} is not running`);
      }
      return npmTest(command, options, sandbox);
    };
    const deps = h.deps(scripted([{ content: [FIX_EDIT] }, { content: [text('done')] }]), dying);
    let pings = 0;
    deps.ping = async () => {
      if (++pings > 1 && !engineAnswers)
        throw new SandboxUnavailable('cannot reach the Docker engine (ECONNREFUSED)');
    };
    const result = await runFix(h.options({ maxAttempts: 1 }), deps);
    if (engineAnswers) {
      expect(result.outcome).toBe('failed');
      expect(result.record.attempts[0]?.verdict).toBe('sandbox-stopped');
      expect(exitCode(result)).toBe(1);
    } else {
      expect(result.outcome).toBe('infrastructure');
      expect(exitCode(result)).toBe(3);
    }
  });

  it('a sandbox over its disk budget ends the attempt with the reason, which the next attempt is told', async () => {
    const h = await harness();
    const filling: ExecHandler = (command, options, sandbox) => {
      if (command === 'fill-the-disk') {
        sandbox.exceedDisk(2 * 1024 ** 3, 1024 ** 3);
        return { exitCode: 1 };
      }
      return npmTest(command, options, sandbox);
    };
    const turns: Turn[] = [
      { content: [toolUse('f', 'run_command', { command: 'fill-the-disk' })] },
      { content: [toolUse('f2', 'run_command', { command: 'true' })] },
      ...fixingTurns,
    ];
    const provider = scripted(turns);
    const result = await runFix(h.options(), h.deps(provider, filling));
    expect(result.record.attempts.map((a) => a.verdict)).toEqual(['disk-budget', 'passed']);
    expect(result.record.attempts[0]?.feedback).toMatch(/disk budget exceeded \(2\.00 GiB of 1\.00 GiB\)/);
    expect(JSON.stringify(provider.requests[1]!.messages[0])).toMatch(/disk budget exceeded/);
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
        sandbox.set('test/shipping.test.ts', '// weakened\n');
        return { exitCode: 0 };
      }
      return npmTest(command, options, sandbox);
    };
    const result = await runFix(h.options(), h.deps(provider, editsTest));
    expect(result.record.attempts.map((a) => a.verdict)).toEqual(['rejected', 'passed']);
    expect(result.record.attempts[0]?.gate?.offences[0]).toMatchObject({
      path: 'test/shipping.test.ts',
      kind: 'not-editable',
    });
    const secondAttemptFirstRequest = provider.requests[2]!;
    expect(JSON.stringify(secondAttemptFirstRequest.messages[0])).toContain('test/shipping.test.ts');
    expect(await readFile(join(h.repo, 'test', 'shipping.test.ts'), 'utf8')).not.toContain('weakened');
  });

  it('a file reached through a symlinked folder is refused even when its spelled path is editable', async () => {
    const h = await harness();
    await h.catalog((yaml) => yaml.replace('    - src/shipping.ts', '    - src/**'));
    const linking: ExecHandler = (command, options, sandbox) => {
      if (command === 'swap-link') {
        // The agent replaces the folder link with a real folder and writes through the name.
        sandbox.delete('src/shared');
        sandbox.set('src/shared/package.json', '{"scripts":{"test":"true"}}\n');
        return { exitCode: 0 };
      }
      return npmTest(command, options, sandbox);
    };
    const turns: Turn[] = [
      { content: [toolUse('s', 'run_command', { command: 'swap-link' })] },
      { content: [text('done')] },
    ];
    // The repo ships `src/shared -> ..` under the editable glob.
    const result = await runFix(
      h.options({ maxAttempts: 1 }),
      h.deps(scripted(turns), linking, undefined, { 'src/shared': { type: 'symlink', target: '..' } }),
    );
    expect(result.outcome).toBe('rejected');
    const offences = result.record.attempts[0]?.gate?.offences ?? [];
    expect(offences.map((o) => [o.path, o.kind])).toEqual(
      expect.arrayContaining([
        ['src/shared', 'type-changed'],
        ['src/shared/package.json', 'through-link'],
      ]),
    );
  });

  it('held-out tests are absent from every attempt sandbox, present in verification, and decide the verdict', async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace(
        '  testCommand: npm test',
        '  testCommand: npm test\n  heldOutTests: [test/hidden.test.ts]',
      ),
    );
    // The visible tests pass with any threshold under 45; the held-out one wants exactly 39.
    const tests: ExecHandler = (command, _options, sandbox) => {
      if (command !== 'npm test') return { exitCode: 0 };
      const source = sandbox.text('src/shipping.ts') ?? '';
      const visible = /THRESHOLD = (3\d|4[0-4]);/.test(source);
      const hidden = sandbox.text('test/hidden.test.ts') === undefined || source.includes('= 39;');
      return { exitCode: visible && hidden ? 0 : 1 };
    };
    const gaming = toolUse('g', 'edit_file', {
      path: 'src/shipping.ts',
      search: 'FREE_SHIPPING_THRESHOLD = 50;',
      replacement: 'FREE_SHIPPING_THRESHOLD = 40;',
    });
    const turns: Turn[] = [
      { content: [toolUse('r', 'read_file', { path: 'test/hidden.test.ts' })] },
      { content: [gaming] },
      { content: [text('done')] },
    ];
    const provider = scripted(turns);
    const result = await runFix(
      h.options({ maxAttempts: 1, apply: false }),
      h.deps(provider, tests, undefined, { 'test/hidden.test.ts': '// checks 39 at the boundary\n' }),
    );
    const attempt = h.created.find((c) => c.spec.role === 'attempt-1')!;
    const verify = h.created.find((c) => c.spec.role === 'verify-1')!;
    expect(attempt.spec.hidden).toEqual(['test/hidden.test.ts']);
    expect(JSON.stringify(provider.requests[1]!.messages)).toMatch(/no such file/);
    expect(verify.spec.hidden ?? []).toEqual([]);
    expect(result.outcome).toBe('failed');
    expect(result.record.attempts[0]).toMatchObject({ verdict: 'tests-failed', heldOut: 'failed' });
    expect(result.record.attempts[0]?.feedback).toMatch(/held-out tests/);
    expect(result.record.attempts[0]?.feedback).not.toMatch(/39/);
  });

  it('when the visible tests fail too, the maker is shown only their output, never the held-out run', async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace(
        '  testCommand: npm test',
        '  testCommand: npm test\n  heldOutTests: [test/hidden.test.ts]',
      ),
    );
    // Both fail with the untouched threshold; the held-out test prints its name and value.
    const tests: ExecHandler = (command, _options, sandbox) => {
      if (command !== 'npm test') return { exitCode: 0 };
      const lines = ['not ok 1 - visible: an order of 45 EUR ships free'];
      if (sandbox.text('test/hidden.test.ts') !== undefined)
        lines.push('not ok 2 - test/hidden.test.ts: SECRET-BOUNDARY expected 39, got 50');
      return { exitCode: 1, stdout: `${lines.join('\n')}\n` };
    };
    const provider = scripted([
      {
        content: [
          toolUse('w', 'edit_file', {
            path: 'src/shipping.ts',
            search: 'FREE_SHIPPING_THRESHOLD = 50;',
            replacement: 'FREE_SHIPPING_THRESHOLD = 60;',
          }),
        ],
      },
      { content: [text('done')] },
      { content: [text('giving up')] },
    ]);
    const result = await runFix(
      h.options({ maxAttempts: 2, apply: false }),
      h.deps(provider, tests, undefined, { 'test/hidden.test.ts': '// SECRET-BOUNDARY at 39\n' }),
    );
    const sent = JSON.stringify(provider.requests.map((r) => r.messages));
    expect(sent).toMatch(/visible: an order of 45 EUR ships free/);
    expect(sent).toMatch(/Held-out tests that you cannot see ran too/);
    expect(sent).not.toMatch(/SECRET-BOUNDARY|hidden\.test|expected 39/);
    expect(JSON.stringify(result.record.attempts.map((a) => a.feedback))).not.toMatch(/SECRET-BOUNDARY/);
    // The record keeps the whole run, for people.
    const recorded = await readFile(join(result.runDir, 'attempts', '1', 'test-output.txt'), 'utf8');
    expect(recorded).toMatch(/SECRET-BOUNDARY expected 39/);
  });

  it("with review on and held-out tests, the checker's sandbox hides them and it is sent no held-out output", async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace(
        '  testCommand: npm test',
        '  testCommand: npm test\n  heldOutTests: [test/hidden.test.ts]',
      ),
    );
    const tests: ExecHandler = (command, _options, sandbox) => {
      if (command !== 'npm test') return { exitCode: 0 };
      const hidden = sandbox.text('test/hidden.test.ts') !== undefined;
      if (!(sandbox.text('src/shipping.ts') ?? '').includes('= 39;')) return { exitCode: 1 };
      return {
        exitCode: 0,
        stdout: hidden ? 'ok 2 - test/hidden.test.ts SECRET-BOUNDARY at 39\n' : 'ok 1\n',
      };
    };
    const maker = scripted([{ content: [FIX_EDIT] }, { content: [text('done')] }]);
    const checker = scripted([
      {
        content: [toolUse('s', 'submit_review', { verdict: 'approve', summary: 'fine', reasons: [] })],
      },
    ]);
    const deps = h.deps(maker, tests, undefined, { 'test/hidden.test.ts': '// SECRET-BOUNDARY at 39\n' });
    const result = await runFix(h.options({ maxAttempts: 1, apply: false, review: true }), {
      ...deps,
      createProvider: async (options: { role?: string }) => (options.role === 'checker' ? checker : maker),
    });
    const review = h.created.find((c) => c.spec.role === 'review-1');
    expect(review?.spec.hidden).toEqual(['test/hidden.test.ts']);
    expect(checker.requests.length).toBeGreaterThan(0);
    expect(JSON.stringify(checker.requests.map((r) => r.messages))).not.toMatch(
      /SECRET-BOUNDARY|hidden\.test/,
    );
    expect(result.outcome).toBe('ready-for-review');
  });

  it('with agent.delegate, a sub-agent plays its own cassette queue, and --record writes both roles', async () => {
    const h = await harness();
    await h.catalog((yaml) => yaml.replace('  maxTurns: 20\n', '  maxTurns: 20\n  delegate: true\n'));
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

describe('runFix with an independent checker', () => {
  const HARD_CODE = toolUse('h1', 'edit_file', {
    path: 'src/shipping.ts',
    search: 'return order.totalEur >= FREE_SHIPPING_THRESHOLD ? 0 : STANDARD_SHIPPING_FEE;',
    replacement: 'return order.totalEur >= 39 ? 0 : STANDARD_SHIPPING_FEE;',
  });
  // The tests see behaviour only: a hard-coded 39 passes them as well as the right fix.
  const behaviour: ExecHandler = (command, _options, sandbox) => {
    if (command !== 'npm test') return { exitCode: 0 };
    const source = sandbox.text('src/shipping.ts') ?? '';
    return { exitCode: source.includes('THRESHOLD = 39;') || source.includes('>= 39 ?') ? 0 : 1 };
  };
  const requestChanges = toolUse('r1', 'submit_review', {
    verdict: 'request-changes',
    summary: 'The threshold is hard-coded in shippingFee while the constant still says 50.',
    reasons: [
      {
        file: 'src/shipping.ts',
        rule: 'freeShippingThreshold',
        text: 'set FREE_SHIPPING_THRESHOLD to 39 and use it; do not hard-code 39',
      },
    ],
  });
  const approve = toolUse('r2', 'submit_review', {
    verdict: 'approve',
    summary: 'The constant follows the rule.',
    reasons: [],
  });

  function providers(maker: Turn[], checker: Turn[]) {
    const makerProvider = scripted(maker);
    const checkerProvider = scripted(checker);
    const asked: { role?: string; name: string; model?: string }[] = [];
    return {
      makerProvider,
      checkerProvider,
      asked,
      createProvider: async (options: { role?: string; name: string; model?: string }) => {
        asked.push({
          ...(options.role ? { role: options.role } : {}),
          name: options.name,
          ...(options.model ? { model: options.model } : {}),
        });
        return options.role === 'checker' ? checkerProvider : makerProvider;
      },
    };
  }

  it('a checker that requests changes makes the next attempt receive its reasons; a later approval ends ready-for-review', async () => {
    const h = await harness();
    const p = providers(
      [
        { content: [HARD_CODE] },
        { content: [text('done')] },
        { content: [FIX_EDIT] },
        { content: [text('done')] },
      ],
      [
        { content: [toolUse('c1', 'read_file', { path: 'src/shipping.ts' })] },
        { content: [requestChanges] },
        { content: [approve] },
      ],
    );
    const result = await runFix(h.options({ review: true }), {
      ...h.deps(p.makerProvider, behaviour),
      createProvider: p.createProvider,
    });
    expect(result.outcome).toBe('ready-for-review');
    expect(exitCode(result)).toBe(0);
    expect(result.record.attempts.map((a) => a.verdict)).toEqual(['changes-requested', 'passed']);
    expect(result.record.attempts[0]?.reviews?.map((r) => r.verdict)).toEqual(['request-changes']);
    expect(result.record.attempts[1]?.reviews?.map((r) => r.verdict)).toEqual(['approve']);
    // The maker's second attempt was told the reasons, file and rule included.
    const second = JSON.stringify(p.makerProvider.requests[2]!.messages[0]);
    expect(second).toContain('an independent reviewer requested changes');
    expect(second).toContain(
      'src/shipping.ts, rule freeShippingThreshold: set FREE_SHIPPING_THRESHOLD to 39',
    );
    // The checker's context is its own: it never saw the maker's conversation, and ended at its verdict.
    const review = JSON.stringify(p.checkerProvider.requests[0]!.messages);
    expect(review).not.toContain('h1');
    expect(review).toContain('>= 39 ?');
    expect(p.checkerProvider.requests).toHaveLength(3);
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toContain(
      'FREE_SHIPPING_THRESHOLD = 39;',
    );
    // Review sandboxes are throwaways, made from the pristine image plus the verified change.
    const reviewBoxes = h.created.filter((c) => (c.spec.role ?? '').startsWith('review-'));
    expect(reviewBoxes.map((c) => c.spec.role)).toEqual(['review-1', 'review-2']);
    expect(reviewBoxes[0]!.sandbox.text('src/shipping.ts')).toContain('>= 39 ?');
  });

  it('a checker that never approves ends not-approved (exit 1), with every review in the record', async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace('  maxTurns: 20\n', '  maxTurns: 20\n  review: { maxRounds: 2 }\n'),
    );
    const p = providers(
      [
        { content: [HARD_CODE] },
        { content: [text('done')] },
        { content: [HARD_CODE] },
        { content: [text('done')] },
      ],
      [{ content: [requestChanges] }, { content: [requestChanges] }],
    );
    const result = await runFix(h.options(), {
      ...h.deps(p.makerProvider, behaviour),
      createProvider: p.createProvider,
    });
    expect(result.outcome).toBe('not-approved');
    expect(exitCode(result)).toBe(1);
    expect(result.record.attempts.map((a) => a.verdict)).toEqual(['changes-requested', 'changes-requested']);
    expect(result.record.attempts.flatMap((a) => a.reviews ?? []).map((r) => r.round)).toEqual([1, 2]);
    expect(result.record.applied).toBeUndefined();
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toContain('= 50;');
    const runJson = JSON.parse(await readFile(join(result.runDir, 'run.json'), 'utf8'));
    expect(runJson.attempts[1].reviews[0].reasons[0].rule).toBe('freeShippingThreshold');
  });

  it('the checker may be another provider and model, named in the catalog', async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace(
        '  maxTurns: 20\n',
        '  maxTurns: 20\n  review: { provider: openai, model: gpt-checker }\n',
      ),
    );
    const p = providers(fixingTurns, [{ content: [approve] }]);
    const result = await runFix(h.options(), {
      ...h.deps(p.makerProvider, behaviour),
      createProvider: p.createProvider,
    });
    expect(result.outcome).toBe('ready-for-review');
    expect(p.asked).toContainEqual({ role: 'checker', name: 'openai', model: 'gpt-checker' });
    expect(p.asked).toContainEqual({ role: 'main', name: 'replay' });
  });
});
