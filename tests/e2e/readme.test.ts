/**
 * The README is tested: every command of its "Using it" section runs as written, in order,
 * in a fresh copy of this checkout after the documented set-up (`scripts/setup.sh`, then
 * `npm link` into a private prefix, so `sandbox-harness` is on PATH as the README says).
 * Where a model is needed (the `--provider anthropic` fix) the fake model server answers
 * through the real SDK with a recorded conversation in which the model gives up, so the run
 * fails and keeps its container for `shell` and `rerun-tests`, as those lines promise.
 * `shell` gets a terminal from `script(1)` and the test types into it.
 *
 * A README command this file has no expectation for fails the test: a new line in the
 * README must say here what it should do.
 */
import { execFile, spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import type { AssistantContent } from '../../src/llm/types.js';
import { startFakeModelServer, type FakeModelServer } from '../fake-model-server/server.js';
import { canaryEnv, expectNoCanaryIn } from '../helpers/canary.js';
import { ROOT } from '../helpers/cli.js';

const run = promisify(execFile);

/** The commands of the first bash block of the README's "Using it" section, comments cut. */
function usingItCommands(readme: string): string[] {
  const start = readme.indexOf('\n## Using it');
  if (start < 0) throw new Error('README.md has no "## Using it" section');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const block = /```bash\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('the "Using it" section of README.md has no ```bash block');
  return block[1]!
    .split('\n')
    .map((line) => line.replace(/\s+#\s.*$/, '').trim())
    .filter((line) => line !== '');
}

interface Ran {
  command: string;
  code: number | null;
  stdout: string;
  stderr: string;
}

/** What each README line must do here; the first matching pattern applies. */
const EXPECTATIONS: { pattern: RegExp; code: number; check: (r: Ran) => void }[] = [
  {
    pattern: /^sandbox-harness doctor$/,
    code: 0,
    check: (r) => expect(r.stdout).toMatch(/sandbox-container/),
  },
  {
    // The model gives up every attempt: failed (exit 1), the last container kept.
    pattern: /^sandbox-harness fix .* --provider anthropic$/,
    code: 1,
    check: (r) => expect(r.stdout + r.stderr).toMatch(/failed/),
  },
  { pattern: /^sandbox-harness runs$/, code: 0, check: (r) => expect(r.stdout).toMatch(/OPS-412\s+failed/) },
  {
    // Serves until Ctrl-C: the test opens the printed URL, then stops it (exit 0).
    pattern: /^sandbox-harness view$/,
    code: 0,
    check: (r) => {
      expect(r.stdout).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\S+\/$/m);
      expect(r.stdout).toMatch(/--- page \(HTTP 200\) ---\n<!doctype html>[\s\S]*OPS-412/);
    },
  },
  {
    pattern: /^sandbox-harness inspect last$/,
    code: 0,
    check: (r) => expect(r.stdout).toMatch(/outcome\s+failed/),
  },
  { pattern: /^sandbox-harness logs last$/, code: 0, check: (r) => expect(r.stdout).toMatch(/read_file/) },
  {
    // Typed into the shell: who it runs as, where, and whether the network is there.
    pattern: /^sandbox-harness shell last$/,
    code: 0,
    check: (r) => {
      expect(r.stdout).toMatch(/uid=1000/);
      expect(r.stdout).toMatch(/pwd=\/workspace/);
      expect(r.stdout).toMatch(/ifaces=lo\b/);
    },
  },
  {
    // The tests still fail in the kept container: exit 1, with the failing test named.
    pattern: /^sandbox-harness rerun-tests last$/,
    code: 1,
    check: (r) => expect(r.stdout).toMatch(/not ok .*45 EUR/),
  },
  {
    pattern: /^sandbox-harness gc --run last$/,
    code: 0,
    check: (r) => expect(r.stdout).toMatch(/removed [1-9]\d* container\(s\) and 0 image\(s\) of run /),
  },
  {
    pattern: /^sandbox-harness eval examples\/evals\/suite\.yaml -n \d+$/,
    code: 0,
    check: (r) => expect(r.stdout).toMatch(/fixes-threshold/),
  },
  {
    // The bundled example and examples/parcels, resolved by their gold patches.
    pattern: /^sandbox-harness eval examples\/instances\/suite\.yaml --oracle$/,
    code: 0,
    check: (r) => {
      expect(r.stdout).toMatch(/example-instances: 2\/2 passed/);
      expect(r.stdout).toMatch(/every gold patch resolved its instance/);
    },
  },
  {
    pattern: /^sandbox-harness eval examples\/instances\/suite\.yaml$/,
    code: 0,
    check: (r) => expect(r.stdout).toMatch(/example-instances: 2\/2 passed/),
  },
  {
    // The bundled example's OPS-412 as a Harbor task folder, its recorded session scored 1.0.
    pattern: /^sandbox-harness eval examples\/harbor\/suite\.yaml$/,
    code: 0,
    check: (r) => {
      expect(r.stdout).toMatch(/example-harbor: 1\/1 passed/);
      expect(r.stdout).toMatch(/shipping-ops-412 +mean reward 1\.00/);
    },
  },
  {
    pattern: /^sandbox-harness catalog validate catalog\/\*\.yaml$/,
    code: 0,
    check: (r) => expect(r.stdout).toMatch(/^ok\s+catalog\/shipping-service\.yaml/m),
  },
  {
    // The fix above failed, so the example's tests still fail: npm test's exit code, 1.
    pattern: /^sandbox-harness exec --repo examples\/shipping-service\/repo -- npm test$/,
    code: 1,
    check: (r) => expect(r.stdout + r.stderr).toMatch(/# fail [1-9]/),
  },
];

/** The tracked and new (not ignored) files of this checkout, as a fresh clone of it would have them. */
async function freshCopy(into: string): Promise<void> {
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  for (const file of stdout.split('\0').filter(Boolean)) {
    await mkdir(dirname(join(into, file)), { recursive: true });
    // A file deleted in the working tree but still tracked is not part of the copy.
    await cp(join(ROOT, file), join(into, file), { verbatimSymlinks: true }).catch(
      (error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      },
    );
  }
}

function runIn(cwd: string, command: string, env: NodeJS.ProcessEnv, input?: string): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', command], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // A command that exits without reading its input closes the pipe first: EPIPE here is
    // not the command's result (seen once in CI as an uncaught exception failing the run).
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
    child.on('close', (code) => resolve({ command, code, stdout, stderr }));
  });
}

/**
 * Runs a command that serves until Ctrl-C: waits for the URL it prints, fetches it (the
 * page goes into stdout after a marker), then interrupts it like a user would.
 */
function serveFetchAndStop(cwd: string, command: string, env: NodeJS.ProcessEnv): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', `exec ${command}`], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let fetched = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      const url = /^(http:\/\/127\.0\.0\.1:\d+\/\S*)$/m.exec(stdout)?.[1];
      if (!url || fetched) return;
      fetched = true;
      fetch(url)
        .then(async (res) => `\n--- page (HTTP ${res.status}) ---\n${await res.text()}`)
        .catch((error: unknown) => `\n--- page: ${String(error)} ---\n`)
        .then((page) => {
          stdout += page;
          child.kill('SIGINT');
        }, reject);
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ command, code, stdout, stderr });
    });
  });
}

describe('README "Using it"', () => {
  let scratch: string;
  let clone: string;
  let server: FakeModelServer | undefined;
  let env: NodeJS.ProcessEnv;
  let canary: string;
  const runIds: string[] = [];

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    scratch = await mkdtemp(join(tmpdir(), 'sandbox-harness-readme-'));
    clone = join(scratch, 'sandbox-harness');
    await freshCopy(clone);

    const givesUp = JSON.parse(
      await readFile(join(ROOT, 'examples', 'evals', 'cassettes', 'gives-up.json'), 'utf8'),
    ) as { turns: { content: AssistantContent[] }[] };
    // maxAttempts is 3 in the catalog: the same give-up conversation for each attempt.
    const turns = [1, 2, 3].flatMap(() => givesUp.turns.map((t) => ({ reply: { content: t.content } })));
    server = await startFakeModelServer(turns);
    const prefix = join(scratch, 'npm-global');
    ({ env, canary } = canaryEnv({
      ANTHROPIC_BASE_URL: server.anthropicBaseUrl,
      npm_config_prefix: prefix,
      PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}`,
    }));

    // The set-up the README asks for, then `npm link` (into the private prefix above).
    const setup = await runIn(clone, 'bash scripts/setup.sh', env);
    expect(setup.code, setup.stderr).toBe(0);
    const link = await runIn(clone, 'npm link --no-audit --no-fund', env);
    expect(link.code, link.stderr).toBe(0);
    expect((await runIn(clone, 'command -v sandbox-harness', env)).stdout.trim()).toBe(
      join(prefix, 'bin', 'sandbox-harness'),
    );
  }, 900_000);

  afterAll(async () => {
    // Only what this test made: its fix run's containers (if a step above failed before
    // `gc --run last` did it), then the copy.
    for (const runId of runIds) await runIn(clone, `sandbox-harness gc --run ${runId}`, env);
    await server?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('every command runs as written and does what its line says', async () => {
    const commands = usingItCommands(await readFile(join(clone, 'README.md'), 'utf8'));
    expect(commands.length).toBeGreaterThanOrEqual(10);
    for (const command of commands) {
      const expectation = EXPECTATIONS.find((e) => e.pattern.test(command));
      if (!expectation)
        throw new Error(`README command without an expectation in readme.test.ts: ${command}`);
      const started = Date.now();
      const result =
        command === 'sandbox-harness view'
          ? await serveFetchAndStop(clone, command, env)
          : command === 'sandbox-harness shell last'
            ? // A terminal for the shell; the typed lines answer the checks above, then `exit`.
              await runIn(
                clone,
                `script -qec ${JSON.stringify(command)} /dev/null`,
                env,
                'echo "uid=$(id -u) pwd=$(pwd) ifaces=$(ls /sys/class/net | tr "\\n" " ")"; exit\n',
              )
            : await runIn(clone, command, env);
      process.stderr.write(`readme: ${command}: exit ${result.code} in ${Date.now() - started} ms\n`);
      if (/^sandbox-harness fix /.test(command)) {
        const runs = await runIn(clone, 'sandbox-harness runs --json', env);
        runIds.push(...(JSON.parse(runs.stdout) as { id: string }[]).map((r) => r.id));
      }
      expect(result.code, `${command}\n${result.stdout}\n${result.stderr}`).toBe(expectation.code);
      expectation.check(result);
      expectNoCanaryIn(canary, result.stdout + result.stderr, `the output of ${command}`);
    }
    // `gc --run last` removed the kept containers of the fix run; nothing of it is left.
    expect(runIds).toHaveLength(1);
    expect(await dockerEngine().containers.list({ [LABEL.run]: runIds[0]! })).toEqual([]);
  }, 1_200_000);
});
