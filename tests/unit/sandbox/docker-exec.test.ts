/**
 * `DockerSandbox.exec` against a scripted engine: how the daemon's exec states are read.
 * The real daemon is covered by the conformance suite; these pin races it shows only
 * under load.
 */
import { describe, expect, it } from 'vitest';
import { DockerSandbox, ExecTransport } from '../../../src/sandbox/docker/docker-sandbox.js';
import type { DockerEngine, ExecStartOptions, RunningExec } from '../../../src/sandbox/docker/engine.js';

function scriptedEngine(states: { running: boolean; exitCode: number | null }[], output = 'done\n') {
  const calls: string[][] = [];
  const engine = {
    async startExec(_id: string, options: ExecStartOptions): Promise<RunningExec> {
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
  return { engine: engine as unknown as DockerEngine, calls };
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
