/**
 * The fix flow with fakes: in-memory sandboxes (which pass the same file-level conformance
 * suite as Docker) whose `npm test` passes only when the threshold reads 39, a replayed
 * model, and a real temporary host repo. Pins the outcome rules and their exit codes,
 * keep policies, the all-or-nothing apply, interruption, time limits, the baseline that
 * runs beside the first attempt, held-out tests, and that nothing of the host environment
 * reaches a sandbox.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import {
  runFix,
  type FixDeps,
  type FixOptions,
  type FixResult,
  type HostFileState as HostFile,
} from '../../../src/fix/run-fix.js';
import { memoryBaselineCache } from '../../../src/fix/baseline-cache.js';
import { memoryFailingBaselines } from '../../../src/fix/failing-baselines.js';
import { SandboxDead, SandboxUnavailable } from '../../../src/errors.js';
import { exitCodeForRun } from '../../../src/cli/exit-codes.js';
import { fixSummaryJson } from '../../../src/cli/commands/fix.js';
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
import { expectRecordIsFoldOfEvents, runFoldersUnder } from '../../helpers/journal.js';
import { MemoryEventSink } from '../../../src/agent/events.js';
import { progressOfEvents, type ProgressSink } from '../../../src/fix/progress.js';

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
  const done = roots.splice(0);
  try {
    // Every run any test made: its run.json is the fold of its event log, byte for byte.
    for (const root of done)
      for (const dir of await runFoldersUnder(root)) await expectRecordIsFoldOfEvents(dir);
  } finally {
    await Promise.all(done.map((r) => rm(r, { recursive: true, force: true })));
  }
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
const HARD_CODE = toolUse('h1', 'edit_file', {
  path: 'src/shipping.ts',
  search: 'return order.totalEur >= FREE_SHIPPING_THRESHOLD ? 0 : STANDARD_SHIPPING_FEE;',
  replacement: 'return order.totalEur >= 39 ? 0 : STANDARD_SHIPPING_FEE;',
});
/** The tests see behaviour only: a hard-coded 39 passes them as well as the right fix. */
const behaviour: ExecHandler = (command, _options, sandbox) => {
  if (command !== 'npm test') return { exitCode: 0 };
  const source = sandbox.text('src/shipping.ts') ?? '';
  return { exitCode: source.includes('THRESHOLD = 39;') || source.includes('>= 39 ?') ? 0 : 1 };
};
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
    // The baseline outlasts the first attempt's head start (no wait here): the agent works beside it.
    const result = await runFix(h.options({ baselineHeadStartMs: 0 }), h.deps(scripted(turns), handler));
    expect(result.outcome).toBe('nothing-to-fix');
    // Not an attempt that was interrupted: there was nothing to fix. What it spent still counts.
    expect(result.record.attempts).toEqual([]);
    expect(result.record.turns).toBe(2);
    expect(fixSummaryJson(result).attempts).toEqual([]);
  });

  /** `npm test` in the baseline's sandbox fails only once `release` is called. */
  function heldBaseline(h: Harness) {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const handler: ExecHandler = async (command, options, sandbox) => {
      const role = h.created.find((c) => c.sandbox === sandbox)?.spec.role;
      if (command === 'npm test' && role === 'baseline') {
        await released;
        return {
          exitCode: 1,
          stdout: 'not ok 2 - an order of 45 EUR ships free (OPS-412)\n# pass 2\n# fail 2\n',
        };
      }
      return npmTest(command, options, sandbox);
    };
    return { handler, release: () => release() };
  }

  it('a baseline known to fail does not hold the agent: it runs beside the attempt, and the attempt is verified before it ends', async () => {
    const h = await harness();
    const held = heldBaseline(h);
    const failing = memoryFailingBaselines();
    failing.known = async () => true;
    // The verification's own tests release the baseline: had the agent waited for the
    // baseline's verdict, or the change set for what the baseline's tests wrote, nothing would.
    const handler: ExecHandler = (command, options, sandbox) => {
      const role = h.created.find((c) => c.sandbox === sandbox)?.spec.role;
      if (command === 'npm test' && role === 'verify-1') held.release();
      return held.handler(command, options, sandbox);
    };
    const result = await runFix(h.options({ baselineHeadStartMs: 600_000 }), {
      ...h.deps(scripted(fixingTurns), handler),
      failingBaselines: failing,
    });
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.baseline).toMatchObject({ failing: true });
  }, 20_000);

  it("an eval's patch-only trial (the oracle's gold patch, a predictions file's) does not wait for the baseline either", async () => {
    const h = await harness();
    const held = heldBaseline(h);
    const handler: ExecHandler = (command, options, sandbox) => {
      const role = h.created.find((c) => c.sandbox === sandbox)?.spec.role;
      if (command === 'npm test' && role === 'verify-1') held.release();
      return held.handler(command, options, sandbox);
    };
    const result = await runFix(h.options({ baselineHeadStartMs: 600_000, patchOnly: true }), {
      ...h.deps(scripted(fixingTurns), handler),
      failingBaselines: memoryFailingBaselines(),
    });
    expect(result.outcome).toBe('ready-for-review');
  }, 20_000);

  it('a patch-only trial writes its change into its verification sandbox and is tested there: one sandbox, not two', async () => {
    const h = await harness();
    const result = await runFix(h.options({ patchOnly: true, apply: false }), h.deps(scripted(fixingTurns)));
    expect(result.outcome).toBe('ready-for-review');
    // No attempt sandbox: the verification's (pristine image, made ahead) took the writes.
    expect(h.created.map((c) => c.spec.role).sort()).toEqual(['baseline', 'verify-1']);
    const verify = h.created.find((c) => c.spec.role === 'verify-1')!;
    expect(verify.spec.image).toBe('memory:repo');
    expect(verify.spec.hidden ?? []).toEqual([]);
    expect(verify.sandbox.commands).toContain('npm test');
    expect(verify.sandbox.text('src/shipping.ts')).toContain('= 39;');
    expect(result.record.containers.map((c) => c.role).sort()).toEqual(['baseline', 'verify-1']);
    // The same agent run in its own sandbox: an attempt's and a fresh verification's.
    const agent = await harness();
    await runFix(agent.options({ apply: false }), agent.deps(scripted(fixingTurns)));
    expect(agent.created.map((c) => c.spec.role).sort()).toEqual(['attempt-1', 'baseline', 'verify-1']);
  });

  it('a patch-only trial whose sandbox holds more than its change set is tested in a fresh sandbox with the change set alone', async () => {
    const h = await harness();
    await h.catalog((yaml) => yaml.replace('    - src/shipping.ts', '    - src/**'));
    // Build output the change set leaves out (tsc's *.tsbuildinfo), written beside the fix.
    const buildOutput = toolUse('b1', 'write_file', { path: 'src/app.tsbuildinfo', content: '{}' });
    const result = await runFix(
      h.options({ patchOnly: true, apply: false }),
      h.deps(scripted([{ content: [FIX_EDIT, buildOutput] }, { content: [text('fixed')] }])),
    );
    expect(result.outcome).toBe('ready-for-review');
    const verifies = h.created.filter((c) => c.spec.role === 'verify-1');
    expect(verifies).toHaveLength(2);
    const [written, fresh] = verifies;
    // The tests never ran where the change set is not all there is.
    expect(written!.sandbox.commands).not.toContain('npm test');
    expect(written!.sandbox.text('src/app.tsbuildinfo')).toBe('{}');
    expect(fresh!.sandbox.commands).toContain('npm test');
    expect(fresh!.sandbox.text('src/app.tsbuildinfo')).toBeUndefined();
    expect(fresh!.sandbox.text('src/shipping.ts')).toContain('= 39;');
  });

  it('a baseline that ran the tests and found them failing is remembered; a passing or broken one is not', async () => {
    const failingRun = await harness();
    const failing = memoryFailingBaselines();
    const first = await runFix(failingRun.options(), {
      ...failingRun.deps(scripted(fixingTurns)),
      failingBaselines: failing,
    });
    expect(first.outcome).toBe('ready-for-review');
    expect([...failing.keys]).toHaveLength(1);
    expect([...failing.keys][0]).toContain('sha256:memory');

    const passingRun = await harness();
    const none = memoryFailingBaselines();
    const passing: ExecHandler = () => ({ exitCode: 0, stdout: '# pass 4\n# fail 0\n' });
    const second = await runFix(passingRun.options(), {
      ...passingRun.deps(scripted(fixingTurns), passing),
      failingBaselines: none,
    });
    expect(second.outcome).toBe('nothing-to-fix');
    const broken = await harness();
    await broken.catalog((yaml) => yaml.replace('testCommand: npm test', 'testCommand: npm run tset'));
    const missing: ExecHandler = (command) =>
      command === 'npm run tset'
        ? { exitCode: 1, stderr: 'npm ERR! Missing script: "tset"\n' }
        : { exitCode: 0 };
    const third = await runFix(broken.options(), {
      ...broken.deps(scripted(fixingTurns), missing),
      failingBaselines: none,
    });
    expect(third.outcome).toBe('error');
    expect(none.keys.size).toBe(0);
  });

  it('a baseline not known to fail still holds the agent until its verdict', async () => {
    const h = await harness();
    const held = heldBaseline(h);
    const model = scripted(fixingTurns);
    const running = runFix(h.options({ baselineHeadStartMs: 600_000 }), {
      ...h.deps(model, held.handler),
      failingBaselines: memoryFailingBaselines(),
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(model.position).toBe(0);
    held.release();
    expect((await running).outcome).toBe('ready-for-review');
    expect(model.position).toBeGreaterThan(0);
  }, 20_000);

  it('a test command that cannot run (no such npm script) ends the run as a configuration error before any model call', async () => {
    const h = await harness();
    await h.catalog((yaml) => yaml.replace('testCommand: npm test', 'testCommand: npm run tset'));
    const missingScript: ExecHandler = (command) =>
      command === 'npm run tset'
        ? {
            exitCode: 1,
            stderr:
              'npm ERR! Missing script: "tset"\nnpm ERR! \nnpm ERR! Did you mean this?\nnpm ERR!     npm set # Set a value in the npm configuration\n',
          }
        : { exitCode: 0 };
    const model = scripted(fixingTurns);
    const result = await runFix(h.options(), h.deps(model, missingScript));
    expect(result.outcome).toBe('error');
    expect(exitCode(result)).toBe(2);
    expect(result.record.message).toMatch(
      /^the test command itself failed to run: package.json has no "tset" script/,
    );
    expect(result.error?.code).toBe('TEST_COMMAND_BROKEN');
    expect(result.error?.hint).toContain('sandbox-harness check');
    // No attempt was spent: the model was never called, and no attempt is on the record.
    expect(model.position).toBe(0);
    expect(result.record.attempts).toEqual([]);
    expect(result.record.turns).toBe(0);
    expect(result.record.baseline?.brokenCommand).toMatchObject({
      kind: 'missing-script',
      command: 'npm run tset',
    });
    expect(h.created.some((c) => (c.spec.role ?? '').startsWith('verify'))).toBe(false);
    // --force does not paper over it either.
    const forced = await runFix(h.options({ force: true }), h.deps(scripted(fixingTurns), missingScript));
    expect(forced.outcome).toBe('error');
  });

  it('a test command that finds no tests (exit 0) is broken too, not nothing-to-fix', async () => {
    const h = await harness();
    const zeroTests: ExecHandler = (command) =>
      command === 'npm test'
        ? {
            exitCode: 0,
            stdout:
              '> test\n> node --test\n\nTAP version 13\n1..0\n# tests 0\n# suites 0\n# pass 0\n# fail 0\n',
          }
        : { exitCode: 0 };
    const model = scripted(fixingTurns);
    const result = await runFix(h.options(), h.deps(model, zeroTests));
    expect(result.outcome).toBe('error');
    expect(result.record.message).toContain('node --test ran 0 tests');
    expect(model.position).toBe(0);
  });

  it('a genuinely failing test (the ticket) still goes on to the attempts', async () => {
    const h = await harness();
    const model = scripted(fixingTurns);
    const result = await runFix(h.options(), h.deps(model, npmTest));
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.baseline).toMatchObject({ failing: true });
    expect(result.record.baseline?.brokenCommand).toBeUndefined();
    expect(model.position).toBeGreaterThan(0);
  });

  it('within an eval, every trial of a broken test command ends in error from the one shared baseline', async () => {
    const h = await harness();
    await h.catalog((yaml) => yaml.replace('testCommand: npm test', 'testCommand: npm run tset'));
    const baselines = memoryBaselineCache();
    const missingScript: ExecHandler = (command) =>
      command === 'npm run tset'
        ? { exitCode: 1, stderr: 'npm error Missing script: "tset"\n' }
        : { exitCode: 0 };
    const deps = (p: ModelProvider) => ({ ...h.deps(p, missingScript), baselines });
    const first = await runFix(h.options({ apply: false }), deps(scripted(fixingTurns)));
    const secondModel = scripted(fixingTurns);
    const second = await runFix(h.options({ apply: false }), deps(secondModel));
    expect([first.outcome, second.outcome]).toEqual(['error', 'error']);
    expect(second.record.baseline?.reusedFrom).toBe(first.runId);
    expect(second.record.message).toMatch(/^the test command itself failed to run/);
    expect(secondModel.position).toBe(0);
  });

  it("within an eval, a trial waiting for another trial's baseline gets the same head start, not the whole baseline", async () => {
    const h = await harness();
    const baselines = memoryBaselineCache();
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    let commandStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (commandStarted = resolve));
    const handler: ExecHandler = async (command, options, sandbox) => {
      const role = h.created.find((c) => c.sandbox === sandbox)?.spec.role;
      if (command === 'release-baseline') {
        release();
        return { exitCode: 0 };
      }
      if (command === 'npm test' && role === 'baseline') {
        commandStarted();
        await released;
      }
      return npmTest(command, options, sandbox);
    };
    const options = () => h.options({ apply: false, baselineHeadStartMs: 0 });
    // The first trial measures the baseline; only the second trial's agent ends it.
    const first = runFix(options(), { ...h.deps(scripted(fixingTurns), handler), baselines });
    await started;
    const releasing: Turn[] = [
      { content: [toolUse('r', 'run_command', { command: 'release-baseline' })] },
      ...fixingTurns,
    ];
    const second = await runFix(options(), { ...h.deps(scripted(releasing), handler), baselines });
    expect(second.record.baseline?.reusedFrom).toBe((await first).runId);
    expect(second.outcome).toBe('ready-for-review');
  }, 20_000);

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
    // Each attempt runs a command in its sandbox: there is something to look at in it.
    const looked: Turn[] = [{ content: [toolUse('l', 'run_command', { command: 'ls' })] }, ...idleTurns];
    const failed = await runFix(h.options({ maxAttempts: 2 }), h.deps(scripted([...looked, ...looked])));
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

  it('a run that never reached an attempt keeps no sandbox: a broken test command, a model that never answered, Ctrl-C before the first tool call', async () => {
    // A broken test command: the run stops before the agent's first model call.
    const broken = await harness();
    await broken.catalog((yaml) => yaml.replace('testCommand: npm test', 'testCommand: npm run tset'));
    const missing: ExecHandler = (command) =>
      command === 'npm run tset'
        ? { exitCode: 1, stderr: 'npm ERR! Missing script: "tset"\n' }
        : { exitCode: 0 };
    const stopped = await runFix(broken.options(), broken.deps(scripted(fixingTurns), missing));
    expect(stopped.outcome).toBe('error');
    expect(broken.created.some((c) => c.spec.role === 'attempt-1')).toBe(true);
    expect(stopped.record.containers.filter((c) => c.kept)).toEqual([]);

    // A cassette with no turn at all: the model never answered.
    const empty = await harness();
    const none = await runFix(empty.options(), empty.deps(scripted([])));
    expect(none.outcome).toBe('error');
    expect(none.record.containers.filter((c) => c.kept)).toEqual([]);

    // Ctrl-C while the first model call is under way: nothing ran in the sandbox yet.
    const ctrlC = await harness();
    const controller = new AbortController();
    const hanging: ModelProvider = {
      name: 'replay',
      model: 'hanging',
      complete: async (request) => {
        controller.abort();
        await new Promise((_, reject) =>
          request.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
        );
        throw new Error('not reached');
      },
      countTokens: async () => 0,
    };
    const interrupted = await runFix(ctrlC.options({ signal: controller.signal }), ctrlC.deps(hanging));
    expect(interrupted.outcome).toBe('interrupted');
    expect(interrupted.record.containers.filter((c) => c.kept)).toEqual([]);
    expect(ctrlC.created.filter((c) => c.sandbox.disposed?.keep)).toEqual([]);
  });

  it('Ctrl-C after a tool call keeps that sandbox (something ran in it); --keep always keeps even an untouched one', async () => {
    const h = await harness();
    const controller = new AbortController();
    const onExec: ExecHandler = (command, options, sandbox) => {
      if (command === 'ls') controller.abort();
      return npmTest(command, options, sandbox);
    };
    const turns: Turn[] = [{ content: [toolUse('l', 'run_command', { command: 'ls' })] }, ...idleTurns];
    const result = await runFix(h.options({ signal: controller.signal }), h.deps(scripted(turns), onExec));
    expect(result.outcome).toBe('interrupted');
    expect(result.record.containers.filter((c) => c.kept).map((c) => c.role)).toEqual(['attempt-1']);

    const always = await harness();
    await always.catalog((yaml) => yaml.replace('testCommand: npm test', 'testCommand: npm run tset'));
    const missing: ExecHandler = (command) =>
      command === 'npm run tset'
        ? { exitCode: 1, stderr: 'npm ERR! Missing script: "tset"\n' }
        : { exitCode: 0 };
    const kept = await runFix(
      always.options({ keep: 'always' }),
      always.deps(scripted(fixingTurns), missing),
    );
    expect(kept.record.containers.filter((c) => c.kept).map((c) => c.role)).toContain('attempt-1');
  });

  it('a model that fails after some turns (a cassette that ran out) leaves those turns on the record, and its sandbox', async () => {
    const h = await harness();
    const result = await runFix(
      h.options({ maxAttempts: 1 }),
      h.deps(scripted([{ content: [toolUse('l', 'run_command', { command: 'ls' })] }])),
    );
    expect(result.outcome).toBe('error');
    expect(result.record.message).toMatch(/ran out/);
    expect(result.record.turns).toBe(1);
    expect(result.record.attempts[0]).toMatchObject({ turns: 1, verdict: 'error' });
    expect(result.record.tokens.input).toBeGreaterThan(0);
    expect(result.record.containers.filter((c) => c.kept).map((c) => c.role)).toEqual(['attempt-1']);
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
    // Its own outcome and exit code: verified, but the working tree does not hold it.
    expect(result.outcome).toBe('not-applied');
    expect(result.record.outcome).toBe('not-applied');
    expect(result.record.applied).toBe(false);
    expect(result.record.applyError).toMatch(/src\/shipping\.ts/);
    expect(exitCode(result)).toBe(4);
    expect(result.patch).toContain('= 39;');
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
    // The tests fail before any change (a ticket to fix), so the run gets as far as the crash.
    const gone: ExecHandler = (command, options, sandbox) => {
      if (command === 'crash') throw new SandboxUnavailable('cannot reach the Docker daemon');
      return npmTest(command, options, sandbox);
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
    expect(result.record.attempts[0]?.feedback).toMatch(/disk budget exceeded \(2\.0 GiB of 1\.0 GiB\)/);
    expect(JSON.stringify(provider.requests[1]!.messages[0])).toMatch(/disk budget exceeded/);
  });

  it('what the tests write into the repo on the untouched baseline is left aside, not a rejected change', async () => {
    const h = await harness();
    const turns: Turn[] = [
      { content: [toolUse('t0', 'run_command', { command: 'npm test' })] },
      { content: [FIX_EDIT] },
      { content: [toolUse('t1', 'run_command', { command: 'npm test' })] },
      { content: [text('fixed')] },
    ];
    // Tests that leave a report in the repo, with no .gitignore rule for it.
    const writesReport: ExecHandler = async (command, options, sandbox) => {
      const result = await npmTest(command, options, sandbox);
      if (command === 'npm test') sandbox.set('test/output/result.json', `{"exit":${result.exitCode}}`);
      return result;
    };
    const result = await runFix(h.options(), h.deps(scripted(turns), writesReport));
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.attempts.map((a) => a.verdict)).toEqual(['passed']);
    expect(result.record.attempts[0]?.ignoredFiles).toContain('test/output/result.json');
    expect(await readdir(join(h.repo, 'test'))).not.toContain('output');
  });

  it('without the hold, a change with a path the tests may have written waits for the baseline and leaves it aside', async () => {
    const h = await harness();
    const turns: Turn[] = [
      { content: [toolUse('t0', 'run_command', { command: 'npm test' })] },
      { content: [FIX_EDIT] },
      { content: [text('fixed')] },
    ];
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const writesReport: ExecHandler = async (command, options, sandbox) => {
      // The baseline's tests end only once the attempt's change is being read.
      if (command === 'npm test' && h.created.find((c) => c.sandbox === sandbox)?.spec.role === 'baseline')
        await released;
      const result = await npmTest(command, options, sandbox);
      if (command === 'npm test') sandbox.set('test/output/result.json', `{"exit":${result.exitCode}}`);
      return result;
    };
    const failing = memoryFailingBaselines();
    failing.known = async () => true;
    const result = await runFix(
      h.options({ events: { emit: (e) => (e.kind === 'collect_start' ? release() : undefined) } }),
      { ...h.deps(scripted(turns), writesReport), failingBaselines: failing },
    );
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.attempts[0]?.ignoredFiles).toContain('test/output/result.json');
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

  describe('per-test results from a JUnit report (agent.testReport)', () => {
    const junit = (cases: string) =>
      `<?xml version="1.0"?><testsuites><testsuite name="test/shipping.test.ts">${cases}</testsuite></testsuites>`;
    /** `npm test` writes a report (unless told otherwise) whose boundary test wants 39. */
    const reporting =
      (
        write: (fixed: boolean) => string | undefined,
        exitCode = (fixed: boolean) => (fixed ? 0 : 1),
      ): ExecHandler =>
      (command, _options, sandbox) => {
        if (command.startsWith('rm -rf -- ')) {
          sandbox.delete(command.slice('rm -rf -- '.length));
          return { exitCode: 0 };
        }
        if (command !== 'npm test') return { exitCode: 0 };
        const fixed = (sandbox.text('src/shipping.ts') ?? '').includes('THRESHOLD = 39;');
        const report = write(fixed);
        if (report !== undefined) sandbox.set('reports/junit.xml', report);
        return { exitCode: exitCode(fixed) };
      };
    const withReport =
      (extra = '') =>
      (yaml: string) =>
        yaml.replace(
          '  testCommand: npm test',
          `  testCommand: npm test\n  testReport:\n    format: junit\n    path: reports/junit.xml\n${extra}`,
        );

    it('the record counts every test, the run folder lists them, and a report the repo shipped is never read', async () => {
      const h = await harness();
      await h.catalog(withReport());
      const seenAtStart: (string | undefined)[] = [];
      const onExec = reporting((fixed) =>
        junit(
          `<testcase name="ships free at 45"${fixed ? '/>' : '><failure message="45 paid"/></testcase>'}<testcase name="fee"/><testcase name="later"><skipped/></testcase>`,
        ),
      );
      const result = await runFix(
        h.options({ apply: false }),
        h.deps(
          scripted(fixingTurns),
          (command, options, sandbox) => {
            if (command === 'npm test') seenAtStart.push(sandbox.text('reports/junit.xml'));
            return onExec(command, options, sandbox);
          },
          undefined,
          { 'reports/junit.xml': junit('<testcase name="forged"/>') },
        ),
      );
      expect(result.outcome).toBe('ready-for-review');
      // The verification's test run starts without the shipped (forged) report.
      expect(seenAtStart.at(-1)).toBeUndefined();
      const attempt = result.record.attempts[0]!;
      expect(attempt.testReport).toEqual({
        status: 'read',
        counts: { passed: 2, failed: 0, skipped: 1 },
        file: 'attempts/1/test-results.json',
      });
      const saved = JSON.parse(await readFile(join(result.runDir, 'attempts/1/test-results.json'), 'utf8'));
      expect(saved.tests.map((t: { id: string; status: string }) => `${t.status} ${t.id}`)).toEqual([
        'passed test/shipping.test.ts > ships free at 45',
        'passed test/shipping.test.ts > fee',
        'skipped test/shipping.test.ts > later',
      ]);
    });

    it("root's look for the freeze: ahead in the agent's sandbox; in the verification's beside the tests only when a freeze follows them", async () => {
      /** Per sandbox, by role: how its channel was started and whether root's look was. */
      const seen = async (catalogEdit: (yaml: string) => string) => {
        const h = await harness();
        await h.catalog(catalogEdit);
        const calls: Array<{ role: string; call: string }> = [];
        const onExec = reporting((fixed) =>
          junit(
            `<testcase name="ships free at 45"${fixed ? '/>' : '><failure message="45 paid"/></testcase>'}`,
          ),
        );
        const result = await runFix(
          h.options({ apply: false }),
          h.deps(
            scripted(fixingTurns),
            (command, options, sandbox) => {
              if (command === 'npm test') calls.push({ role: sandbox.labels.role ?? '', call: 'tests' });
              return onExec(command, options, sandbox);
            },
            (sandbox, spec) => {
              const role = spec.role ?? '';
              Object.assign(sandbox, {
                startChannel: (options?: { freezeWatch?: boolean }) =>
                  calls.push({
                    role,
                    call: options?.freezeWatch === false ? 'channel' : 'channel+watch',
                  }),
                watchFreeze: () => calls.push({ role, call: 'watch' }),
              });
            },
          ),
        );
        expect(result.outcome).toBe('ready-for-review');
        // Starting a channel is idempotent: made ahead, then taken, the agent's is asked twice.
        const own = calls.filter((c) => c.role !== 'baseline');
        return own.filter((c, i) => !(c.role === own[i - 1]?.role && c.call === own[i - 1]?.call));
      };
      // Tests alone decide: the verification is never frozen, so nothing waits to look.
      expect(await seen((yaml) => yaml)).toEqual([
        { role: 'attempt-1', call: 'channel+watch' },
        { role: 'verify-1', call: 'channel' },
        { role: 'verify-1', call: 'tests' },
      ]);
      // A report is read after a freeze: the look starts before the tests.
      expect(await seen(withReport())).toEqual([
        { role: 'attempt-1', call: 'channel+watch' },
        { role: 'verify-1', call: 'channel' },
        { role: 'verify-1', call: 'watch' },
        { role: 'verify-1', call: 'tests' },
      ]);
    });

    it('named tests decide: resolved with a failing exit code is a pass, with the exit code on record', async () => {
      const h = await harness();
      await h.catalog(
        withReport(
          '    failToPass: ["test/shipping.test.ts > ships free at 45"]\n    passToPass: ["test/shipping.test.ts::fee"]\n',
        ),
      );
      const onExec = reporting(
        (fixed) =>
          junit(
            `<testcase name="ships free at 45"${fixed ? '/>' : '><failure/></testcase>'}<testcase name="fee"/><testcase name="unrelated"><failure/></testcase>`,
          ),
        () => 1,
      );
      const result = await runFix(h.options({ apply: false }), h.deps(scripted(fixingTurns), onExec));
      expect(result.outcome).toBe('ready-for-review');
      expect(result.record.attempts[0]?.namedTests).toEqual({
        verdict: 'resolved',
        exitCode: 1,
        failToPass: { passed: 1, total: 1 },
        passToPass: { passed: 1, total: 1 },
        quarantined: [],
      });
    });

    it('a FAIL_TO_PASS test that is skipped or missing is not passed, whatever the exit code', async () => {
      for (const cases of [
        '<testcase name="ships free at 45"><skipped/></testcase>',
        '<testcase name="fee"/>',
      ]) {
        const h = await harness();
        await h.catalog(withReport('    failToPass: ["test/shipping.test.ts > ships free at 45"]\n'));
        const onExec = reporting(
          () => junit(cases),
          () => 0,
        );
        const result = await runFix(
          h.options({ apply: false, maxAttempts: 1, force: true }),
          h.deps(scripted(fixingTurns), onExec),
        );
        expect(result.outcome).toBe('failed');
        expect(result.record.attempts[0]).toMatchObject({
          verdict: 'tests-failed',
          namedTests: { verdict: 'unresolved', exitCode: 0, failToPass: { passed: 0, total: 1 } },
        });
        // The agent learns how many, never which (they may be held out).
        expect(result.record.attempts[0]?.feedback).toMatch(/1 of 1 tests that must start passing/);
        expect(result.record.attempts[0]?.feedback).not.toMatch(/ships free/);
      }
    });

    it('a hostile or missing report is refused with its reason, and nothing named passes', async () => {
      const lol = `<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa">]><testsuites><testcase name="&a;"/></testsuites>`;
      for (const [report, reason] of [
        [lol, /refused: the report declares a DOCTYPE/],
        [undefined, /wrote no report at reports\/junit.xml/],
      ] as const) {
        const h = await harness();
        await h.catalog(withReport('    failToPass: ["ships free at 45"]\n'));
        const result = await runFix(
          h.options({ apply: false, maxAttempts: 1 }),
          h.deps(
            scripted(fixingTurns),
            reporting(() => report),
          ),
        );
        expect(result.outcome).toBe('failed');
        const attempt = result.record.attempts[0]!;
        expect(attempt.testReport?.status).toBe('refused');
        expect(attempt.testReport?.reason).toMatch(reason);
        expect(attempt.namedTests?.verdict).toBe('no-report');
      }
    });
  });
});

describe('runFix: money', () => {
  const PRICES = '  prices:\n    scripted: { input: 2, output: 10 }\n';

  it("a record's cost is the price table times the model's usage, per attempt and per role", async () => {
    const h = await harness();
    await h.catalog((yaml) => yaml.replace('  maxTurns: 20\n', `  maxTurns: 20\n${PRICES}`));
    const turns: Turn[] = [
      { content: [FIX_EDIT], usage: { inputTokens: 1200, outputTokens: 40 } },
      { content: [text('fixed')], usage: { inputTokens: 1500, outputTokens: 20 } },
    ];
    const result = await runFix(h.options(), h.deps(scripted(turns)));
    expect(result.outcome).toBe('ready-for-review');
    const expected = ((1200 + 1500) * 2 + (40 + 20) * 10) / 1e6;
    expect(result.record.cost?.usd).toBeCloseTo(expected, 9);
    expect(result.record.cost?.byRole).toEqual({ main: result.record.cost?.usd });
    expect(result.record.attempts[0]?.costUsd).toBeCloseTo(expected, 9);
    expect(result.record.cost?.unpriced).toBeUndefined();
    // What is on disk says the same.
    const onDisk = JSON.parse(await readFile(join(result.runDir, 'run.json'), 'utf8'));
    expect(onDisk.cost.usd).toBeCloseTo(expected, 9);
  });

  it('a cost limit stops the run as `budget` before the next model call, and no further attempt starts', async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace('  maxTurns: 20\n', `  maxTurns: 20\n${PRICES}  costLimit: 0.01\n`),
    );
    // Each call costs 0.0105: the first reaches the limit, so the model is never asked again.
    const expensive: Turn[] = Array.from({ length: 10 }, (_, i) => ({
      content: [toolUse(`r${i}`, 'run_command', { command: 'true' })],
      usage: { inputTokens: 5000, outputTokens: 50 },
    }));
    const provider = scripted(expensive);
    const result = await runFix(h.options(), h.deps(provider));
    expect(result.outcome).toBe('budget');
    expect(exitCode(result)).toBe(1);
    expect(result.record.attempts).toHaveLength(1);
    expect(result.record.attempts[0]).toMatchObject({ agentStop: 'budget', verdict: 'budget', turns: 1 });
    expect(result.record.cost).toMatchObject({ limitUsd: 0.01 });
    expect(result.record.cost?.usd).toBeCloseTo(0.0105, 9);
    expect(result.record.message).toMatch(/cost limit \(\$0\.01\) was reached/);
  });

  it('--cost-limit overrides the catalog, and a limit on a model without a price is refused before anything runs', async () => {
    const h = await harness();
    const refused = runFix(h.options({ costLimitUsd: 1 }), h.deps(scripted(fixingTurns)));
    await expect(refused).rejects.toThrow(/has no price/);
    expect(h.created).toHaveLength(0);
  });
});

describe('runFix: docs and skills on demand', () => {
  it('the prompt lists the repo docs and skills, and the model reads one of each through read_doc and skill', async () => {
    const h = await harness();
    const doc = '# Shipping rules explained\nThe threshold comes from the catalog.\n';
    const skill =
      '---\nname: fee-change\ndescription: When a ticket changes a fee or threshold\n---\nChange the constant only.\n';
    const { mkdir } = await import('node:fs/promises');
    await mkdir(join(h.repo, 'docs'), { recursive: true });
    await mkdir(join(h.repo, 'skills', 'fee-change'), { recursive: true });
    await writeFile(join(h.repo, 'docs', 'shipping.md'), doc);
    await writeFile(join(h.repo, 'skills', 'fee-change', 'SKILL.md'), skill);
    await h.catalog((yaml) => yaml.replace('  maxTurns: 20\n', '  maxTurns: 20\n  skills: ["skills/*"]\n'));
    const turns: Turn[] = [
      { content: [toolUse('d1', 'read_doc', { path: 'docs/shipping.md' })] },
      { content: [toolUse('s1', 'skill', { name: 'fee-change' })] },
      ...fixingTurns,
    ];
    const result = await runFix(
      h.options(),
      h.deps(scripted(turns), npmTest, undefined, {
        'docs/shipping.md': doc,
        'skills/fee-change/SKILL.md': skill,
      }),
    );
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.library).toEqual({ docs: ['docs/shipping.md'], skills: ['fee-change'] });
    const transcript = JSON.parse(await readFile(join(result.runDir, 'transcript.json'), 'utf8')) as {
      system: string;
      messages: { role: string; content: { type: string; content?: string }[] }[];
    }[];
    expect(transcript[0]?.system).toContain('- docs/shipping.md: Shipping rules explained');
    expect(transcript[0]?.system).toContain('- fee-change: When a ticket changes a fee or threshold');
    const results = transcript[0]!.messages.flatMap((m) => m.content.filter((b) => b.type === 'tool_result'));
    expect(results[0]?.content).toContain('The threshold comes from the catalog.');
    expect(results[1]?.content).toContain('Change the constant only.');
  });
});

describe('runFix: portable trajectories', () => {
  it('a run exports as ATIF that validates against the format, one agent step per model call, costs per step', async () => {
    const { runToAtif } = await import('../../../src/runs/atif.js');
    const { atifTrajectorySchema } = await import('../../helpers/atif-schema.js');
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace('  maxTurns: 20\n', '  maxTurns: 20\n  prices:\n    scripted: { input: 2, output: 10 }\n'),
    );
    const turns: Turn[] = [
      { content: [text('Let me fix it.'), FIX_EDIT], usage: { inputTokens: 1200, outputTokens: 40 } },
      { content: [text('fixed')], usage: { inputTokens: 1500, outputTokens: 20 } },
    ];
    const result = await runFix(h.options(), h.deps(scripted(turns)));
    const transcript = JSON.parse(await readFile(join(result.runDir, 'transcript.json'), 'utf8'));
    const events = (await readFile(join(result.runDir, 'events.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const atif = runToAtif(result.record, transcript, events);
    const parsed = atifTrajectorySchema.safeParse(atif);
    expect(parsed.success, parsed.success ? '' : parsed.error.message).toBe(true);
    expect(atif.steps.map((s) => s.source)).toEqual(['system', 'user', 'agent', 'agent']);
    const [, user, first, last] = atif.steps;
    expect(user?.message).toContain('OPS-412');
    expect(first?.tool_calls).toEqual([
      {
        tool_call_id: 'e1',
        function_name: 'edit_file',
        arguments: expect.objectContaining({ path: 'src/shipping.ts' }),
      },
    ]);
    expect(first?.observation?.results[0]).toMatchObject({ source_call_id: 'e1' });
    expect(first?.metrics).toEqual({
      prompt_tokens: 1200,
      completion_tokens: 40,
      cost_usd: (1200 * 2 + 40 * 10) / 1e6,
    });
    expect(last?.message).toBe('fixed');
    expect(atif.final_metrics).toMatchObject({
      total_prompt_tokens: 2700,
      total_completion_tokens: 60,
      total_cost_usd: result.record.cost?.usd,
      total_steps: 4,
    });
  });
});

describe('runFix --continue', () => {
  const WRONG_EDIT = toolUse('w1', 'edit_file', {
    path: 'src/shipping.ts',
    search: 'FREE_SHIPPING_THRESHOLD = 50;',
    replacement: 'FREE_SHIPPING_THRESHOLD = 40;',
  });

  it("starts from the earlier run's last patch and feedback, numbers attempts on, and reaches ready-for-review", async () => {
    const h = await harness();
    const failed = await runFix(
      h.options({ maxAttempts: 1 }),
      h.deps(scripted([{ content: [WRONG_EDIT] }, { content: [text('done')] }])),
    );
    expect(failed.outcome).toBe('failed');
    // The second run sees the first one's change already in its sandbox, and its test output.
    const finish = toolUse('f1', 'edit_file', {
      path: 'src/shipping.ts',
      search: 'FREE_SHIPPING_THRESHOLD = 40;',
      replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
    });
    const provider = scripted([{ content: [finish] }, { content: [text('fixed')] }]);
    const result = await runFix(h.options({ continueFrom: failed.runId }), h.deps(provider));
    expect(result.outcome).toBe('ready-for-review');
    expect(result.record.continuedFrom).toEqual({ runId: failed.runId, attempts: 1 });
    expect(result.record.attempts.map((a) => a.n)).toEqual([2]);
    expect(h.created.map((c) => c.spec.role)).toContain('attempt-2');
    const transcript = JSON.parse(await readFile(join(result.runDir, 'transcript.json'), 'utf8'));
    const first = JSON.stringify(transcript[0].messages[0]);
    expect(first).toContain(`continues run ${failed.runId}`);
    expect(first).toContain('src/shipping.ts');
    expect(first).toContain('not ok 2');
    expect(await readFile(join(h.repo, 'src', 'shipping.ts'), 'utf8')).toContain('= 39;');
  });

  it('a continued run of one attempt numbers it on without reading "attempt 2/1"', async () => {
    const h = await harness();
    const failed = await runFix(
      h.options({ maxAttempts: 1 }),
      h.deps(scripted([{ content: [WRONG_EDIT] }, { content: [text('done')] }])),
    );
    const lines: string[] = [];
    const progress: ProgressSink = {
      phase: (_phase, text) => lines.push(text),
      detail: () => undefined,
      end: () => undefined,
    };
    await runFix(
      h.options({ continueFrom: failed.runId, maxAttempts: 1, progress }),
      h.deps(scripted(fixingTurns)),
    );
    expect(lines).toContain('attempt 2/2');
    expect(lines.join('\n')).not.toMatch(/attempt 2\/1/);
  });

  it('a run whose patch no longer applies to the repo says so, and nothing runs', async () => {
    const h = await harness();
    const failed = await runFix(
      h.options({ maxAttempts: 1 }),
      h.deps(scripted([{ content: [WRONG_EDIT] }, { content: [text('done')] }])),
    );
    const file = join(h.repo, 'src', 'shipping.ts');
    await writeFile(file, (await readFile(file, 'utf8')).replace('= 50;', '= 45;'));
    const before = h.created.length;
    await expect(
      runFix(h.options({ continueFrom: failed.runId }), h.deps(scripted(fixingTurns))),
    ).rejects.toThrow(/no longer applies: src\/shipping.ts changed since that run/);
    expect(h.created.length).toBe(before);
  });
});

describe('runFix: the progress line', () => {
  it("says each phase and how it ended, in order, from the run's events (a failed attempt, then a verified one)", async () => {
    const h = await harness();
    const lines: string[] = [];
    const progress = {
      phase: (_p: string, text: string) => lines.push(`phase ${text}`),
      detail: () => undefined,
      end: (text: string) => lines.push(`end ${text}`),
    };
    const wrongEdit = toolUse('w1', 'edit_file', {
      path: 'src/shipping.ts',
      search: 'FREE_SHIPPING_THRESHOLD = 50;',
      replacement: 'FREE_SHIPPING_THRESHOLD = 49;',
    });
    const turns: Turn[] = [{ content: [wrongEdit] }, { content: [text('done')] }, ...fixingTurns];
    const result = await runFix(h.options({ progress, apply: false }), h.deps(scripted(turns)));
    expect(result.outcome).toBe('ready-for-review');
    expect(lines).toEqual([
      'phase checking catalog, ticket and model provider',
      'end shipping-service: ticket OPS-412, replay scripted',
      'phase sandbox image',
      'end memory:repo (cached)',
      'phase attempt 1/3',
      'end agent completed after 2 turns',
      'phase attempt 1: checking the change',
      'end tests fail in a fresh sandbox (test)',
      'phase attempt 2/3',
      'end agent completed after 2 turns',
      'phase attempt 2: checking the change',
      'end verified: 1 file(s), tests pass in a fresh sandbox',
    ]);
  });
});

describe('runFix: the progress line follows from the journal', () => {
  /** Every call of a progress sink, as a line. */
  function recorder(lines: string[]): ProgressSink {
    return {
      phase: (phase, text) => lines.push(`phase ${phase} ${text}`),
      detail: (text) => lines.push(`detail ${text}`),
      tick: (text) => lines.push(`tick ${text}`),
      end: (text) => lines.push(`end ${text}`),
    };
  }

  /**
   * The run's progress line is what its events say, line for line, but for the lines said
   * directly for a reason written where they are said (`direct`, in order): the checks before
   * the run and its journal exist, a tool call as it starts (a live line only: the call's one
   * line in a log is its end), an image build's steps (live lines only, the build log has them).
   */
  function expectProgressFollowsEvents(live: string[], events: MemoryEventSink, direct: string[]): void {
    const replayed: string[] = [];
    const follow = progressOfEvents(recorder(replayed));
    for (const event of events.events) follow.emit(event);
    expect(live.filter((line) => !direct.includes(line))).toEqual(replayed);
    expect(live.filter((line) => direct.includes(line))).toEqual(direct);
  }

  const validate = [
    'phase validate checking catalog, ticket and model provider',
    'end shipping-service: ticket OPS-412, replay scripted',
  ];
  const toolStart = 'tick turn 1: edit_file src/shipping.ts';

  it('for every step: image, baseline, attempts, the change checked, each test layer, review rounds, apply', async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace(
        'testCommand: npm test',
        'testCommand:\n    - { name: unit, command: npm test }\n    - { name: lint, command: "true" }',
      ),
    );
    const wrong = toolUse('w1', 'edit_file', {
      path: 'src/shipping.ts',
      search: 'FREE_SHIPPING_THRESHOLD = 50;',
      replacement: 'FREE_SHIPPING_THRESHOLD = 49;',
    });
    const maker = scripted([
      { content: [wrong] },
      { content: [text('done')] },
      { content: [HARD_CODE] },
      { content: [text('done')] },
      { content: [FIX_EDIT] },
      { content: [text('done')] },
    ]);
    const checker = scripted([
      { content: [toolUse('c1', 'read_file', { path: 'src/shipping.ts' })] },
      {
        content: [
          toolUse('r1', 'submit_review', {
            verdict: 'request-changes',
            summary: 'hard-coded',
            reasons: [{ text: 'use the constant' }],
          }),
        ],
      },
      { content: [toolUse('r2', 'submit_review', { verdict: 'approve', summary: 'fine', reasons: [] })] },
    ]);
    const deps = h.deps(maker, behaviour);
    const live: string[] = [];
    const events = new MemoryEventSink();
    const result = await runFix(h.options({ review: true, progress: recorder(live), events }), {
      ...deps,
      image: async (request) => {
        request.onProgress?.('Step 1/2 : FROM sandbox-harness/base-node:20');
        return deps.image(request);
      },
      createProvider: async (options: { role?: string }) => (options.role === 'checker' ? checker : maker),
    });
    expect(result.outcome).toBe('ready-for-review');
    expect(live).toEqual(
      expect.arrayContaining([
        'phase image sandbox image',
        'phase verify attempt 1: checking the change',
        'detail attempt 1: verifying in a fresh sandbox',
        'detail attempt 1: verifying (unit: npm test)',
        'detail attempt 2: verifying (lint: true)',
        'detail attempt 2: an independent checker reviews the change (round 1)',
        'detail attempt 3: an independent checker reviews the change (round 2)',
        'phase apply applying the verified patch to the host repo',
        'end 1 file(s) written',
      ]),
    );
    expectProgressFollowsEvents(live, events, [
      ...validate,
      'tick Step 1/2 : FROM sandbox-harness/base-node:20',
      toolStart,
      toolStart,
      toolStart,
    ]);
  });

  it('for a change that could not be applied, and a workspace that could not be made a git repository', async () => {
    const h = await harness();
    const deps = h.deps(scripted(fixingTurns));
    Object.assign(deps.backend, {
      workspaceGitImage: async () => ({ state: 'no-git', note: 'the image has no git' }),
    });
    // The host file changed since the image was built: the verified change is not written.
    const file = join(h.repo, 'src', 'shipping.ts');
    await writeFile(file, `${await readFile(file, 'utf8')}\n`);
    const live: string[] = [];
    const events = new MemoryEventSink();
    const result = await runFix(h.options({ progress: recorder(live), events }), deps);
    expect(result.outcome).toBe('not-applied');
    expect(live).toContain('detail note: the image has no git');
    expect(live).toContainEqual(expect.stringMatching(/^end not applied: /));
    expectProgressFollowsEvents(live, events, [...validate, toolStart]);
  });
});

describe('runFix: the baseline in the progress', () => {
  it("shows the baseline's verdict while the first attempt starts", async () => {
    const h = await harness();
    const lines: string[] = [];
    const progress = {
      phase: (_p: string, text: string) => lines.push(`phase ${text}`),
      detail: (text: string) => lines.push(`detail ${text}`),
      end: (text: string) => lines.push(`end ${text}`),
    };
    await runFix(h.options({ progress }), h.deps(scripted(fixingTurns)));
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^detail baseline: the tests fail on the untouched repo \(exit 1\), as a ticket expects in (?:\d+ms|\d+\.\ds)$/,
      ),
    );
  });

  it('says when the tests cannot import a package of the repo that is under src/ (no attempt can fix PYTHONPATH)', async () => {
    const h = await harness();
    await mkdir(join(h.repo, 'src', 'shopcalc'), { recursive: true });
    const lines: string[] = [];
    const progress = {
      phase: () => undefined,
      detail: (text: string) => lines.push(text),
      end: () => undefined,
    };
    const srcLayout: ExecHandler = (command, options, sandbox) =>
      command === 'npm test' &&
      !(sandbox.text('src/shipping.ts') ?? '').includes('FREE_SHIPPING_THRESHOLD = 39;')
        ? { exitCode: 2, stdout: "E   ModuleNotFoundError: No module named 'shopcalc'\n1 error in 0.2s\n" }
        : npmTest(command, options, sandbox);
    const result = await runFix(h.options({ progress }), h.deps(scripted(fixingTurns), srcLayout));
    expect(result.record.baseline).toMatchObject({ failing: true });
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^hint: the tests cannot import `shopcalc`, which is src\/shopcalc\/ in the repo/,
      ),
    );
  });

  it('a conftest that cannot import the src/ package: broken, and the error says to put src/ on PYTHONPATH', async () => {
    const h = await harness();
    await mkdir(join(h.repo, 'src', 'shopcalc'), { recursive: true });
    const conftest: ExecHandler = (command) =>
      command === 'npm test'
        ? {
            exitCode: 4,
            stdout:
              "> test\n> pytest -q\n\nImportError while loading conftest '/workspace/conftest.py'.\nconftest.py:1: in <module>\n    import shopcalc\nE   ModuleNotFoundError: No module named 'shopcalc'\n",
          }
        : { exitCode: 0 };
    const result = await runFix(h.options(), h.deps(scripted(fixingTurns), conftest));
    expect(result.outcome).toBe('error');
    expect(result.record.message).toContain(
      "pytest could not load /workspace/conftest.py: No module named 'shopcalc'",
    );
    expect(result.error?.hint).toMatch(
      /^The tests cannot import `shopcalc`, which is src\/shopcalc\/ in the repo/,
    );
    expect(result.error?.hint).toContain('PYTHONPATH: src');
    expect(result.error?.hint).toContain('sandbox-harness check');
  });

  it('a catalog setup on a backend that cannot fork is refused before any attempt starts or a model is asked', async () => {
    const h = await harness();
    await h.catalog((yaml) =>
      yaml.replace(/^sandbox:\n/m, 'sandbox:\n  setup: { command: "npm run build" }\n'),
    );
    const result = await runFix(h.options(), h.deps(scripted(fixingTurns)));
    expect(result.outcome).toBe('error');
    expect(result.error?.category).toBe('config');
    expect(result.error?.message).toContain('cannot fork a sandbox, which catalog sandbox.setup needs');
    expect(h.created.map((c) => c.spec.role)).not.toContain('attempt-1');
    expect(result.record.attempts).toEqual([]);
  });
});
