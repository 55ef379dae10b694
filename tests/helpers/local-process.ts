/**
 * A "sandbox process" that is a child process on the host, for unit tests of the model
 * bridge: `MemorySandbox.onSpawn = localSpawn` runs the real relay script with the test's
 * Node, an empty environment and pipes for its stdin and stdout, so everything but the
 * container is real. Never used for anything but the harness's own scripts.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { SandboxProcess, SpawnOptions } from '../../src/sandbox/types.js';

export function localSpawn(argv: readonly string[], options: SpawnOptions): SandboxProcess {
  const [command, ...args] = argv;
  // `node` is the test's own Node; nothing of the host's environment is passed on.
  const child = spawn(command === 'node' ? process.execPath : command!, args, {
    env: {},
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdout.pipe(options.stdout);
  child.stderr.pipe(options.stderr);
  child.stdin.on('error', () => undefined);
  const exited = new Promise<number>((resolve) =>
    child.once('exit', (code, signal) =>
      resolve(code ?? (signal ? 128 + (constants.signals[signal] ?? 0) : -1)),
    ),
  );
  return {
    input: child.stdin,
    exited,
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}
