/**
 * The sandbox contract, as tests. Every backend must pass these; `docker.test.ts` runs
 * them against real Docker. They pin the security baseline (no network, no host
 * variables, no root, no capabilities), resource limits, exec semantics and the diff.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../../src/sandbox/types.js';
import { until } from '../helpers/poll.js';

export interface ConformanceTarget {
  name: string;
  backend: () => SandboxBackend;
  /** An image whose /workspace holds tests/fixtures/repos/conformance. */
  image: () => Promise<string>;
  /** The environment variables the backend itself reports for a sandbox (e.g. the daemon's Config.Env). */
  reportedEnv?: (sandbox: Sandbox) => Promise<string[]>;
  /**
   * How to tell "no network" from "a network that happens to refuse": an address of this
   * host that a networked workload of the backend reaches, and a way to connect from such
   * a workload (made and removed by the target) so the test knows the address really works.
   */
  network: {
    /** An address of this host that the backend's networked workloads can reach. */
    hostAddress: () => Promise<string>;
    /** Connects from a networked (not sandboxed) workload; resolves to `connected` or the error code. */
    connectFromNetworked: (address: string, port: number) => Promise<string>;
    /** The error a connect with no route at all gives (default ENETUNREACH, Linux's). */
    noRoute?: string[];
  };
  /** Whether the backend still holds this sandbox in any state (a stopped container counts). */
  exists: (id: string) => Promise<boolean>;
  /** Ids of every sandbox the backend holds with this run id, in any state. */
  sandboxesOfRun: (runId: string) => Promise<string[]>;
  /**
   * What a fork bomb may do to the sandbox itself: `survives` (runc: forks fail at the pids
   * limit and the sandbox goes on), or `may-end-sandbox` (gVisor: its kernel's own threads share
   * the cgroup, and a bomb that fills it ends the whole sandbox, which the harness then reports
   * as dead). The host staying responsive and the bomb ending are checked either way.
   */
  forkBomb?: 'survives' | 'may-end-sandbox';
}

/**
 * Processes whose command line (spaces for NULs) matches `pattern`, read from /proc. Throws
 * when the count itself could not be taken (e.g. no pid left for the exec right after a fork
 * bomb), so "0 left" always means the processes were looked for and not found.
 */
async function processesMatching(sandbox: Sandbox, pattern: string): Promise<number> {
  const r = await sandbox.exec(
    `n=$(for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < "$f" 2>/dev/null; echo; done | grep -c '${pattern}'); echo "count=$n"`,
  );
  const count = /^count=(\d+)$/.exec(r.stdout.trim());
  if (r.exitCode !== 0 || !count) {
    throw new Error(
      `could not count processes matching ${pattern}: exit ${r.exitCode}, stdout ${JSON.stringify(r.stdout)}, stderr ${JSON.stringify(r.stderr)}`,
    );
  }
  return Number(count[1]);
}

/** Polls until `pattern` runs in the sandbox, so a test acts on a command that really started. */
async function waitForProcess(sandbox: Sandbox, pattern: string): Promise<void> {
  await until(async () => (await processesMatching(sandbox, pattern)) > 0, `a process matches ${pattern}`, {
    intervalMs: 50,
  });
}

/** The exact bytes `seq first last` prints. */
function seq(first: number, last: number): string {
  let out = '';
  for (let i = first; i <= last; i++) out += `${i}\n`;
  return out;
}

/** A TCP listener on `address` that counts the connections it accepts. */
async function listen(address: string): Promise<{ server: Server; port: number; accepted: () => number }> {
  let accepted = 0;
  const server = createServer((socket: Socket) => {
    accepted++;
    socket.on('error', () => undefined);
    socket.end('hello\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, address, () => resolve());
  });
  const info = server.address();
  if (info === null || typeof info === 'string') throw new Error(`listener on ${address} has no port`);
  return { server, port: info.port, accepted: () => accepted };
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

      it('cannot open a TCP connection to a host address that a networked container reaches', async () => {
        // A listener on this host: a workload with network connects to it (checked first, so
        // the address is known to work); the sandbox has no route at all, so its connect()
        // fails at once with ENETUNREACH and no packet leaves. ECONNREFUSED would mean a
        // network exists and only the port was closed.
        const address = await target.network.hostAddress();
        const listener = await listen(address);
        try {
          expect(await target.network.connectFromNetworked(address, listener.port)).toBe('connected');
          expect(listener.accepted()).toBe(1);
          const r = await sandbox.exec(
            `node -e "const s=require('net').connect(${listener.port},'${address}');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',(e)=>{console.log(e.code);process.exit(1)})"`,
            { timeoutMs: 20_000 },
          );
          expect(target.network.noRoute ?? ['ENETUNREACH']).toContain(r.stdout.trim());
          expect(r.exitCode).toBe(1);
          expect(listener.accepted()).toBe(1);
        } finally {
          await new Promise((resolve) => listener.server.close(resolve));
        }
      });

      it('has no route out: no IPv4 route at all, IPv6 routes only on lo', async () => {
        const v4 = await sandbox.exec("awk 'NR>1' /proc/net/route");
        expect(v4.exitCode).toBe(0);
        expect(v4.stdout.trim()).toBe('');
        const v6 = await sandbox.exec("awk '{print $NF}' /proc/net/ipv6_route 2>/dev/null | sort -u");
        expect(v6.exitCode).toBe(0);
        for (const device of v6.stdout.trim().split('\n').filter(Boolean)) expect(device).toBe('lo');
      });

      it('resolves localhost, the loopback aliases and its own host name to loopback, from files', async () => {
        // Each name with every address family: a name that went to DNS would fail here (no
        // server answers), not wait; the exec timeout is only the guard against a hang.
        const script = [
          "const dns=require('dns'),os=require('os');",
          "const names=['localhost','ip6-localhost','ip6-loopback',os.hostname()];",
          // Each address once: an engine may list a name twice (Podman repeats the file's lines).
          'Promise.all(names.map((n)=>dns.promises.lookup(n,{all:true}).then((a)=>[n,[...new Set(a.map((x)=>x.address))].sort()],(e)=>[n,e.code])))',
          '.then((r)=>console.log(JSON.stringify(Object.fromEntries(r))));',
        ].join('');
        const r = await sandbox.exec(`node -e "${script}"`, { timeoutMs: 20_000 });
        expect(r.exitCode, r.stderr).toBe(0);
        const found = JSON.parse(r.stdout) as Record<string, unknown>;
        const hostname = (await sandbox.exec('hostname')).stdout.trim();
        expect(hostname).not.toBe('');
        expect(found).toEqual({
          localhost: ['127.0.0.1', '::1'],
          'ip6-localhost': ['::1'],
          'ip6-loopback': ['::1'],
          [hostname]: ['127.0.0.1', '::1'],
        });
      });

      it('serves and reaches HTTP on localhost, 127.0.0.1 and ::1 inside the sandbox', async () => {
        const script = [
          "const http=require('http');",
          "const one=(host)=>new Promise((ok)=>{const s=http.createServer((q,res)=>res.end('hi from '+host));",
          "s.on('error',(e)=>ok(host+' '+e.code));",
          "s.listen(0,host,()=>{const u='http://'+(host.includes(':')?'['+host+']':host)+':'+s.address().port+'/';",
          "fetch(u).then((x)=>x.text()).then((t)=>ok(t),(e)=>ok(host+' '+((e.cause&&e.cause.code)||e.message))).finally(()=>s.close());});});",
          "(async()=>{for(const h of ['localhost','127.0.0.1','::1'])console.log(await one(h));})();",
        ].join('');
        const r = await sandbox.exec(`node -e "${script}"`, { timeoutMs: 20_000 });
        expect(r.stdout.trim().split('\n'), r.stderr).toEqual([
          'hi from localhost',
          'hi from 127.0.0.1',
          'hi from ::1',
        ]);
        expect(r.exitCode).toBe(0);
      });

      it('cannot change its hosts file or its resolver configuration', async () => {
        const r = await sandbox.exec(
          'for f in /etc/hosts /etc/resolv.conf; do find "$f" -maxdepth 0 -printf "%u %m\\n"; if [ -w "$f" ]; then echo "$f writable"; fi; (echo "1.2.3.4 evil" >> "$f") 2>/dev/null && echo "$f appended"; done',
        );
        expect(r.stdout.trim().split('\n')).toEqual(['root 644', 'root 644']);
        expect((await sandbox.exec('cat /etc/hosts')).stdout).not.toContain('evil');
      });

      it("sees none of the host process's variables", async () => {
        const env = await sandbox.exec('env');
        expect(env.stdout).not.toContain(canary);
        expect(env.stdout).not.toContain('SANDBOX_CANARY_TOKEN');
        expect(env.stdout).toContain('VISIBLE_ON_PURPOSE=yes');
        // pid 1 is root's (so the agent cannot trace it): its environment is either not
        // readable to the sandbox user at all, or free of the host's variables.
        const init = await sandbox.exec("tr '\\0' '\\n' < /proc/1/environ");
        if (init.exitCode !== 0) expect(init.stderr).toMatch(/Permission denied/);
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

      it("answers the agent's fast commands (one long-lived channel) as a plain exec, one after another", async () => {
        // A fresh sandbox: its first fast command opens the channel. Each answer must come
        // well within its own timeout: a channel whose end markers are held back only ends a
        // command at the host's deadline, timed out.
        const fresh = await make();
        for (const n of [3, 0, 5]) {
          const r = await fresh.exec(`echo out${n}; echo err${n} >&2; exit ${n}`, {
            fast: true,
            timeoutMs: 5_000,
          });
          expect(r).toMatchObject({ exitCode: n, stdout: `out${n}\n`, stderr: `err${n}\n`, timedOut: false });
        }
        expect((await fresh.exec('pwd', { fast: true, timeoutMs: 5_000 })).stdout).toBe('/workspace\n');
      }, 60_000);

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
        const r = await sandbox.exec('sh -c "sleep 301 & sleep 302 & sleep 303"', { timeoutMs: 2000 });
        expect(r.timedOut).toBe(true);
        expect(r.exitCode).not.toBe(0);
        expect(await processesMatching(sandbox, '^sleep 30[123]')).toBe(0);
      });

      // A child that calls setsid() leaves the command's process group; it is part of the
      // tree all the same.
      it('kills a child that left the process group (setsid) when the command times out', async () => {
        const r = await sandbox.exec('sh -c "sleep 304 & setsid sleep 305 & sleep 306"', { timeoutMs: 2000 });
        expect(r.timedOut).toBe(true);
        expect(await processesMatching(sandbox, '^sleep 30[456]')).toBe(0);
      });

      it('kills a command that ignores TERM once the grace period is over', async () => {
        const r = await sandbox.exec("trap '' TERM; sleep 307; echo survived", { timeoutMs: 2000 });
        expect(r.timedOut).toBe(true);
        expect(r.stdout).not.toContain('survived');
        expect(await processesMatching(sandbox, '^sleep 307')).toBe(0);
      });

      it('ends a command at the host-side deadline when the in-sandbox timeout cannot', async () => {
        // The command stops its own `timeout` (its parent), so nothing inside the sandbox will
        // ever end it: only the host's deadline and its kill of the process tree can.
        const started = Date.now();
        const r = await sandbox.exec("trap '' TERM; kill -STOP $PPID; sleep 308; echo survived", {
          timeoutMs: 1000,
        });
        const took = Date.now() - started;
        expect(r.timedOut).toBe(true);
        expect(r.stdout).not.toContain('survived');
        // Not before the in-sandbox timeout and its grace would have acted, and well before
        // the command would have ended by itself (308 s).
        expect(took).toBeGreaterThanOrEqual(3000);
        expect(took).toBeLessThan(60_000);
        expect(await processesMatching(sandbox, '^sleep 308')).toBe(0);
      });

      it('caps a flood of output with bounded host memory', async () => {
        const before = process.memoryUsage().rss;
        const r = await sandbox.exec('yes', { timeoutMs: 3000, maxOutputBytes: 64 * 1024 });
        expect(r.timedOut).toBe(true);
        expect(r.truncated).toBe(true);
        expect(r.stdout.length).toBeLessThan(70 * 1024);
        expect(r.stdout).toMatch(/bytes cut by sandbox-harness/);
        expect(r.stdout.startsWith('y\n')).toBe(true);
        expect(process.memoryUsage().rss - before).toBeLessThan(200 * 1024 * 1024);
      });

      it('keeps the head and the tail of stdout and of stderr, saying how many bytes were cut', async () => {
        const out = seq(1, 20000);
        const err = seq(500000, 520000);
        const cap = 1000;
        const r = await sandbox.exec('seq 1 20000; seq 500000 520000 >&2', { maxOutputBytes: cap });
        expect(r.exitCode).toBe(0);
        expect(r.truncated).toBe(true);
        for (const [got, full] of [
          [r.stdout, out],
          [r.stderr, err],
        ] as const) {
          expect(got.startsWith(full.slice(0, cap / 2))).toBe(true);
          expect(got.endsWith(full.slice(-cap / 2))).toBe(true);
          expect(got).toContain(`[... ${full.length - cap} bytes cut by sandbox-harness`);
          expect(got.length).toBeLessThan(cap + 200);
        }
        // Each stream keeps its own bytes: nothing of stderr in stdout and the reverse.
        expect(r.stdout).not.toContain('500000');
        expect(r.stderr).not.toMatch(/^1\n/);
      });

      it('stops a fork bomb at the pids limit and stays usable', async () => {
        const bomb = await make({ resources: { pids: 64 } });
        const ticks: number[] = [Date.now()];
        const ticker = setInterval(() => ticks.push(Date.now()), 50);
        // The host stayed responsive: its event loop never stalled for a second.
        const hostResponsive = () => {
          const gaps = ticks.slice(1).map((t, i) => t - ticks[i]!);
          expect(Math.max(...gaps)).toBeLessThan(1000);
        };
        try {
          const r = await bomb.exec('bomb() { bomb | bomb & }; bomb; while :; do bomb; sleep 0.1; done', {
            timeoutMs: 4000,
          });
          clearInterval(ticker);
          ticks.push(Date.now());
          // The pids limit bit: forks failed, and the command ended (by its timeout at the latest).
          expect(r.stderr).toMatch(/fork|Resource temporarily unavailable|Cannot/i);
          hostResponsive();
          // The bomb is gone and the sandbox still runs commands.
          let after = await bomb.exec('echo alive', { timeoutMs: 20_000 });
          for (let i = 0; i < 5 && after.exitCode !== 0; i++)
            after = await bomb.exec('echo alive', { timeoutMs: 20_000 });
          expect(after.stdout.trim()).toBe('alive');
          // Its last processes may need a moment to die; until then even the count cannot fork,
          // and a count that could not be taken is not a zero.
          const deadline = Date.now() + 20_000;
          let left: number | Error = new Error('not counted yet');
          while (left !== 0 && Date.now() < deadline) {
            left = await processesMatching(bomb, '[b]omb() {').catch((error: Error) => error);
            if (left !== 0) await new Promise((resolve) => setTimeout(resolve, 200));
          }
          expect(left).toBe(0);
        } catch (error) {
          clearInterval(ticker);
          if (target.forkBomb !== 'may-end-sandbox' || (error as { code?: string }).code !== 'SANDBOX_DEAD')
            throw error;
          // The bomb took the whole sandbox down (gVisor): the harness says so, the sandbox stays
          // down and nothing of it runs on, and the host was never starved.
          expect(await bomb.isAlive()).toBe(false);
          hostResponsive();
        }
      });

      it('refuses to run after the sandbox is gone', async () => {
        const doomed = await make();
        await doomed.dispose();
        await expect(doomed.exec('true')).rejects.toMatchObject({ code: 'SANDBOX_DEAD' });
      });

      it('stops waiting and kills the command when aborted', async () => {
        const controller = new AbortController();
        const pending = sandbox.exec('sleep 303', { signal: controller.signal, timeoutMs: 60_000 });
        const outcome = pending.then(
          () => 'finished',
          (error: unknown) => error,
        );
        // Abort only once the command is known to run, so the kill is what the test sees.
        await waitForProcess(sandbox, '^sleep 303');
        const aborted = Date.now();
        controller.abort();
        expect(await outcome).toMatchObject({ code: 'INTERRUPTED' });
        expect(Date.now() - aborted).toBeLessThan(10_000);
        expect(await processesMatching(sandbox, '^sleep 303')).toBe(0);
      });
    });

    describe('lifecycle', () => {
      it('a disposed sandbox is gone: removed, not just stopped', async () => {
        const sandbox = await make();
        expect(await sandbox.isAlive()).toBe(true);
        expect(await target.exists(sandbox.id)).toBe(true);
        await sandbox.dispose();
        expect(await sandbox.isAlive()).toBe(false);
        expect(await target.exists(sandbox.id)).toBe(false);
      });

      it('fails clearly for a missing image and leaves nothing behind', async () => {
        const runId = `conformance-missing-${Math.random().toString(36).slice(2, 10)}`;
        await expect(
          target.backend().create({ image: 'sandbox-harness/does-not-exist:nope', runId }),
        ).rejects.toMatchObject({
          code: 'IMAGE',
          message: expect.stringMatching(/does not exist/),
        });
        expect(await target.sandboxesOfRun(runId)).toEqual([]);
      });

      it('removes a half-made sandbox when setting it up fails after it was created', async () => {
        // The injected file's parent is a regular file of the image, so placing it fails
        // after the sandbox exists; nothing of it may stay.
        const runId = `conformance-halfmade-${Math.random().toString(36).slice(2, 10)}`;
        await expect(
          target.backend().create({
            image,
            runId,
            files: [{ path: '/workspace/README.md/impossible.txt', content: 'x' }],
          }),
        ).rejects.toThrow();
        expect(await target.sandboxesOfRun(runId)).toEqual([]);
      });
    });
  });
}
