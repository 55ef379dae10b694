/**
 * The command channel (`exec(..., { fast: true })`) keeps every semantic of one exec per
 * command: exit codes, stdout and stderr apart, multi-line commands, the timeout killing the
 * whole tree, Ctrl-C, output caps, background children cut off. Each case runs both ways on
 * the same real Docker sandbox, and the channel must agree.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { EngineExec } from '../../src/sandbox/docker/engine/index.js';
import type { Sandbox } from '../../src/sandbox/types.js';
import { fixtureImage } from '../helpers/docker.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await dockerBackend().create({ image: await fixtureImage('conformance'), role: 'channel' });
});
afterAll(async () => {
  await sandbox.dispose();
});

async function processes(pattern: string): Promise<number> {
  const r = await sandbox.exec(
    `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '${pattern}' || true`,
  );
  expect(r.exitCode).toBe(0);
  return Number(r.stdout.trim());
}

describe.each([
  ['one exec per command', false],
  ['the command channel', true],
])('exec semantics over %s', (_name, fast) => {
  it('exit code, stdout and stderr apart, a multi-line command, the workspace as cwd', async () => {
    const r = await sandbox.exec('echo out; echo err >&2\nprintf "two\\nlines"; pwd >&2; exit 7', { fast });
    expect(r).toMatchObject({ exitCode: 7, stdout: 'out\ntwo\nlines', timedOut: false, truncated: false });
    expect(r.stderr).toBe('err\n/workspace\n');
  });

  it('text that looks like the channel protocol is just output', async () => {
    const r = await sandbox.exec("printf '\\0SHX 0000 0\\0 and 3 2 1\\n'", { fast });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe('\0SHX 0000 0\0 and 3 2 1\n');
  });

  it('kills the whole tree at the timeout, a child that left the process group included', async () => {
    const r = await sandbox.exec(`setsid sh -c "sleep 41${fast ? 1 : 2}" & sleep 43${fast ? 1 : 2}`, {
      fast,
      timeoutMs: 2000,
    });
    expect(r.timedOut).toBe(true);
    expect(await processes(`[s]leep 4[13]${fast ? 1 : 2}`)).toBe(0);
  });

  it('stops at once on Ctrl-C and kills the command, then serves the next one', async () => {
    const controller = new AbortController();
    const pending = sandbox.exec(`sleep 44${fast ? 1 : 2}`, {
      fast,
      signal: controller.signal,
      timeoutMs: 60_000,
    });
    await new Promise((r) => setTimeout(r, 300));
    // The command line of `sleep` itself, not of the shells that started it.
    expect(await processes(`^[s]leep 44${fast ? 1 : 2}`)).toBe(1);
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'INTERRUPTED' });
    expect(await processes(`^[s]leep 44${fast ? 1 : 2}`)).toBe(0);
    expect((await sandbox.exec('echo next', { fast })).stdout).toBe('next\n');
  });

  it('caps a flood of output to its head and tail', async () => {
    const r = await sandbox.exec('seq 1 200000', { fast, maxOutputBytes: 4096 });
    expect(r.truncated).toBe(true);
    expect(r.stdout.startsWith('1\n2\n3\n')).toBe(true);
    expect(r.stdout.endsWith('199999\n200000\n')).toBe(true);
    expect(r.stdout.length).toBeLessThan(5000);
  });

  it('does not wait for a background child, and its later output reaches no other command', async () => {
    const started = Date.now();
    const r = await sandbox.exec('(sleep 1; echo late) & echo now', { fast });
    expect(r.stdout).toBe('now\n');
    expect(Date.now() - started).toBeLessThan(15_000);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await sandbox.exec('echo clean', { fast })).stdout).toBe('clean\n');
  });
});

describe('the command channel over many commands', () => {
  it('answers each of a hundred commands with its own output and exit code, and keeps its relay folder small', async () => {
    for (let i = 0; i < 100; i++) {
      const r = await sandbox.exec(`echo out${i}; echo err${i} >&2; exit ${i % 7}`, { fast: true });
      expect([r.stdout, r.stderr, r.exitCode]).toEqual([`out${i}\n`, `err${i}\n`, i % 7]);
    }
    // Relays are made and removed in batches; they must not pile up with every command.
    const left = await sandbox.exec('ls /tmp/.sandbox-harness-channel-*/ | wc -l', { fast: true });
    expect(Number(left.stdout.trim())).toBeGreaterThan(0);
    expect(Number(left.stdout.trim())).toBeLessThanOrEqual(3 * 48);
  });
});

describe('file calls over the command channel', () => {
  it('read, write and list with no exec of their own once the channel runs, bytes exact', async () => {
    await sandbox.exec('true', { fast: true });
    const execs = vi.spyOn(EngineExec.prototype, 'start');
    try {
      const bytes = Buffer.from([0, 1, 2, 255, 10, 0x53, 0x48, 0x58, 0]);
      await sandbox.writeFiles([{ path: 'channel/bin.dat', content: bytes, mode: 0o600 }], { fast: true });
      expect(await sandbox.readFile('channel/bin.dat', { fast: true })).toEqual(bytes);
      const listed = await sandbox.listFiles('channel', { fast: true });
      expect(listed).toEqual([{ path: 'channel/bin.dat', type: 'file', size: bytes.length }]);
      expect(execs).not.toHaveBeenCalled();
    } finally {
      execs.mockRestore();
    }
    // The same file, read by one exec, agrees.
    expect(await sandbox.readFile('channel/bin.dat')).toEqual(
      Buffer.from([0, 1, 2, 255, 10, 0x53, 0x48, 0x58, 0]),
    );
  });

  it('input over the cap goes by exec, and what follows is still in step', async () => {
    const big = Buffer.alloc(2 * 1024 * 1024, 0x61);
    await sandbox.writeFiles([{ path: 'channel/big.txt', content: big }], { fast: true });
    expect(
      (await sandbox.readFile('channel/big.txt', { fast: true, maxBytes: 4 * 1024 * 1024 })).length,
    ).toBe(big.length);
    expect((await sandbox.exec('echo after', { fast: true })).stdout).toBe('after\n');
  });
});

describe('the command channel when its process is killed', () => {
  it('says the command may not have run, and later commands use plain execs', async () => {
    const box = await dockerBackend().create({
      image: await fixtureImage('conformance'),
      role: 'channel-kill',
    });
    try {
      expect((await box.exec('echo warm', { fast: true })).stdout).toBe('warm\n');
      // The agent kills the channel's server (same user): the command it ran dies with it.
      const r = await box.exec(
        "for p in /proc/[0-9]*; do grep -q '[s]andbox-channel' $p/cmdline 2>/dev/null && kill -9 ${p#/proc/}; done; sleep 1",
        { fast: true },
      );
      expect(r.exitCode).toBe(125);
      expect(r.stderr).toMatch(/may or may not have completed/);
      expect((await box.exec('echo still here', { fast: true })).stdout).toBe('still here\n');
    } finally {
      await box.dispose();
    }
  });
});
