/**
 * Spawning child processes (the docker CLI, the built harness CLI) with wall-clock timing,
 * plus the bench's interrupt and clean-up bookkeeping: every container, temp folder and
 * child the bench starts is registered here, so Ctrl-C (or a crash) still removes them.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';

/** @type {Set<() => Promise<void>>} */
const cleanups = new Set();
/** @type {Set<import('node:child_process').ChildProcess>} */
const children = new Set();
let interrupted = false;

export class BenchInterrupted extends Error {
  constructor() {
    super('interrupted');
    this.name = 'BenchInterrupted';
  }
}

/** Throws when Ctrl-C was pressed; long loops call it between repetitions. */
export function checkInterrupted() {
  if (interrupted) throw new BenchInterrupted();
}

/**
 * Registers a clean-up that also runs on a second Ctrl-C; returns its un-registration.
 *
 * @param {() => Promise<void>} fn
 */
export function onCleanup(fn) {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

async function runAllCleanups() {
  for (const fn of [...cleanups]) {
    cleanups.delete(fn);
    await fn().catch(() => undefined);
  }
}

/**
 * First Ctrl-C: stop after the current step, let `finally` blocks clean up normally.
 * Second Ctrl-C: run every registered clean-up now and exit 130.
 */
export function installSignalHandlers() {
  const handler = () => {
    if (!interrupted) {
      interrupted = true;
      process.stderr.write('\nbench: interrupted; stopping after the current step and cleaning up ...\n');
      for (const child of children) child.kill('SIGINT');
      return;
    }
    process.stderr.write('\nbench: second interrupt; removing what the bench created and exiting\n');
    for (const child of children) child.kill('SIGKILL');
    void runAllCleanups().finally(() => process.exit(130));
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

/**
 * @typedef {object} ProcessResult
 * @property {number | null} code
 * @property {NodeJS.Signals | null} signal
 * @property {string} stdout
 * @property {string} stderr
 * @property {number} ms wall time from spawn to the child's exit and closed output
 */

/**
 * Runs a command to completion (never through a shell) and times it.
 *
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, onStderr?: (text: string) => void }} [options]
 * @returns {Promise<ProcessResult>}
 */
export function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    /** @type {Buffer[]} */
    const out = [];
    /** @type {Buffer[]} */
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => {
      err.push(d);
      options.onStderr?.(d.toString('utf8'));
    });
    child.on('error', (error) => {
      children.delete(child);
      reject(error);
    });
    child.on('close', (code, signal) => {
      const ms = performance.now() - started;
      children.delete(child);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        ms,
      });
    });
  });
}

/**
 * Like `run`, but a non-zero exit is an error that quotes the end of the output.
 *
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, onStderr?: (text: string) => void }} [options]
 */
export async function runOk(command, args, options = {}) {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    checkInterrupted();
    const tail = `${result.stdout}\n${result.stderr}`.trim().slice(-2000);
    throw new Error(
      `\`${command} ${args.join(' ')}\` exited with ${result.code ?? result.signal}${tail ? `:\n${tail}` : ''}`,
    );
  }
  return result;
}
