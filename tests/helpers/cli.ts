/** Runs the built CLI the way a user does, with a clean environment (no model keys). */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, lstatSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { CliContext } from '../../src/cli/cli-context.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = join(ROOT, 'dist', 'main.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(ANTHROPIC|OPENAI|SANDBOX_HARNESS)_/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, NO_COLOR: '1', ...extra };
}

export function startCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {},
): {
  child: ChildProcess;
  done: Promise<CliResult>;
} {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd ?? ROOT,
    env: options.env ?? cleanEnv(),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  // A command that exits without reading its input closes the pipe first: not its result.
  child.stdin!.on('error', () => undefined);
  if (options.input !== undefined) child.stdin!.end(options.input);
  else child.stdin!.end();
  const done = new Promise<CliResult>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { child, done };
}

export function runCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<CliResult> {
  return startCli(args, options).done;
}

/** A hash of every file's path, mode and bytes under `dir` (symlinks by target), minus run records. */
export function treeHash(dir: string, skip: RegExp = /^\.sandbox-harness(\/|$)/): string {
  const hash = createHash('sha256');
  const walk = (current: string) => {
    for (const name of readdirSync(current).sort()) {
      const full = join(current, name);
      const rel = relative(dir, full);
      if (skip.test(rel)) continue;
      const stat = lstatSync(full);
      hash.update(`${rel}\0${stat.mode}\0`);
      if (stat.isDirectory()) walk(full);
      else if (stat.isFile()) hash.update(readFileSync(full));
    }
  };
  walk(dir);
  return hash.digest('hex');
}

/** A CLI context for calling a command in-process: stdout captured (`out()`), no TTY, no env. */
export function capturedContext(cwd: string): CliContext & { out: () => string } {
  const stdout = new PassThrough();
  const chunks: Buffer[] = [];
  stdout.on('data', (c: Buffer) => chunks.push(c));
  return {
    stdout,
    stderr: new PassThrough(),
    isTTY: false,
    cwd,
    env: {},
    signal: new AbortController().signal,
    out: () => Buffer.concat(chunks).toString('utf8'),
  };
}
