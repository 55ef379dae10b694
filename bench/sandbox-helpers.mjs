/**
 * What the sandbox and change-path benchmarks share: sandboxes that are removed whatever
 * happens (also on a second Ctrl-C), commands that must succeed, and the warm-up +
 * repetition loop.
 */
import { Writable } from 'node:stream';
import { checkInterrupted, onCleanup } from './process.mjs';

/**
 * @typedef {{ exitCode: number, stdout: string, stderr: string }} BenchExecResult
 * @typedef {{ id: string, exec: (command: string, options?: object) => Promise<BenchExecResult>, changes: (limits?: object) => Promise<{ changes: Array<{ path: string, kind: string, type?: string }>, complete: boolean }>, exportFiles: (paths: readonly string[], limits?: object) => Promise<{ files: Array<{ path: string, content: Buffer, mode: number }>, refused: Array<{ path: string, kind: string, reason: string }> }>, writeFiles: (files: Array<{ path: string, content: Buffer | string, mode?: number }>) => Promise<void>, freeze: () => Promise<void>, dispose: () => Promise<void> }} BenchSandbox
 * @typedef {{ create: (spec: { image: string, role: string }) => Promise<BenchSandbox>, workspaceTree: (image: string) => Promise<ReadonlyMap<string, unknown>> }} BenchBackend
 * @typedef {{ startExec: (id: string, options: object) => Promise<{ streamEnded: Promise<void>, inspect: () => Promise<{ running: boolean, exitCode: number | null }>, detach: () => void }>, getArchive: (id: string, path: string) => Promise<AsyncIterable<Buffer> | undefined>, containerChanges: (id: string) => Promise<Array<{ path: string, kind: string }>> }} BenchEngine
 */

export const nullSink = () =>
  new Writable({
    write(_chunk, _encoding, callback) {
      callback();
    },
  });

/**
 * A sandbox that is disposed whatever happens, also on a second Ctrl-C.
 *
 * @param {BenchBackend} backend
 * @param {string} image
 */
export async function createTracked(backend, image, extra = {}) {
  const sandbox = await backend.create({ image, role: 'bench', ...extra });
  const unregister = onCleanup(() => sandbox.dispose());
  return {
    sandbox,
    dispose: async () => {
      try {
        await sandbox.dispose();
      } finally {
        unregister();
      }
    },
  };
}

/**
 * @param {BenchSandbox} sandbox
 * @param {string} command
 * @param {object} [options] more `exec` options (`fast`)
 */
export async function execOk(sandbox, command, options = {}) {
  const result = await sandbox.exec(command, { timeoutMs: 60_000, ...options });
  if (result.exitCode !== 0) {
    throw new Error(
      `sandbox exec \`${command.slice(0, 200)}\` exited ${result.exitCode}: ${result.stderr.trim()}`,
    );
  }
  return result;
}

/**
 * Runs `fn(i, keep)` for the warm-ups and then the repetitions; `keep` is false during the
 * warm-ups, whose samples are discarded.
 *
 * @param {{ reps: number, warmup: number, label: string, log: (line: string) => void }} plan
 * @param {(i: number, keep: boolean) => Promise<void>} fn
 */
export async function repeat(plan, fn) {
  const total = plan.warmup + plan.reps;
  for (let i = 0; i < total; i++) {
    checkInterrupted();
    await fn(i, i >= plan.warmup);
    if (process.stderr.isTTY) process.stderr.write(`\r  ${plan.label}: ${i + 1}/${total}   `);
  }
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[K');
  plan.log(`  ${plan.label}: ${plan.reps} repetitions after ${plan.warmup} warm-up(s)`);
}

/**
 * Runs the steps one after the other, starting at a different one each repetition, so no
 * side of a comparison always runs first (drift on a shared machine hits all alike).
 *
 * @param {number} i the repetition
 * @param {Array<() => Promise<void>>} steps
 */
export async function rotate(i, steps) {
  for (let k = 0; k < steps.length; k++) await steps[(i + k) % steps.length]();
}
