/**
 * One MCP server in a sandbox, spoken to over its stdin and stdout (MCP's stdio transport:
 * one JSON-RPC message per line). Hand-written rather than the SDK's client because the
 * server is hostile data: every line is bounded before it is parsed (the SDK's reader grows
 * a buffer without limit), and so is everything it may send over a session; a server's own
 * requests (sampling, roots, elicitation) are refused, as this client offers no capability;
 * nothing it sends ever reaches the host but as text for the model.
 */
import { Writable } from 'node:stream';
import { HarnessError, UsageError } from '../errors.js';
import { formatDuration } from '../format.js';
import type { Sandbox, SandboxProcess } from '../sandbox/types.js';

/** A line longer than this ends the session: no answer the model could use is that long. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Everything a server may write over a session (answers, notifications, noise). */
export const MAX_SESSION_BYTES = 256 * 1024 * 1024;
/** Lines that are not JSON-RPC (a server that logs to stdout) tolerated before it is stopped. */
const MAX_NOISE_LINES = 200;
/** What is kept of its stderr, to say why it did not start. */
const STDERR_TAIL_BYTES = 4096;

/** A failure of one MCP server (it died, broke the protocol, answered an error, was slow). */
export class McpError extends HarnessError {
  constructor(
    message: string,
    readonly reason: 'closed' | 'timeout' | 'answer',
  ) {
    super('MCP', 'usage', message);
  }
}

/** Text a server sent, made safe to show: no control characters but newline and tab, bounded. */
export function serverText(text: string, maxChars: number): string {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '');
  return clean.length <= maxChars ? clean : `${clean.slice(0, maxChars)}…`;
}

interface Pending {
  resolve(result: unknown): void;
  reject(error: Error): void;
}

type Message = Record<string, unknown>;

export class McpConnection {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private received = 0;
  private noise = 0;
  private stderrTail = Buffer.alloc(0);
  private closedWith: string | undefined;
  private process: SandboxProcess | undefined;

  private constructor(readonly server: string) {}

  /** Starts `argv` in the sandbox as the sandbox user and holds its stdin and stdout. */
  static async spawn(
    sandbox: Sandbox,
    server: string,
    argv: readonly string[],
    env: Record<string, string>,
  ): Promise<McpConnection> {
    if (!sandbox.spawn) {
      throw new McpError(
        `MCP server ${server}: this sandbox backend cannot keep a process's stdin open`,
        'closed',
      );
    }
    const connection = new McpConnection(server);
    const stdout = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        connection.take(chunk);
        done();
      },
    });
    const stderr = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        const joined = Buffer.concat([connection.stderrTail, chunk]);
        connection.stderrTail = joined.subarray(Math.max(0, joined.length - STDERR_TAIL_BYTES));
        done();
      },
    });
    try {
      connection.process = await sandbox.spawn(argv, { stdout, stderr, env });
    } catch (error) {
      // A backend that cannot keep stdin open is the catalog's problem here; a dead sandbox is not.
      if (!(error instanceof UsageError)) throw error;
      throw new McpError(`MCP server ${server} could not be started: ${error.message}`, 'closed');
    }
    void connection.process.exited.then((code) => connection.fail(`exited with code ${code}`));
    return connection;
  }

  /** Why the session ended, or undefined while it lives. */
  get closedReason(): string | undefined {
    return this.closedWith;
  }

  /** The end of what it wrote to stderr, safe to show. */
  stderr(): string {
    return serverText(this.stderrTail.toString('utf8'), STDERR_TAIL_BYTES).trim();
  }

  /** Sends a request; resolves with its `result`, rejects with `McpError`. */
  request(method: string, params: Message, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    if (this.closedWith !== undefined) {
      return Promise.reject(
        new McpError(`MCP server ${this.server} is not running (${this.closedWith})`, 'closed'),
      );
    }
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.pending.delete(id);
      };
      const cancel = (reason: string) =>
        this.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason } });
      const timer = setTimeout(() => {
        settle();
        cancel('timeout');
        reject(
          new McpError(
            `MCP server ${this.server} did not answer ${method} within ${formatDuration(timeoutMs)}`,
            'timeout',
          ),
        );
      }, timeoutMs);
      const onAbort = () => {
        settle();
        cancel('interrupted');
        reject(Object.assign(new Error('interrupted'), { name: 'AbortError' }));
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, {
        resolve: (result) => {
          settle();
          resolve(result);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method: string, params: Message = {}): void {
    this.send({ jsonrpc: '2.0', method, params });
  }

  /** Stops the server and everything it started; every call still waiting fails. Idempotent. */
  async close(): Promise<void> {
    this.fail('stopped');
    await this.process?.kill();
  }

  private send(message: Message): void {
    if (this.closedWith !== undefined || !this.process) return;
    this.process.input.write(`${JSON.stringify(message)}\n`);
  }

  private fail(reason: string): void {
    if (this.closedWith !== undefined) return;
    this.closedWith = reason;
    this.partial = [];
    for (const pending of [...this.pending.values()])
      pending.reject(new McpError(`MCP server ${this.server} is not running (${reason})`, 'closed'));
    this.pending.clear();
    if (reason !== 'stopped' && !reason.startsWith('exited')) void this.process?.kill();
  }

  /** Bytes from its stdout: split into lines, each bounded before it is kept or parsed. */
  private take(chunk: Buffer): void {
    if (this.closedWith !== undefined) return;
    this.received += chunk.length;
    if (this.received > MAX_SESSION_BYTES) return this.fail(`wrote more than ${MAX_SESSION_BYTES} bytes`);
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.partialBytes + piece.length > MAX_MESSAGE_BYTES) return this.tooLong();
      const line = this.partialBytes === 0 ? piece : Buffer.concat([...this.partial, piece]);
      this.partial = [];
      this.partialBytes = 0;
      this.line(line.toString('utf8'));
      if (this.closedWith !== undefined) return;
    }
    const rest = chunk.subarray(start);
    if (rest.length === 0) return;
    if (this.partialBytes + rest.length > MAX_MESSAGE_BYTES) return this.tooLong();
    this.partial.push(Buffer.from(rest));
    this.partialBytes += rest.length;
  }

  private tooLong(): void {
    this.fail(`sent a message over ${MAX_MESSAGE_BYTES} bytes`);
  }

  private line(text: string): void {
    if (text.trim() === '') return;
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      message = undefined;
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      if (++this.noise > MAX_NOISE_LINES)
        this.fail(`wrote more than ${MAX_NOISE_LINES} lines that are not JSON-RPC`);
      return;
    }
    const m = message as Message;
    const id = m['id'];
    if (typeof m['method'] === 'string') {
      // Its own request: only `ping` is answered; this client offers nothing else.
      if (
        (typeof id === 'number' && Number.isSafeInteger(id)) ||
        (typeof id === 'string' && id.length <= 100)
      ) {
        this.send(
          m['method'] === 'ping'
            ? { jsonrpc: '2.0', id, result: {} }
            : { jsonrpc: '2.0', id, error: { code: -32601, message: 'not offered by this client' } },
        );
      }
      return;
    }
    const pending = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (!pending) return;
    const error = m['error'];
    if (typeof error === 'object' && error !== null) {
      const said = (error as Message)['message'];
      pending.reject(
        new McpError(
          `MCP server ${this.server} answered an error: ${serverText(typeof said === 'string' ? said : 'no message', 1000)}`,
          'answer',
        ),
      );
      return;
    }
    pending.resolve(m['result']);
  }
}
