/** The small commands of the CLI, as a user runs them: help, validation, exec, gc, exit codes. */
import { describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { cleanEnv, runCli, ROOT } from '../helpers/cli.js';
import { FIXTURES, fixtureImage } from '../helpers/docker.js';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { randomBytes } from 'node:crypto';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';

describe('sandbox-harness CLI', () => {
  it('--help lists every command and the exit codes', async () => {
    const r = await runCli(['--help']);
    expect(r.code).toBe(0);
    for (const command of [
      'fix',
      'eval',
      'demo',
      'runs',
      'inspect',
      'logs',
      'shell',
      'rerun-tests',
      'gc',
      'catalog',
      'doctor',
      'setup',
      'images',
      'exec',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`\\n  ${command}\\b`));
    }
    expect(r.stdout).toMatch(/130\s+interrupted/);
  });

  it('an unknown option is a usage error (exit 2)', async () => {
    const r = await runCli(['fix', 'OPS-412', '--no-such-flag']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown option/);
  });

  it('catalog validate: 0 for a good catalog, 2 with file:line:col for a bad one', async () => {
    const good = await runCli([
      'catalog',
      'validate',
      join(ROOT, 'examples', 'shipping-service', 'shipping-service.yaml'),
    ]);
    expect(good.code).toBe(0);
    expect(good.stdout).toMatch(/^ok /);
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-cli-'));
    const bad = join(dir, 'bad.yaml');
    await writeFile(
      bad,
      'name: x\nowner: y\nrepo: .\nrules: {}\nagent:\n  editableFiles: [src/**]\n  testCommand: npm test\n  maxTurns: lots\n',
    );
    const r = await runCli(['catalog', 'validate', bad, '--json']);
    expect(r.code).toBe(2);
    const json = JSON.parse(r.stdout) as { ok: boolean; files: { problems: string[] }[] };
    expect(json.ok).toBe(false);
    expect(json.files[0]!.problems[0]).toMatch(/bad\.yaml:8:\d+ agent\.maxTurns: /);
  });

  it("images list names the engine by its address (DOCKER_HOST may be Podman's service), and lists the base", async () => {
    const local = await runCli(['images', 'list'], { env: cleanEnv() });
    expect(local.code, local.stderr).toBe(0);
    expect(local.stdout).toContain("this tool's images in the engine at unix:///var/run/docker.sock");
    expect(local.stdout).toMatch(/\nbase\s+sandbox-harness\/base-node:20\s/);
    const elsewhere = await runCli(['images', 'list'], {
      env: { ...cleanEnv(), DOCKER_HOST: 'unix:///run/podman/podman.sock' },
    });
    expect(elsewhere.code, elsewhere.stderr).toBe(0);
    expect(elsewhere.stdout).toContain('in the engine at unix:///run/podman/podman.sock');
    expect(elsewhere.stdout).not.toContain('Docker engine');
  });

  it('exec runs one command in a fresh sandbox of a repo and removes it', async () => {
    const r = await runCli([
      'exec',
      '--repo',
      join(FIXTURES, 'repos', 'conformance'),
      '--json',
      '--',
      'cat src/greeting.txt; id -u',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as { exitCode: number; stdout: string; container: string };
    expect(json.stdout).toBe('hello\n1000\n');
    expect(await dockerEngine().containers.inspect(json.container)).toBeUndefined();
    const gone = await runCli(['exec', '--image', 'sandbox-harness/no-such-image:x', '--', 'true']);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toMatch(/does not exist/);
    expect(gone.stderr).toMatch(/hint:/);
  });

  it('gc on real Docker: --all and --older-than only say with --dry-run, --run removes one run', async () => {
    // One kept container of a run of our own; every gc below either only reports, or is
    // limited to this run, so nothing else on the engine is touched.
    const runId = `cli-gc-${randomBytes(4).toString('hex')}`;
    const sandbox = await dockerBackend().create({
      image: await fixtureImage('conformance'),
      runId,
      role: 'gc',
    });
    await sandbox.dispose({ keep: true });
    type Report = { containers: { id: string; run: string; kept: boolean }[] };
    const planned = async (...args: string[]) => {
      const r = await runCli(['gc', ...args, '--dry-run', '--json']);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as Report).containers.filter((c) => c.run === runId);
    };
    try {
      expect(await planned()).toEqual([]);
      expect(await planned('--older-than', '1h')).toEqual([]);
      expect(await planned('--all')).toEqual([
        { id: sandbox.id, name: expect.any(String), run: runId, kept: true },
      ]);
      expect(await planned('--run', runId)).toHaveLength(1);
      // Where two catalogs leave the runs folder open, a whole run id still finds its run.
      const twoCatalogs = await mkdtemp(join(tmpdir(), 'sandbox-harness-gc-two-'));
      try {
        for (const name of ['a.yaml', 'b.yaml']) await writeFile(join(twoCatalogs, name), 'name: x\n');
        const here = await runCli(['gc', '--run', runId, '--dry-run', '--json'], { cwd: twoCatalogs });
        expect(here.code, here.stdout + here.stderr).toBe(0);
        expect((JSON.parse(here.stdout) as Report).containers.map((c) => c.run)).toEqual([runId]);
        // "last" needs the folder: it says so.
        const last = await runCli(['gc', '--run', 'last', '--dry-run', '--json'], { cwd: twoCatalogs });
        expect(last.code).toBe(2);
        expect(last.stdout).toContain('several catalogs found');
      } finally {
        await rm(twoCatalogs, { recursive: true, force: true });
      }
      expect(await dockerEngine().containers.inspect(sandbox.id)).toBeDefined();

      const removed = await runCli(['gc', '--run', runId]);
      expect(removed.code, removed.stderr).toBe(0);
      expect(removed.stdout).toMatch(
        new RegExp(`removed 1 container\\(s\\) and 0 image\\(s\\) of run ${runId}`),
      );
      expect(await dockerEngine().containers.inspect(sandbox.id)).toBeUndefined();
    } finally {
      await dockerEngine().containers.remove(sandbox.id);
    }
  });

  it("gc names the status file a warm pool left when its process died, and leaves a live pool's", async () => {
    const cache = await mkdtemp(join(tmpdir(), 'sandbox-harness-gc-cache-'));
    try {
      const dir = join(cache, 'sandbox-harness', 'pools');
      await mkdir(dir, { recursive: true });
      const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
      const deadPid = Number(dead.stdout.toString());
      const status = (pid: number) =>
        JSON.stringify({
          version: 1,
          pid,
          host: hostname(),
          owner: 'eval',
          engine: 'local',
          startedAt: '2026-12-02T10:00:00.000Z',
          updatedAt: '2026-12-02T10:00:00.000Z',
          stats: { ready: 1, starting: 0, handedOut: 0, cold: 0, discarded: 0 },
        });
      await writeFile(join(dir, `${deadPid}-1.json`), status(deadPid));
      await writeFile(join(dir, `${process.pid}-1.json`), status(process.pid));
      const r = await runCli(['gc', '--dry-run', '--json'], { env: cleanEnv({ XDG_CACHE_HOME: cache }) });
      expect(r.code, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as { pools: unknown }).pools).toEqual([
        { pid: deadPid, owner: 'eval', engine: 'local' },
      ]);
      // A dry run removes nothing.
      expect((await readdir(dir)).sort()).toEqual([`${deadPid}-1.json`, `${process.pid}-1.json`].sort());
    } finally {
      await rm(cache, { recursive: true, force: true });
    }
  });

  it('a bad number is refused where the flag is read: exit 2, the flag, what was expected, before anything runs', async () => {
    const fix = await runCli(['fix', 'OPS-412', '--max-attempts', '11']);
    expect(fix.code).toBe(2);
    expect(fix.stderr).toContain('error: --max-attempts: expected an integer from 1 to 10, got "11"');
    const json = await runCli(['eval', 'no-such-suite.yaml', '-n', 'many', '--json']);
    expect(json.code).toBe(2);
    expect((JSON.parse(json.stdout) as { error: unknown }).error).toMatchObject({
      code: 'USAGE',
      message: '-n: expected an integer from 1 to 1000, got "many"',
    });
    // Before the run is looked up: an empty folder has no runs, and that is not what is said.
    const empty = await mkdtemp(join(tmpdir(), 'sandbox-harness-cli-'));
    const shell = await runCli(['shell', 'last', '--attempt', '0'], { cwd: empty });
    expect(shell.code).toBe(2);
    expect(shell.stderr).toContain('error: --attempt: expected an attempt number (1, 2, ...), got "0"');
  });

  it('gc refuses a malformed age or run id (exit 2)', async () => {
    const r = await runCli(['gc', '--older-than', 'yesterday']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/expected a duration such as 30m, 24h or 7d, got "yesterday"/);
    const run = await runCli(['gc', '--run', 'a run; rm -rf /']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /--run: expected a run id, a unique prefix of one, or "last", got "a run; rm -rf \/"/,
    );
  });
});
