/**
 * A step on a node outside any container (the node's engine CLI, a fence, a probe): srun with
 * the job's address, or a job of its own when there is no job yet. The bytes it writes are the
 * node's word, read with caps by the caller.
 */
import { spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { abortError } from '../../errors.js';
import { EXPORT_NONE, type SlurmClient } from './slurm-client.js';
import { stepArgs } from './srun-transport.js';

export interface NodeStepOptions {
  /** A buffer, or a stream (a build context: piped, never held whole in memory). */
  stdin?: Buffer | Readable;
  /** Where stdout goes as it arrives; default: collected (up to `maxStdoutBytes`). */
  stdout?: Writable;
  maxStdoutBytes?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface NodeStepResult {
  code: number;
  stdout: Buffer;
  stderr: string;
}

/** Where a node step runs: inside a job on its node, or as a job of its own (any node the placement allows, or one). */
export type StepPlace = { job: string; node: string } | { node?: string };

export function placeArgs(client: SlurmClient, place: StepPlace): string[] {
  if ('job' in place) return stepArgs(place);
  return [
    '--quiet',
    '--unbuffered',
    '--job-name=sandbox-harness.operator',
    '--nodes=1',
    '--ntasks=1',
    '--time=10',
    EXPORT_NONE,
    ...client.placementArgs(),
    ...(place.node ? [`--nodelist=${place.node}`] : []),
  ];
}

/** `/bin/sh -c script sh args...` on a node. Never rejects for a non-zero exit. */
export function nodeStep(
  client: SlurmClient,
  place: StepPlace,
  script: string,
  args: readonly string[],
  options: NodeStepOptions = {},
): Promise<NodeStepResult> {
  try {
    client.requireConf();
  } catch (error) {
    return Promise.reject(error as Error);
  }
  if (options.signal?.aborted) return Promise.reject(abortError(options.signal));
  const max = options.maxStdoutBytes ?? 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn('srun', [...placeArgs(client, place), '/bin/sh', '-c', script, 'sh', ...args], {
      env: client.env,
      stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const out: Buffer[] = [];
    let kept = 0;
    const err: Buffer[] = [];
    child.stdout?.on('data', (d: Buffer) => {
      if (options.stdout) options.stdout.write(d);
      else if (kept < max) {
        out.push(d.subarray(0, max - kept));
        kept += Math.min(d.length, max - kept);
      }
    });
    child.stderr?.on('data', (d: Buffer) => {
      if (err.length < 256) err.push(d);
    });
    if (child.stdin) {
      child.stdin.on('error', () => undefined);
      if (Buffer.isBuffer(options.stdin)) child.stdin.end(options.stdin);
      else if (options.stdin) {
        // A context that fails while it streams (a file changed since the scan) ends the step:
        // the node must never build from half a context.
        options.stdin.on('error', () => child.kill('SIGTERM'));
        options.stdin.pipe(child.stdin);
      }
    }
    const timer = setTimeout(() => child.kill('SIGTERM'), options.timeoutMs ?? 120_000);
    timer.unref();
    const onAbort = () => child.kill('SIGTERM');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(client.unavailable(`cannot run srun: ${error.message}`, ''));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (options.signal?.aborted) return reject(abortError(options.signal));
      resolve({ code: code ?? 128, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8') });
    });
  });
}
