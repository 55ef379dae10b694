/**
 * Commands inside a sandbox under limits, on any backend that can start a process
 * (`Transport`): an in-container `timeout -k`, a host-side deadline, a Ctrl-C that kills the
 * whole process tree, and output capped to its head and tail.
 */
import { randomBytes } from 'node:crypto';
import type { Writable } from 'node:stream';
import { abortError, SandboxDead } from '../../errors.js';
import { CappedOutput } from '../output.js';
import {
  DEFAULT_EXEC_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  WORKSPACE,
  type ExecOptions,
  type ExecResult,
} from '../types.js';
import { BoundedBuffer } from './sinks.js';
import { KILL_TREE_SCRIPT } from './scripts.js';
import { toWorkspacePath } from './paths.js';
import type { ProcessSpec, StartedProcess, Transport } from './transport.js';

/** Seconds between the in-container TERM and KILL. */
const KILL_GRACE_SEC = 2;
/** How long past its own timeout the host waits before it kills the process tree itself. */
const HOST_GRACE_MS = 5_000;

/**
 * Runs `$3` under `timeout` with its output relayed through fifos. Every process of the
 * command inherits `SANDBOX_HARNESS_EXEC=<token>`, which names the tree for the kill on a
 * timeout, the host's deadline or Ctrl-C, even a child that left the process group
 * (`setsid`) or was orphaned by a double fork. The relay is there because a background child that
 * keeps the exec's own stdout open makes the daemon stall the container's next exec for
 * seconds; with fifos, once the command has exited the relays drain what is left and are
 * stopped, so the exec's streams always close.
 */
export const EXEC_WRAPPER = [
  'd="/tmp/.sandbox-harness-exec-$1"',
  'mkdir -m 700 "$d" && mkfifo "$d/out" "$d/err" || { echo "sandbox-harness: cannot create $d (is /tmp full?)" >&2; exit 125; }',
  'cat "$d/out" & o=$!',
  'cat "$d/err" >&2 & e=$!',
  `timeout -k ${KILL_GRACE_SEC} "$2" env SANDBOX_HARNESS_EXEC="$1" /bin/sh -c "$3" >"$d/out" 2>"$d/err" </dev/null & t=$!`,
  'echo "$t" > "$d/pid"',
  'wait "$t"; rc=$?',
  '( sleep 0.3; kill "$o" "$e" ) >/dev/null 2>&1 & k=$!',
  'wait "$o" "$e" 2>/dev/null',
  'kill "$k" 2>/dev/null',
  'rm -rf "$d"',
  'exit "$rc"',
].join('\n');

/**
 * Resolves after `ms` unless `clear()` comes first. Each command races one of these; a timer
 * left behind would keep the process alive for the whole deadline after the command ended.
 */
function sleep(ms: number): Promise<void> & { clear(): void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Object.assign(promise, { clear: () => clearTimeout(timer) });
}

function envList(env: Record<string, string> | undefined): string[] {
  return Object.entries(env ?? {}).map(([k, v]) => `${k}=${v}`);
}

/**
 * Resolves when `signal` aborts; `clear()` removes its listener. Every command of a run
 * waits on the run's one signal, so a listener left behind per command piles up there
 * (MaxListenersExceededWarning after ten file tool calls, and a leak for the run's length).
 */
function whenAborted(signal: AbortSignal | undefined): Promise<'aborted'> & { clear(): void } {
  let listener: (() => void) | undefined;
  const promise = new Promise<'aborted'>((resolve) => {
    if (!signal) return;
    if (signal.aborted) resolve('aborted');
    else {
      listener = () => resolve('aborted');
      signal.addEventListener('abort', listener, { once: true });
    }
  });
  return Object.assign(promise, {
    clear: () => {
      if (listener) signal?.removeEventListener('abort', listener);
    },
  });
}

/** The first of a command's exit, its host deadline and an abort; the losers' timer and listener are removed. */
async function firstOf<T>(
  exited: Promise<T>,
  deadlineMs: number,
  signal: AbortSignal | undefined,
): Promise<T | 'deadline' | 'aborted'> {
  const deadline = sleep(deadlineMs);
  const aborted = whenAborted(signal);
  try {
    return await Promise.race([exited, deadline.then(() => 'deadline' as const), aborted]);
  } finally {
    deadline.clear();
    aborted.clear();
  }
}

/** Waits for `promise` at most `ms`, leaving no timer behind. */
async function atMost(promise: Promise<unknown>, ms: number): Promise<void> {
  const timer = sleep(ms);
  try {
    await Promise.race([promise, timer]);
  } finally {
    timer.clear();
  }
}

/** A command of the model or the catalog, under every limit. */
export async function runCommand(
  transport: Transport,
  baseEnv: readonly string[],
  command: string,
  options: ExecOptions = {},
): Promise<ExecResult> {
  if (options.signal?.aborted) throw abortError(options.signal);
  const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  const maxOutput = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const token = randomBytes(6).toString('hex');
  const timeoutSec = Math.max(1, Math.ceil(timeoutMs / 1000));
  const stdout = new CappedOutput(maxOutput);
  const stderr = new CappedOutput(maxOutput);
  const started = Date.now();
  const running = await transport.start({
    argv: ['/bin/sh', '-c', EXEC_WRAPPER, 'sandbox-exec', token, String(timeoutSec), command],
    cwd: options.cwd ? toWorkspacePath(options.cwd) : WORKSPACE,
    env: [...baseEnv, ...envList(options.env)],
    stdout,
    stderr,
  });
  const deadline = timeoutSec * 1000 + KILL_GRACE_SEC * 1000 + HOST_GRACE_MS;
  const first = await firstOf(
    running.exited.then((code) => ({ code })),
    deadline,
    options.signal,
  );
  let code: number;
  let hostTimedOut = false;
  if (typeof first === 'object') {
    code = first.code;
    // Give the backend a moment to deliver what the command wrote before it exited.
    await atMost(running.streamEnded, 300);
    running.detach();
  } else {
    running.detach();
    await killTree(transport, token);
    if (first === 'aborted') throw abortError(options.signal!);
    hostTimedOut = true;
    code = 137;
  }
  const durationMs = Date.now() - started;
  // GNU timeout exits 124 after TERM, 137 when it had to KILL.
  const timedOut = hostTimedOut || ((code === 124 || code === 137) && durationMs >= timeoutSec * 1000 - 50);
  // `timeout` killed its process group; what escaped the group is found by its token.
  if (timedOut && !hostTimedOut) await killTree(transport, token);
  return {
    exitCode: code,
    stdout: stdout.text(),
    stderr: stderr.text(),
    timedOut,
    truncated: stdout.truncated || stderr.truncated,
    durationMs,
  };
}

/** Kills every process of a command, found by the token in its environment (see the wrapper). */
export async function killTree(transport: Transport, token: string): Promise<void> {
  try {
    const killer = await transport.start({
      argv: ['/bin/sh', '-c', KILL_TREE_SCRIPT, 'sandbox-kill', token],
      cwd: '/',
      env: [],
      stdout: new BoundedBuffer(1024),
      stderr: new BoundedBuffer(1024),
    });
    await atMost(killer.exited, 5000);
    killer.detach();
  } catch (error) {
    if (!(error instanceof SandboxDead)) throw error;
  }
}

/** The environment of the harness's scripts: the C locale and the system's own programs. */
export const SCRIPT_ENV = ['LC_ALL=C', 'PATH=/usr/local/bin:/usr/bin:/bin'] as const;

export interface ScriptOptions {
  /** Bytes of stdout kept; more is an overflow the caller must treat as an error. */
  maxStdoutBytes: number;
  /** Bytes of stderr kept (default 64 KiB), for scripts that put data there too. */
  maxStderrBytes?: number;
  stdin?: Buffer;
  /** Where stdout goes instead of a buffer (a stream the caller parses as it arrives). */
  stdout?: Writable;
  timeoutMs?: number;
  signal?: AbortSignal;
  cwd?: string;
  user?: ProcessSpec['user'];
}

export interface ScriptResult {
  exitCode: number;
  stdout: Buffer;
  stdoutOverflowed: boolean;
  stderr: string;
  stderrBytes: Buffer;
  stderrOverflowed: boolean;
}

/**
 * One of the harness's own scripts (a listing, a read, a write, a scan): raw bytes out,
 * bounded by an in-container timeout; an abort stops the host waiting at once (the script
 * then ends by its own timeout). Throws `SandboxDead`, or the signal's reason.
 */
export async function runScript(
  transport: Transport,
  script: string,
  args: readonly string[],
  options: ScriptOptions,
): Promise<ScriptResult> {
  if (options.signal?.aborted) throw abortError(options.signal);
  const timeoutSec = scriptTimeoutSec(options);
  const sinks = scriptSinks(options);
  const running = await transport.start({
    argv: ['timeout', '-k', '1', String(timeoutSec), '/bin/sh', '-c', script, 'sandbox-harness', ...args],
    ...scriptSpec(options, sinks),
    ...(options.stdin ? { stdin: options.stdin } : {}),
  });
  return scriptEnding(running, sinks, timeoutSec, options.signal);
}

/** A script started ahead of time, waiting for `go` (see `standbyScript`). */
export interface StandbyScript {
  /** Still waiting: its process has not ended. */
  readonly waiting: boolean;
  /** Runs it now and waits for it as `runScript` does. Once. */
  go(signal?: AbortSignal): Promise<ScriptResult>;
  /** Never runs it (it ends on its stdin's end); nothing, once `go` was called. */
  cancel(): void;
}

/**
 * Waits on stdin's first line before it runs the script; on end of file it exits, having
 * run nothing. $0 the script, $1 its timeout, the rest its arguments.
 */
const STANDBY_WRAPPER =
  'read -r _ || exit 0; t=$1; shift; exec timeout -k 1 "$t" /bin/sh -c "$0" sandbox-harness "$@"';

/**
 * Starts one of the harness's scripts now and runs it later, when `go` is called: the exec
 * round trip is paid ahead, off the path that waits for the answer. Undefined when the
 * backend cannot keep stdin open. Throws `SandboxDead`.
 */
export async function standbyScript(
  transport: Transport,
  script: string,
  args: readonly string[],
  options: Omit<ScriptOptions, 'stdin' | 'signal'>,
): Promise<StandbyScript | undefined> {
  const timeoutSec = scriptTimeoutSec(options);
  const sinks = scriptSinks(options);
  const running = await transport.start({
    argv: ['/bin/sh', '-c', STANDBY_WRAPPER, script, String(timeoutSec), ...args],
    ...scriptSpec(options, sinks),
    stdin: 'stream',
  });
  const input = running.input;
  if (!input) {
    running.detach();
    return undefined;
  }
  let ended = false;
  let used = false;
  const end = () => (ended = true);
  running.exited.then(end, end);
  running.streamEnded.then(end, end);
  // A write to a stream that has just closed fails there; `go` then answers as the ending did.
  input.on('error', () => undefined);
  return {
    get waiting() {
      return !ended && !used;
    },
    go(signal) {
      if (used) throw new Error('a standby script runs once');
      used = true;
      if (signal?.aborted) {
        running.detach();
        return Promise.reject(abortError(signal));
      }
      input.write('go\n');
      return scriptEnding(running, sinks, timeoutSec, signal);
    },
    cancel() {
      // One that was told to go is left to end (the caller awaits it); detaching it would
      // leave that wait to the host's deadline.
      if (used) return;
      used = true;
      running.detach();
    },
  };
}

function scriptTimeoutSec(options: { timeoutMs?: number }): number {
  return Math.max(1, Math.ceil((options.timeoutMs ?? 60_000) / 1000));
}

interface ScriptSinks {
  stdout: BoundedBuffer;
  stderr: BoundedBuffer;
}

function scriptSinks(options: Pick<ScriptOptions, 'maxStdoutBytes' | 'maxStderrBytes'>): ScriptSinks {
  return {
    stdout: new BoundedBuffer(options.maxStdoutBytes),
    stderr: new BoundedBuffer(options.maxStderrBytes ?? 64 * 1024),
  };
}

function scriptSpec(
  options: Pick<ScriptOptions, 'cwd' | 'user' | 'stdout'>,
  sinks: ScriptSinks,
): Omit<ProcessSpec, 'argv'> {
  return {
    cwd: options.cwd ?? WORKSPACE,
    env: [...SCRIPT_ENV],
    ...(options.user ? { user: options.user } : {}),
    stdout: options.stdout ?? sinks.stdout,
    stderr: sinks.stderr,
  };
}

/** Waits for a started script to end (or its host deadline, or the abort) and gives its result. */
async function scriptEnding(
  running: StartedProcess,
  sinks: ScriptSinks,
  timeoutSec: number,
  signal: AbortSignal | undefined,
): Promise<ScriptResult> {
  const { stdout: buffer, stderr } = sinks;
  const first = await firstOf(
    running.exited.then((code) => ({ code })),
    timeoutSec * 1000 + HOST_GRACE_MS,
    signal,
  );
  if (typeof first !== 'object') {
    running.detach();
    if (first === 'aborted') throw abortError(signal!);
    return {
      exitCode: 124,
      stdout: buffer.bytes(),
      stdoutOverflowed: buffer.overflowed,
      stderr: 'timed out',
      stderrBytes: Buffer.alloc(0),
      stderrOverflowed: false,
    };
  }
  await atMost(running.streamEnded, 2000);
  running.detach();
  return {
    exitCode: first.code,
    stdout: buffer.bytes(),
    stdoutOverflowed: buffer.overflowed,
    stderr: stderr.bytes().toString('utf8'),
    stderrBytes: stderr.bytes(),
    stderrOverflowed: stderr.overflowed,
  };
}
