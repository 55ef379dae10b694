/**
 * The fast path for the agent's commands: one long-lived process per sandbox (started over
 * the backend's exec stream: no network, no port) runs many commands, so a tool call costs a
 * line written to its stdin instead of an exec round trip. Same semantics as one exec per
 * command: an in-container `timeout`, the host's deadline, Ctrl-C, the whole tree killed by
 * its token, output capped to head and tail, background children cut off.
 *
 * Whatever the command prints, it cannot end its frame or fake its exit code: the server
 * relays its output base64-encoded, and only the server writes the `\0`-delimited end records
 * (see CHANNEL_SCRIPT); what the host holds is bounded whatever arrives (FrameReader). The
 * server itself runs as the sandbox user, though, so a process that traces it (or opens its
 * streams under /proc) could still lie about its own result. So only calls whose result is
 * the agent's own information use the channel (its tool calls: commands, file reads, writes
 * and listings); verdicts (tests, the change list, the export) never do. The freeze script
 * may go over it, because its word is never believed: root's look after it decides. The
 * removal of held-out files goes over it as its very first command, when the sandbox was
 * just started and nothing but the harness's own processes runs in it to lie.
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

/** Longest frame record (`SHX <token> <exit code>`): anything longer is not the server's. */
const MAX_RECORD_BYTES = 64;
const NUL = 0;

/**
 * One of the channel's two streams, parsed as it arrives with bounded memory whatever the
 * sandbox sends: base64 text (a command's output, decoded into the current command's sink)
 * and `\0SHX <token> <code>\0` records between them. The command's bytes only ever arrive
 * encoded, so nothing it prints can open or end a record; a record that does not close
 * within a few bytes, or any byte outside the protocol, is a broken channel, never held.
 */
class FrameReader {
  private inRecord = false;
  private record = '';
  /** Base64 characters of the current command not yet decoded (fewer than 4). */
  private carry = '';

  constructor(
    private readonly onData: (bytes: Buffer) => void,
    private readonly onRecord: (token: string, code: number) => void,
    private readonly onBroken: (why: string) => void,
  ) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.inRecord) {
        const end = chunk.indexOf(NUL, at);
        const piece = chunk.subarray(at, end < 0 ? chunk.length : end).toString('latin1');
        if (this.record.length + piece.length > MAX_RECORD_BYTES) return this.onBroken('an overlong frame');
        this.record += piece;
        if (end < 0) return;
        at = end + 1;
        this.inRecord = false;
        const match = /^SHX ([0-9a-f]{1,32}) (\d{1,3})$/.exec(this.record);
        this.record = '';
        if (!match || this.carry.length > 0) return this.onBroken('a malformed frame');
        this.onRecord(match[1]!, Number(match[2]));
        continue;
      }
      const start = chunk.indexOf(NUL, at);
      const text = chunk.subarray(at, start < 0 ? chunk.length : start).toString('latin1');
      if (!/^[A-Za-z0-9+/=]*$/.test(text)) return this.onBroken('bytes outside the framing');
      this.decode(text);
      if (start < 0) return;
      at = start + 1;
      this.inRecord = true;
    }
  }

  private decode(text: string): void {
    if (text.length === 0) return;
    const all = this.carry + text;
    const whole = all.length - (all.length % 4);
    this.carry = all.slice(whole);
    if (whole > 0) this.onData(Buffer.from(all.slice(0, whole), 'base64'));
  }
}

interface Pending {
  token: string;
  out: CappedOutput;
  err: CappedOutput;
  outCode?: number;
  errCode?: number;
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
  /** Commands handed to the channel and not yet settled (running or waiting their turn). */
  private inFlight = 0;
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
    // The readers need the channel, which needs the started process: filled in just below.
    const holder: { channel?: CommandChannel } = {};
    const route = (stream: 'out' | 'err') => {
      const reader = new FrameReader(
        (bytes) => holder.channel?.current?.[stream].write(bytes),
        (token, code) => holder.channel?.ended(stream, token, code),
        (why) => holder.channel?.close(`the command channel sent ${why}`),
      );
      return new Writable({
        write: (chunk: Buffer, _encoding, callback) => {
          if (holder.channel?.usable !== false) reader.push(chunk);
          callback();
        },
      });
    };
    const process = await transport.start({
      argv: ['/bin/sh', '-c', CHANNEL_SCRIPT, 'sandbox-channel'],
      cwd: WORKSPACE,
      env: [],
      stdin: 'stream',
      stdout: route('out'),
      stderr: route('err'),
    });
    if (!process.input) {
      process.detach();
      return undefined;
    }
    holder.channel = new CommandChannel(process, process.input);
    return holder.channel;
  }

  /** A stream's end record: the current command's, or a broken channel. */
  private ended(stream: 'out' | 'err', token: string, code: number): void {
    const pending = this.current;
    if (!pending || pending.token !== token) {
      this.close('the command channel ended a command that was not running');
      return;
    }
    if (stream === 'out') pending.outCode = code;
    else pending.errCode = code;
    if (pending.outCode !== undefined && pending.errCode !== undefined) pending.settle();
  }

  get usable(): boolean {
    return this.lost === undefined;
  }

  /** Usable, and nothing runs or waits on it: a command sent now starts at once. */
  get idle(): boolean {
    return this.lost === undefined && this.inFlight === 0;
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
    this.inFlight += 1;
    const result = this.queue
      .then(() => this.runNow(command, options, kill))
      .finally(() => (this.inFlight -= 1));
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
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    const pending: Pending = {
      token,
      out: new CappedOutput(options.maxStdoutBytes),
      err: new CappedOutput(options.maxStderrBytes),
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
      if (this.lost !== undefined && (pending.outCode === undefined || pending.errCode === undefined)) {
        throw new ChannelLost(this.lost);
      }
      const code = first === 'deadline' ? 137 : (pending.outCode ?? 137);
      const durationMs = Date.now() - started;
      const timedOut =
        first === 'deadline' || ((code === 124 || code === 137) && durationMs >= timeoutSec * 1000 - 50);
      // `timeout` killed its process group; what escaped it is found by its token.
      if (timedOut && first === 'done') await kill(token);
      return { exitCode: code, out: pending.out, err: pending.err, timedOut, durationMs };
    } finally {
      if (timer) clearTimeout(timer);
      if (abortListener) options.signal?.removeEventListener('abort', abortListener);
      if (this.current === pending) this.current = undefined;
    }
  }
}
