/**
 * Round three of isolation, on real Docker: a freeze that no process of the agent can
 * outlive (the container's init and keep-alive are root's, so the sandbox user can neither
 * trace, signal nor write them), and a command channel whose output is bounded on the host
 * and whose frames cannot be forged by the command it runs.
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { dockerBackend, ExecTransport } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine, EngineContainers } from '../../src/sandbox/docker/engine/index.js';
import { standbyScript } from '../../src/sandbox/posix/exec.js';
import { PosixSandbox } from '../../src/sandbox/posix/posix-sandbox.js';
import { SURVIVORS_SCRIPT } from '../../src/sandbox/posix/scripts.js';
import type { Sandbox } from '../../src/sandbox/types.js';
import { fixtureImage } from '../helpers/docker.js';

const made: Sandbox[] = [];
afterAll(async () => {
  await Promise.all(made.map((s) => s.dispose().catch(() => undefined)));
});

async function make(): Promise<Sandbox> {
  const sandbox = await dockerBackend().create({
    image: await fixtureImage('conformance'),
    role: 'isolation',
    runId: 'isolation-test',
  });
  made.push(sandbox);
  return sandbox;
}

/** Pids of the processes every sandbox starts with: docker-init (1) and the keep-alive. */
async function spared(sandbox: Sandbox): Promise<string[]> {
  const r = await sandbox.exec(
    "for d in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $d/cmdline 2>/dev/null); case $c in 'sleep infinity '*) echo ${d#/proc/} ;; esac; done",
  );
  return ['1', ...r.stdout.trim().split('\n').filter(Boolean)];
}

describe('a freeze nothing survives', () => {
  it('runs init and the keep-alive as root, so no agent process can trace, write or signal them', async () => {
    const sandbox = await make();
    const pids = await spared(sandbox);
    expect(pids).toHaveLength(2);
    for (const pid of pids) {
      const uid = await sandbox.exec(`awk '/^Uid:/ { print $2 }' /proc/${pid}/status`);
      expect(uid.stdout.trim()).toBe('0');
      // Opening /proc/<pid>/mem for writing takes the same check as PTRACE_ATTACH.
      const mem = await sandbox.exec(`exec 3<> /proc/${pid}/mem && echo OPENED`);
      expect(mem.stdout).not.toContain('OPENED');
      expect(mem.stderr).toMatch(/Permission denied|Operation not permitted/);
      const stop = await sandbox.exec(`kill -STOP ${pid}`);
      expect(stop.exitCode).not.toBe(0);
      expect(stop.stderr).toMatch(/not permitted|EPERM/i);
    }
    const self = await sandbox.exec('id -u');
    expect(self.stdout.trim()).toBe('1000');
  });

  it('leaves no background writer able to change a file after the freeze', async () => {
    const sandbox = await make();
    await sandbox.exec('(while :; do date >> ticks.txt; sleep 0.02; done) > /dev/null 2>&1 &');
    await sandbox.exec('nohup sh -c "while :; do echo x >> ticks2.txt; sleep 0.02; done" > /dev/null 2>&1 &');
    await new Promise((r) => setTimeout(r, 300));
    await sandbox.freeze();
    const sizes = async () =>
      (await sandbox.exportFiles(['ticks.txt', 'ticks2.txt'])).files.map((f) => f.content.length);
    const first = await sizes();
    expect(first).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 500));
    expect(await sizes()).toEqual(first);
  });

  it('the check after the freeze, run as root, finds a process of the sandbox user and fails', async () => {
    const sandbox = await make();
    await sandbox.exec('sleep 600 > /dev/null 2>&1 &');
    const engine = (await import('../../src/sandbox/docker/engine/index.js')).dockerEngine();
    const { runScript } = await import('../../src/sandbox/posix/exec.js');
    const { ExecTransport } = await import('../../src/sandbox/docker/docker-sandbox.js');
    const transport = new ExecTransport(engine, sandbox.id);
    const before = await runScript(transport, SURVIVORS_SCRIPT, [], {
      maxStdoutBytes: 4096,
      cwd: '/',
      user: 'root',
    });
    expect(before.exitCode).toBe(49);
    expect(before.stdout.toString()).toMatch(/^\d+ S 1000 1000 1000 1000$/m);
    await sandbox.freeze();
    const after = await runScript(transport, SURVIVORS_SCRIPT, [], {
      maxStdoutBytes: 4096,
      cwd: '/',
      user: 'root',
    });
    expect(after.exitCode).toBe(0);
    expect(after.stdout.toString()).toMatch(/^clear \d+$/m);
  });

  it('a freeze over the channel that stops nothing is not believed: root never sees clear, the hard freeze follows', async () => {
    const sandbox = await make();
    await sandbox.exec('(while :; do date >> ticks.txt; sleep 0.02; done) > /dev/null 2>&1 &', {
      fast: true,
    });
    // The freeze script as a hostile process would leave it: sent, and nothing stopped.
    const quiet = vi
      .spyOn(
        PosixSandbox.prototype as unknown as { stopProcesses: () => Promise<undefined> },
        'stopProcesses',
      )
      .mockResolvedValue(undefined);
    const restarts = vi.spyOn(EngineContainers.prototype, 'restart');
    try {
      await sandbox.freeze();
      expect(restarts).toHaveBeenCalledTimes(1);
    } finally {
      quiet.mockRestore();
      restarts.mockRestore();
    }
    const size = async () => (await sandbox.readFile('ticks.txt')).length;
    const first = await size();
    await new Promise((r) => setTimeout(r, 300));
    expect(await size()).toBe(first);
  }, 60_000);

  it('a script on standby runs only on go (as root, with its arguments); one cancelled never runs', async () => {
    const sandbox = await make();
    const transport = new ExecTransport(dockerEngine(), sandbox.id);
    const options = { maxStdoutBytes: 1024, cwd: '/', user: 'root' } as const;
    const script = 'echo "$1 $(id -u)" > "/tmp/standby-$1"; cat "/tmp/standby-$1"';
    const [ran, cancelled] = await Promise.all([
      standbyScript(transport, script, ['one'], options),
      standbyScript(transport, script, ['two'], options),
    ]);
    expect(ran?.waiting).toBe(true);
    expect(cancelled?.waiting).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect((await sandbox.exec('ls /tmp')).stdout).not.toContain('standby-');
    const result = await ran!.go();
    expect(result.exitCode).toBe(0);
    expect(result.stdout.toString()).toBe('one 0\n');
    expect(ran!.waiting).toBe(false);
    cancelled!.cancel();
    expect(cancelled!.waiting).toBe(false);
    // The cancelled one ends on its stdin's end without running.
    let left = '1';
    for (let i = 0; i < 50 && left !== '0'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = (
        await sandbox.exec(
          "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '[r]ead -r _' || true",
        )
      ).stdout.trim();
    }
    expect(left).toBe('0');
    expect((await sandbox.exec('ls /tmp')).stdout).not.toContain('standby-two');
  });
});

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('the command channel under a hostile command', () => {
  it('a forged end frame, with the real token, neither ends the output nor fakes the exit code', async () => {
    const sandbox = await make();
    const forged = `printf '\\0SHX %s 0\\0' "$SANDBOX_HARNESS_EXEC"; printf '\\0SHX %s 0\\0' "$SANDBOX_HARNESS_EXEC" >&2; echo after; exit 3`;
    const r = await sandbox.exec(forged, { fast: true });
    expect(r.exitCode).toBe(3);
    expect(r.stdout).toMatch(/^\0SHX [0-9a-f]+ 0\0after\n$/);
    expect(r.stderr).toMatch(/^\0SHX [0-9a-f]+ 0\0$/);
    // The channel is still in step for the next command.
    expect(await sandbox.exec('echo next; exit 4', { fast: true })).toMatchObject({
      exitCode: 4,
      stdout: 'next\n',
    });
  });

  it("keeps the host's memory bounded when a command opens a frame and floods past the cap", async () => {
    // In a child process of its own, so its peak memory is this case's alone.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'tests/helpers/channel-flood.mjs'), join(ROOT, 'dist'), await fixtureImage('conformance')],
      { timeout: 170_000, maxBuffer: 1024 * 1024 },
    );
    const result = JSON.parse(stdout.trim().split('\n').pop()!) as {
      code: number;
      truncated: boolean;
      length: number;
      before: number;
      peak: number;
    };
    expect(result).toMatchObject({ code: 5, truncated: true });
    expect(result.length).toBeLessThan(70_000);
    // 300 MB went through; the process may hold its cap and some buffers, never the flood.
    expect(result.peak - result.before).toBeLessThan(120 * 1024 * 1024);
  }, 180_000);
});
