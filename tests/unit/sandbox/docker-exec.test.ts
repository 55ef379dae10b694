/**
 * `DockerSandbox.exec` against a scripted engine: how the daemon's exec states are read.
 * The real daemon is covered by the conformance suite; these pin races it shows only
 * under load.
 */
import { describe, expect, it } from 'vitest';
import { DockerSandbox, ExecTransport } from '../../../src/sandbox/docker/docker-sandbox.js';
import type {
  DockerEngine,
  ExecStartOptions,
  RunningExec,
} from '../../../src/sandbox/docker/engine/index.js';

function scriptedEngine(states: { running: boolean; exitCode: number | null }[], output = 'done\n') {
  const calls: string[][] = [];
  const exec = {
    async start(_id: string, options: ExecStartOptions): Promise<RunningExec> {
      calls.push(options.cmd);
      let inspections = 0;
      let endStream: () => void = () => undefined;
      const streamEnded = new Promise<void>((resolve) => (endStream = resolve));
      return {
        streamEnded,
        inspect: async () => {
          const state = states[Math.min(inspections, states.length - 1)]!;
          inspections += 1;
          if (!state.running && state.exitCode !== null) {
            options.stdout.write(output);
            endStream();
          }
          return state;
        },
        detach: () => undefined,
      };
    },
  };
  return { engine: { exec } as unknown as DockerEngine, calls };
}

function sandboxOn(engine: DockerEngine): DockerSandbox {
  return new DockerSandbox(engine, {
    id: 'c1',
    image: 'image',
    labels: {},
    env: [],
    transport: new ExecTransport(engine, 'c1'),
    tree: async () => new Map(),
  });
}

describe('DockerSandbox.exec reading exec states', () => {
  it('an exec the daemon reports as not running without an exit code has not started: it waits', async () => {
    const { engine } = scriptedEngine([
      { running: false, exitCode: null },
      { running: false, exitCode: null },
      { running: true, exitCode: null },
      { running: false, exitCode: 0 },
    ]);
    const sandbox = sandboxOn(engine);
    const result = await sandbox.exec('npm test', { timeoutMs: 10_000 });
    expect(result.exitCode).toBe(0);
    expect(result.timedOut).toBe(false);
    expect(result.stdout).toBe('done\n');
  });

  it('reports the exit code the daemon gives, not one of its own', async () => {
    const { engine, calls } = scriptedEngine([
      { running: true, exitCode: null },
      { running: false, exitCode: 3 },
    ]);
    const sandbox = sandboxOn(engine);
    const result = await sandbox.exec('exit 3', { timeoutMs: 10_000 });
    expect(result.exitCode).toBe(3);
    // The command is passed as one argument, never spliced into the wrapper's text.
    expect(calls[0]!.at(-1)).toBe('exit 3');
  });
});

/**
 * An engine where `npm test` exits 137 while the engine goes on calling the sandbox running
 * for `runningLooks` inspections (a loaded host handling the init's exit late), and where a
 * probe command runs only if `probesRun`.
 */
function killedEngine(options: {
  runningLooks: number;
  probesRun: boolean;
  exitCode?: number;
  output?: string;
}) {
  let looks = 0;
  const probes: string[][] = [];
  const engine = {
    containers: {
      async inspect() {
        looks += 1;
        return { running: looks <= options.runningLooks };
      },
    },
    exec: {
      async start(_id: string, exec: ExecStartOptions): Promise<RunningExec> {
        const probe = exec.cmd.includes('echo "$1"');
        if (probe) probes.push(exec.cmd);
        let endStream: () => void = () => undefined;
        const streamEnded = new Promise<void>((resolve) => (endStream = resolve));
        return {
          streamEnded,
          inspect: async () => {
            if (probe && options.probesRun) exec.stdout.write(`${exec.cmd.at(-1)}\n`);
            if (!probe && options.output) exec.stdout.write(options.output);
            endStream();
            return {
              running: false,
              exitCode: probe ? (options.probesRun ? 0 : 137) : (options.exitCode ?? 137),
            };
          },
          detach: () => undefined,
        };
      },
    },
  };
  return { engine: engine as unknown as DockerEngine, probes, looks: () => looks };
}

describe('DockerSandbox.exec telling a killed command from a killed sandbox', () => {
  it('a sandbox the engine still calls running, where no probe can run, stopped with the command', async () => {
    // Twelve looks: longer than the second the engine was once given, which a loaded CI
    // host outlasted (the trial read as tests-failed).
    const { engine, probes } = killedEngine({ runningLooks: 12, probesRun: false });
    const sandbox = sandboxOn(engine);
    await expect(sandbox.exec('npm test', { timeoutMs: 10_000 })).rejects.toThrow(
      /stopped while a command ran/,
    );
    // The engine's "running" was not believed while the probes failed.
    expect(probes.length).toBeGreaterThanOrEqual(12);
  });

  it('Ctrl-C while the sandbox is being looked at ends the wait at once, as an interrupt', async () => {
    const { engine } = killedEngine({ runningLooks: Number.POSITIVE_INFINITY, probesRun: false });
    const sandbox = sandboxOn(engine);
    const controller = new AbortController();
    const pending = sandbox.exec('npm test', { timeoutMs: 10_000, signal: controller.signal });
    setTimeout(() => controller.abort(), 300);
    const started = Date.now();
    await expect(pending).rejects.toMatchObject({ name: expect.stringMatching(/Interrupted|AbortError/) });
    // The settle wait is 15 s; an abort that was not honoured would sit it out.
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('a command killed alone in a sandbox that answers a probe is the command exiting 137', async () => {
    const { engine, probes } = killedEngine({ runningLooks: Number.POSITIVE_INFINITY, probesRun: true });
    const sandbox = sandboxOn(engine);
    const result = await sandbox.exec('npm test', { timeoutMs: 10_000 });
    expect(result.exitCode).toBe(137);
    expect(probes).toHaveLength(1);
  });

  it('a sandbox killed while the exec was being started (the runtime answers 126) stopped with the command', async () => {
    // Seen on CI: the kill landed between the exec's creation and its start; runc answered
    // 126 "OCI runtime exec failed ... broken pipe", which read as the tests failing.
    const { engine } = killedEngine({
      runningLooks: 2,
      probesRun: false,
      exitCode: 126,
      output:
        'OCI runtime exec failed: exec failed: unable to start container process: error writing config to pipe: write init-p: broken pipe: unknown\r\n',
    });
    const sandbox = sandboxOn(engine);
    await expect(sandbox.exec('npm test', { timeoutMs: 10_000 })).rejects.toThrow(
      /stopped while a command ran/,
    );
  });

  it.each([126, 127])(
    'a command exiting %i in a live sandbox (not executable, not found) is its own result',
    async (code) => {
      const { engine, probes } = killedEngine({
        runningLooks: Number.POSITIVE_INFINITY,
        probesRun: true,
        exitCode: code,
      });
      const sandbox = sandboxOn(engine);
      const result = await sandbox.exec('./test.sh', { timeoutMs: 10_000 });
      expect(result.exitCode).toBe(code);
      expect(probes).toHaveLength(1);
    },
  );

  it.each([126, 137])(
    "the harness's own reads in a sandbox that stopped (exit %i) are the sandbox stopping, not a file problem",
    async (code) => {
      const { engine } = killedEngine({ runningLooks: 1, probesRun: false, exitCode: code });
      const sandbox = sandboxOn(engine);
      await expect(sandbox.readFile('src/a.ts')).rejects.toMatchObject({ name: 'SandboxDead' });
    },
  );
});
