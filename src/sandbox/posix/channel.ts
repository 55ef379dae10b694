/**
 * The fast path for the agent's commands: one long-lived process per sandbox (started over
 * the backend's exec stream: no network, no port) runs many commands, so a tool call costs a
 * line written to its stdin instead of an exec round trip. Same semantics as one exec per
 * command: an in-container `timeout`, the host's deadline, Ctrl-C, the whole tree killed by
 * its token, output capped to head and tail, background children cut off.
 *
 * What comes back over the channel is the command's own word: a process of the sandbox could
 * write a forged end marker into the channel's output. So only calls whose result is the
 * agent's own information use it (its tool calls: commands, file reads, writes and listings);
 * verdicts (tests, the change list, the export, the freeze) never do.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { abortError } from '../../errors.js';
import { CappedOutput } from '../output.js';
import {
  DEFAULT_EXEC_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  WORKSPACE,
  type ExecOptions,
  type ExecResult,
} from '../types.js';
import { CHANNEL_SCRIPT } from './scripts.js';
import type { ScriptResult } from './exec.js';
import type { StartedProcess, Transport } from './transport.js';

/** How long past its own timeout the host waits for a command before it kills the tree. */
const HOST_GRACE_MS = 7_000;
/** After a kill, how long the end markers may take before the channel is given up. */
const MARKER_GRACE_MS = 5_000;

/** The channel stopped (its process died, or it stopped answering); the command's fate is unknown. */
export class ChannelLost extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChannelLost';
  }
}

/** One of the two output streams of the current command, up to its end marker. */
class StreamCut {
  private held = Buffer.alloc(0);
  exitCode: number | undefined;

  constructor(
    private readonly marker: Buffer,
    readonly sink: CappedOutput,
  ) {}

  /** Takes a chunk; true once the end marker (and the exit code after it) arrived. */
  push(chunk: Buffer): boolean {
    if (this.exitCode !== undefined) return true;
    const data = Buffer.concat([this.held, chunk]);
    const at = data.indexOf(this.marker);
    if (at >= 0) {
      const end = data.indexOf(0, at + this.marker.length);
      if (end < 0) {
        // The exit code is still on its way; everything before the marker is output.
        this.sink.write(data.subarray(0, at));
        this.held = data.subarray(at);
        return false;
      }
      this.sink.write(data.subarray(0, at));
      this.exitCode = Number(data.subarray(at + this.marker.length, end).toString('ascii'));
      this.held = Buffer.alloc(0);
      return true;
    }
    // The tail could be the start of the marker: hold it back until the next chunk.
    const keep = Math.min(data.length, this.marker.length + 8);
    this.sink.write(data.subarray(0, data.length - keep));
    this.held = data.subarray(data.length - keep);
    return false;
  }
}

interface Pending {
  out: StreamCut;
  err: StreamCut;
  settle: () => void;
}

interface RawOptions {
  stdin?: Buffer;
  timeoutMs?: number;
  maxStdoutBytes: number;
  maxStderrBytes: number;
  signal?: AbortSignal;
}

interface RawResult {
  exitCode: number;
  out: CappedOutput;
  err: CappedOutput;
  timedOut: boolean;
  durationMs: number;
}

export class CommandChannel {
  private current: Pending | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private lost: string | undefined;

  private constructor(
    private readonly process: StartedProcess,
    private readonly input: NodeJS.WritableStream,
  ) {
    void process.streamEnded.then(() => this.close('the command channel stopped'));
    void process.exited
      .then(() => this.close('the command channel stopped'))
      .catch(() => this.close('the command channel stopped'));
  }

  /** Starts the channel's process; undefined when the backend cannot keep stdin open. */
  static async open(transport: Transport): Promise<CommandChannel | undefined> {
    const route = (pick: (p: Pending) => StreamCut) =>
      new Writable({
        write: (chunk: Buffer, _encoding, callback) => {
          const pending = holder.channel?.current;
          if (
            pending &&
            pick(pending).push(chunk) &&
            pending.out.exitCode !== undefined &&
            pending.err.exitCode !== undefined
          ) {
            pending.settle();
          }
          callback();
        },
      });
    // The routes need the channel, which needs the started process: filled in just below.
    const holder: { channel?: CommandChannel } = {};
    const process = await transport.start({
      argv: ['/bin/sh', '-c', CHANNEL_SCRIPT, 'sandbox-channel'],
      cwd: WORKSPACE,
      env: [],
      stdin: 'stream',
      stdout: route((p) => p.out),
      stderr: route((p) => p.err),
    });
    if (!process.input) {
      process.detach();
      return undefined;
    }
    holder.channel = new CommandChannel(process, process.input);
    return holder.channel;
  }

  get usable(): boolean {
    return this.lost === undefined;
  }

  close(reason = 'closed'): void {
    if (this.lost !== undefined) return;
    this.lost = reason;
    this.current?.settle();
    this.process.detach();
  }

  /** Runs one command (one at a time); `kill` kills a command's tree by its token. */
  async run(
    command: string,
    options: ExecOptions,
    kill: (token: string) => Promise<void>,
  ): Promise<ExecResult> {
    const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const raw = await this.enqueue(command, { ...options, maxStdoutBytes: max, maxStderrBytes: max }, kill);
    return {
      exitCode: raw.exitCode,
      stdout: raw.out.text(),
      stderr: raw.err.text(),
      timedOut: raw.timedOut,
      truncated: raw.out.truncated || raw.err.truncated,
      durationMs: raw.durationMs,
    };
  }

  /**
   * Runs one of the harness's scripts for the agent's own file calls (a read, a listing, a
   * write), bytes exact, with `stdin` handed over through the channel: what `runScript` does
   * with one exec. The result is the sandbox's word, like every channel result.
   */
  async script(
    command: string,
    options: {
      stdin?: Buffer;
      timeoutMs?: number;
      maxStdoutBytes: number;
      maxStderrBytes?: number;
      signal?: AbortSignal;
    },
    kill: (token: string) => Promise<void>,
  ): Promise<ScriptResult> {
    const raw = await this.enqueue(
      command,
      { ...options, maxStderrBytes: options.maxStderrBytes ?? 64 * 1024 },
      kill,
    );
    const stderrBytes = raw.err.bytes();
    return {
      exitCode: raw.timedOut ? 124 : raw.exitCode,
      stdout: raw.out.bytes(),
      stdoutOverflowed: raw.out.truncated,
      stderr: raw.timedOut ? 'timed out' : stderrBytes.toString('utf8'),
      stderrBytes,
      stderrOverflowed: raw.err.truncated,
    };
  }

  private enqueue(
    command: string,
    options: RawOptions,
    kill: (token: string) => Promise<void>,
  ): Promise<RawResult> {
    const result = this.queue.then(() => this.runNow(command, options, kill));
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async runNow(
    command: string,
    options: RawOptions,
    kill: (token: string) => Promise<void>,
  ): Promise<RawResult> {
    if (this.lost !== undefined) throw new ChannelLost(this.lost);
    if (options.signal?.aborted) throw abortError(options.signal);
    const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
    const timeoutSec = Math.max(1, Math.ceil(timeoutMs / 1000));
    const token = randomBytes(8).toString('hex');
    const marker = Buffer.from(`\0SHX ${token} `);
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    const pending: Pending = {
      out: new StreamCut(marker, new CappedOutput(options.maxStdoutBytes)),
      err: new StreamCut(marker, new CappedOutput(options.maxStderrBytes)),
      settle,
    };
    this.current = pending;
    const started = Date.now();
    const lines = command.split('\n');
    const stdin = options.stdin ?? Buffer.alloc(0);
    this.input.write(`${token} ${timeoutSec} ${lines.length} ${stdin.length}\n${lines.join('\n')}\n`);
    if (stdin.length > 0) this.input.write(stdin);

    let abortListener: (() => void) | undefined;
    const aborted = new Promise<'aborted'>((resolve) => {
      abortListener = () => resolve('aborted');
      options.signal?.addEventListener('abort', abortListener, { once: true });
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'deadline'>((resolve) => {
      timer = setTimeout(() => resolve('deadline'), timeoutSec * 1000 + HOST_GRACE_MS);
    });
    try {
      const first = await Promise.race([done.then(() => 'done' as const), aborted, deadline]);
      if (first !== 'done') {
        await kill(token);
        // The server goes on once the tree is gone; its markers keep the channel in step.
        const markers = await Promise.race([
          done.then(() => true),
          new Promise<boolean>((resolve) => setTimeout(() => resolve(false), MARKER_GRACE_MS)),
        ]);
        if (!markers) this.close('the command channel did not answer after a kill');
        if (first === 'aborted') throw abortError(options.signal!);
      }
      if (
        this.lost !== undefined &&
        (pending.out.exitCode === undefined || pending.err.exitCode === undefined)
      ) {
        throw new ChannelLost(this.lost);
      }
      const code = first === 'deadline' ? 137 : (pending.out.exitCode ?? 137);
      const durationMs = Date.now() - started;
      const timedOut =
        first === 'deadline' || ((code === 124 || code === 137) && durationMs >= timeoutSec * 1000 - 50);
      // `timeout` killed its process group; what escaped it is found by its token.
      if (timedOut && first === 'done') await kill(token);
      return { exitCode: code, out: pending.out.sink, err: pending.err.sink, timedOut, durationMs };
    } finally {
      if (timer) clearTimeout(timer);
      if (abortListener) options.signal?.removeEventListener('abort', abortListener);
      if (this.current === pending) this.current = undefined;
    }
  }
}
