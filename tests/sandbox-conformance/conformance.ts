/**
 * The sandbox contract, as tests. Every backend must pass these; `docker.test.ts` runs
 * them against real Docker. They pin the security baseline (no network, no host
 * variables, no root, no capabilities), resource limits, exec semantics and the diff.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../../src/sandbox/types.js';

export interface ConformanceTarget {
  name: string;
  backend: () => SandboxBackend;
  /** An image whose /workspace holds tests/fixtures/repos/conformance. */
  image: () => Promise<string>;
  /** The environment variables the backend itself reports for a sandbox (e.g. the daemon's Config.Env). */
  reportedEnv?: (sandbox: Sandbox) => Promise<string[]>;
  /** An address outside the sandbox that a networked process on this host could reach. */
  outsideAddress?: () => string;
}

/** Processes whose command line (spaces for NULs) matches `pattern`, read from /proc. */
async function processesMatching(sandbox: Sandbox, pattern: string): Promise<number> {
  const r = await sandbox.exec(
    `for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < "$f" 2>/dev/null; echo; done | grep -c '${pattern}' || true`,
  );
  return Number(r.stdout.trim());
}

export function describeSandboxConformance(target: ConformanceTarget): void {
  describe(`sandbox conformance: ${target.name}`, () => {
    const created: Sandbox[] = [];
    let image = '';
    const make = async (spec: Partial<SandboxSpec> = {}) => {
      const sandbox = await target.backend().create({ image, role: 'conformance', ...spec });
      created.push(sandbox);
      return sandbox;
    };

    beforeAll(async () => {
      image = await target.image();
    });

    afterAll(async () => {
      await Promise.all(created.map((s) => s.dispose().catch(() => undefined)));
    });

    describe('isolation', () => {
      let sandbox: Sandbox;
      const canary = `canary-${Math.random().toString(36).slice(2)}`;
      beforeAll(async () => {
        process.env.SANDBOX_CANARY_TOKEN = canary;
        sandbox = await make({ env: { VISIBLE_ON_PURPOSE: 'yes' } });
      });
      afterAll(() => {
        delete process.env.SANDBOX_CANARY_TOKEN;
      });

      it('has no network interface but lo', async () => {
        const r = await sandbox.exec('awk -F: \'NR>2 {gsub(/ /, "", $1); print $1}\' /proc/net/dev');
        expect(r.exitCode).toBe(0);
        expect(r.stdout.trim().split('\n')).toEqual(['lo']);
      });

      it('cannot resolve a host name', async () => {
        const r = await sandbox.exec(
          `node -e "require('dns').lookup('registry.npmjs.org', (e) => { console.log(e ? e.code : 'resolved'); process.exit(e ? 1 : 0) })"`,
          { timeoutMs: 20_000 },
        );
        expect(r.exitCode).toBe(1);
        expect(r.stdout).not.toContain('resolved');
      });

      it('cannot open a TCP connection out of the sandbox', async () => {
        // No interface routes anywhere, so connect() fails at once and no packet leaves.
        const address = target.outsideAddress?.() ?? '192.0.2.1';
        const r = await sandbox.exec(
          `node -e "const s=require('net').connect(443,'${address}');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',(e)=>{console.log(e.code);process.exit(1)})"`,
          { timeoutMs: 20_000 },
        );
        expect(r.exitCode).toBe(1);
        expect(r.stdout.trim()).toMatch(/ENETUNREACH|EHOSTUNREACH|ECONNREFUSED/);
      });

      it("sees none of the host process's variables", async () => {
        const env = await sandbox.exec('env');
        expect(env.stdout).not.toContain(canary);
        expect(env.stdout).not.toContain('SANDBOX_CANARY_TOKEN');
        expect(env.stdout).toContain('VISIBLE_ON_PURPOSE=yes');
        const init = await sandbox.exec("tr '\\0' '\\n' < /proc/1/environ");
        expect(init.exitCode).toBe(0);
        expect(init.stdout).not.toContain(canary);
        if (target.reportedEnv) {
          const reported = await target.reportedEnv(sandbox);
          expect(reported.join('\n')).not.toContain(canary);
          expect(reported.join('\n')).not.toContain('SANDBOX_CANARY_TOKEN');
        }
      });

      it('runs commands as a non-root user without capabilities', async () => {
        const uid = await sandbox.exec('id -u');
        expect(uid.stdout.trim()).not.toBe('0');
        const caps = await sandbox.exec("grep -E '^Cap(Eff|Prm)' /proc/self/status");
        for (const line of caps.stdout.trim().split('\n')) expect(line).toMatch(/\t0{16}$/);
      });

      it('cannot write to system folders', async () => {
        const r = await sandbox.exec('touch /usr/pwned');
        expect(r.exitCode).not.toBe(0);
        expect(r.stderr).toMatch(/Permission denied|Read-only/);
      });

      it('can write its own workspace and /tmp', async () => {
        const r = await sandbox.exec('touch /workspace/ok /tmp/ok && echo fine');
        expect(r.stdout.trim()).toBe('fine');
      });
    });

    describe('exec', () => {
      let sandbox: Sandbox;
      beforeAll(async () => {
        sandbox = await make();
      });

      it('returns exit code, stdout and stderr separately', async () => {
        const r = await sandbox.exec('echo out; echo err >&2; exit 7');
        expect(r).toMatchObject({
          exitCode: 7,
          stdout: 'out\n',
          stderr: 'err\n',
          timedOut: false,
          truncated: false,
        });
        expect(r.durationMs).toBeGreaterThanOrEqual(0);
      });

      it('runs in the workspace, or in the folder asked for', async () => {
        expect((await sandbox.exec('pwd')).stdout.trim()).toBe('/workspace');
        expect((await sandbox.exec('pwd', { cwd: 'src' })).stdout.trim()).toBe('/workspace/src');
      });

      it('passes per-command variables', async () => {
        const r = await sandbox.exec('echo "$GREETING"', { env: { GREETING: 'hi there' } });
        expect(r.stdout).toBe('hi there\n');
      });

      it('does not hang when a background child holds stdout', async () => {
        const started = Date.now();
        const r = await sandbox.exec('sleep 1000 & echo started', { timeoutMs: 60_000 });
        expect(r.exitCode).toBe(0);
        expect(r.stdout).toContain('started');
        expect(Date.now() - started).toBeLessThan(15_000);
      });

      it('sees its own running processes (the check below is not vacuous)', async () => {
        await sandbox.exec('sleep 309 > /dev/null 2>&1 &');
        expect(await processesMatching(sandbox, '^sleep 309')).toBe(1);
      });

      it('kills a command past its timeout with its whole process tree', async () => {
        const r = await sandbox.exec('sh -c "sleep 301 & sleep 302"', { timeoutMs: 2000 });
        expect(r.timedOut).toBe(true);
        expect(r.exitCode).not.toBe(0);
        expect(await processesMatching(sandbox, '^sleep 30[12]')).toBe(0);
      });

      it('caps a flood of output, keeping head and tail, with bounded host memory', async () => {
        const before = process.memoryUsage().rss;
        const r = await sandbox.exec('yes', { timeoutMs: 3000, maxOutputBytes: 64 * 1024 });
        expect(r.timedOut).toBe(true);
        expect(r.truncated).toBe(true);
        expect(r.stdout.length).toBeLessThan(70 * 1024);
        expect(r.stdout).toMatch(/bytes cut by sandbox-harness/);
        expect(r.stdout.startsWith('y\n')).toBe(true);
        expect(process.memoryUsage().rss - before).toBeLessThan(200 * 1024 * 1024);
      });

      it('stops a fork bomb at the pids limit and stays usable', async () => {
        const bomb = await make({ resources: { pids: 64 } });
        const ticks: number[] = [Date.now()];
        const ticker = setInterval(() => ticks.push(Date.now()), 50);
        const r = await bomb.exec('bomb() { bomb | bomb & }; bomb; while :; do bomb; sleep 0.1; done', {
          timeoutMs: 4000,
        });
        clearInterval(ticker);
        ticks.push(Date.now());
        // The pids limit bit: forks failed, and the command ended (by its timeout at the latest).
        expect(r.stderr).toMatch(/fork|Resource temporarily unavailable|Cannot/i);
        // The host stayed responsive: its event loop never stalled for a second.
        const gaps = ticks.slice(1).map((t, i) => t - ticks[i]!);
        expect(Math.max(...gaps)).toBeLessThan(1000);
        // The bomb is gone and the sandbox still runs commands.
        let after = await bomb.exec('echo alive', { timeoutMs: 20_000 });
        for (let i = 0; i < 5 && after.exitCode !== 0; i++)
          after = await bomb.exec('echo alive', { timeoutMs: 20_000 });
        expect(after.stdout.trim()).toBe('alive');
        expect(await processesMatching(bomb, '[b]omb() {')).toBe(0);
      });

      it('refuses to run after the sandbox is gone', async () => {
        const doomed = await make();
        await doomed.dispose();
        await expect(doomed.exec('true')).rejects.toMatchObject({ code: 'SANDBOX_DEAD' });
      });

      it('stops waiting and kills the command when aborted', async () => {
        const controller = new AbortController();
        setTimeout(() => controller.abort(), 500);
        const started = Date.now();
        await expect(
          sandbox.exec('sleep 303', { signal: controller.signal, timeoutMs: 60_000 }),
        ).rejects.toMatchObject({
          code: 'INTERRUPTED',
        });
        expect(Date.now() - started).toBeLessThan(10_000);
        expect(await processesMatching(sandbox, '^sleep 303')).toBe(0);
      });
    });

    describe('lifecycle', () => {
      it('a disposed sandbox is gone', async () => {
        const sandbox = await make();
        expect(await sandbox.isAlive()).toBe(true);
        await sandbox.dispose();
        expect(await sandbox.isAlive()).toBe(false);
      });

      it('fails clearly for a missing image and leaves nothing behind', async () => {
        await expect(
          target.backend().create({ image: 'sandbox-harness/does-not-exist:nope' }),
        ).rejects.toMatchObject({
          code: 'IMAGE',
          message: expect.stringMatching(/does not exist/),
        });
      });
    });
  });
}
