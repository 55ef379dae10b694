/**
 * One sandbox's end of the bridge: the relay process started in the sandbox (relay.ts) and
 * the frames it exchanges with the host. Every frame from the sandbox is hostile data: its
 * size is capped before it is held, its type and request id must make sense (hello first,
 * ids only ever increasing, no more requests in flight than allowed), its head must parse
 * to the expected shape. The first frame that breaks a rule closes the bridge for that
 * sandbox (the relay is killed, calls in flight are cut); nothing it sends can throw in the
 * host, and a relay that stops reading its answers is dropped rather than buffered for.
 */
import { Writable } from 'node:stream';
import { ConfigError, abortError } from '../errors.js';
import { formatDuration } from '../format.js';
import type { Sandbox, SandboxProcess } from '../sandbox/types.js';
import type { BridgeAnswer, ModelBridge } from './bridge.js';
import type { RelayedRequest } from './checks.js';
import { encodeFrame, FRAME, frameDecoder } from './frames.js';
import { RELAY_DEFAULTS, relayArgv } from './relay.js';

export interface SessionLimits {
  /** Requests the relay may have in flight at once (it queues the rest itself). */
  maxConcurrent: number;
  /** Largest request body; a frame may hold this plus its head. */
  maxRequestBytes: number;
  /** Largest request head (method, path, headers) as JSON. */
  maxHeadBytes: number;
  /** Largest piece of an answer per frame. */
  maxBodyFrameBytes: number;
  /** How long the relay may leave its stdin unread while answers wait, before it is dropped. */
  drainTimeoutMs: number;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = {
  maxConcurrent: RELAY_DEFAULTS.maxConcurrent,
  maxRequestBytes: RELAY_DEFAULTS.maxRequestBytes,
  maxHeadBytes: 64 * 1024,
  maxBodyFrameBytes: 64 * 1024,
  drainTimeoutMs: 30_000,
};

/** A frame that breaks the protocol; its message says how, in words for the run's log. */
class BadFrame extends Error {}

const MAX_HEADERS = 200;
/** Bytes queued for the relay before an answer waits for them to be written. */
const MAX_OUTBOX_BYTES = 256 * 1024;
const METHOD = /^[A-Z]{1,16}$/;

/** A request frame's payload as a request, or a BadFrame. */
function parseRequest(payload: Buffer, maxHeadBytes: number): RelayedRequest {
  if (payload.length < 4) throw new BadFrame('a request frame without a head');
  const headBytes = payload.readUInt32BE(0);
  if (headBytes > maxHeadBytes || 4 + headBytes > payload.length)
    throw new BadFrame('a request head of a bad size');
  let head: unknown;
  try {
    head = JSON.parse(payload.subarray(4, 4 + headBytes).toString('utf8'));
  } catch {
    throw new BadFrame('a request head that is not JSON');
  }
  const { method, path, headers } = (head ?? {}) as { method?: unknown; path?: unknown; headers?: unknown };
  if (typeof method !== 'string' || !METHOD.test(method)) throw new BadFrame('a request with a bad method');
  if (typeof path !== 'string' || !path.startsWith('/') || path.length > 8192) {
    throw new BadFrame('a request with a bad path');
  }
  if (!Array.isArray(headers) || headers.length > MAX_HEADERS)
    throw new BadFrame('a request with bad headers');
  const pairs: (readonly [string, string])[] = [];
  for (const pair of headers as unknown[]) {
    if (
      !Array.isArray(pair) ||
      pair.length !== 2 ||
      typeof pair[0] !== 'string' ||
      typeof pair[1] !== 'string'
    ) {
      throw new BadFrame('a request with bad headers');
    }
    pairs.push([pair[0], pair[1]]);
  }
  return { method, path, headers: pairs, body: payload.subarray(4 + headBytes) };
}

type Exchange = (request: RelayedRequest, signal: AbortSignal) => Promise<BridgeAnswer>;

export class BridgeSession {
  /** Resolves with the relay's port once it said hello; rejects if the session closes first. */
  readonly ready: Promise<number>;
  /** Why the session closed, once it did. */
  closedReason: string | undefined;
  private resolveReady!: (port: number) => void;
  private rejectReady!: (error: Error) => void;
  private readonly decode: (chunk: Buffer) => void;
  private readonly live = new Map<number, AbortController>();
  private lastId = 0;
  private hello = false;
  private process: SandboxProcess | undefined;
  private input: NodeJS.WritableStream | undefined;
  /** Frames waiting for the next write, and that write once scheduled. */
  private outbox: Buffer[] = [];
  private outboxBytes = 0;
  private flushed: Promise<void> | undefined;
  /** Set while the relay's stdin is full. */
  private blocked: Promise<void> | undefined;
  /** Sends waiting for the relay's stdin to drain; woken when the session closes. */
  private readonly waiting = new Set<() => void>();

  constructor(
    private readonly exchange: Exchange,
    private readonly limits: SessionLimits = DEFAULT_SESSION_LIMITS,
    private readonly onClose?: (reason: string) => void,
  ) {
    this.ready = new Promise<number>((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => undefined);
    this.decode = frameDecoder(limits.maxRequestBytes + 4 + limits.maxHeadBytes, (type, id, payload) =>
      this.onFrame(type, id, payload),
    );
  }

  /** Where the relay's stdout goes. */
  sink(): Writable {
    return new Writable({
      write: (chunk: Buffer, _encoding, callback) => {
        this.receive(chunk);
        callback();
      },
    });
  }

  /** The relay's process: answers go to its stdin; its end closes the session. */
  attach(process: SandboxProcess): void {
    this.process = process;
    this.input = process.input;
    void process.exited.then((code) => this.close(`the relay stopped (exit code ${code})`));
    if (this.closedReason !== undefined) void process.kill();
  }

  /** Bytes from the relay's stdout. Never throws: a broken frame closes the session. */
  receive(chunk: Buffer): void {
    if (this.closedReason !== undefined) return;
    try {
      this.decode(chunk);
    } catch (error) {
      this.close(
        `the relay sent ${error instanceof BadFrame ? error.message : `a bad frame (${String(error)})`}`,
      );
    }
  }

  /** Requests in flight (for tests and progress). */
  get inFlight(): number {
    return this.live.size;
  }

  /**
   * Closes the bridge for this sandbox: calls in flight are cut, the relay is killed.
   * Idempotent. `expected`: the harness closed it (not a problem to report).
   */
  close(reason: string, expected = false): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    for (const controller of this.live.values()) controller.abort();
    this.live.clear();
    for (const wake of this.waiting) wake();
    this.rejectReady(new Error(reason));
    void this.process?.kill();
    if (!expected) this.onClose?.(reason);
  }

  private onFrame(type: number, id: number, payload: Buffer): void {
    if (this.closedReason !== undefined) return;
    if (!this.hello) {
      if (type !== FRAME.hello || id !== 0) throw new BadFrame('a frame before its hello');
      let port: unknown;
      try {
        port = (JSON.parse(payload.toString('utf8')) as { port?: unknown }).port;
      } catch {
        throw new BadFrame('a hello that is not JSON');
      }
      if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
        throw new BadFrame('a hello without a port');
      }
      this.hello = true;
      this.resolveReady(port);
      return;
    }
    if (type === FRAME.request) {
      if (id <= this.lastId) throw new BadFrame(`request id ${id} again (or out of order)`);
      this.lastId = id;
      if (this.live.size >= this.limits.maxConcurrent) {
        throw new BadFrame(`more than ${this.limits.maxConcurrent} requests at once`);
      }
      const request = parseRequest(payload, this.limits.maxHeadBytes);
      const controller = new AbortController();
      this.live.set(id, controller);
      void this.answer(id, request, controller).catch((error: unknown) =>
        this.close(`the bridge failed on request ${id}: ${String(error)}`),
      );
      return;
    }
    if (type === FRAME.cancel) {
      if (id > this.lastId) throw new BadFrame(`a cancel of request ${id}, which was never sent`);
      // Gone at once: the relay counts it gone too and may send its next request now.
      this.live.get(id)?.abort();
      this.live.delete(id);
      return;
    }
    throw new BadFrame(`a frame of unknown type ${type}`);
  }

  private async answer(id: number, request: RelayedRequest, controller: AbortController): Promise<void> {
    const answer = await this.exchange(request, controller.signal);
    const body = answer.body[Symbol.asyncIterator]();
    try {
      if (!this.live.has(id)) return;
      this.queue(
        FRAME.head,
        id,
        Buffer.from(JSON.stringify({ status: answer.status, headers: answer.headers })),
      );
      for (;;) {
        await this.room();
        const next = await body.next();
        if (next.done || !this.live.has(id)) break;
        const chunk = next.value;
        for (let at = 0; at < chunk.length; at += this.limits.maxBodyFrameBytes) {
          this.queue(FRAME.body, id, chunk.subarray(at, at + this.limits.maxBodyFrameBytes));
        }
      }
      if (this.live.has(id)) this.queue(FRAME.end, id, Buffer.alloc(0));
    } catch {
      // The answer broke midway (the provider, or the relay's stdin): the client's connection
      // is dropped, so it cannot take a half answer for a whole one.
      if (this.live.has(id) && this.closedReason === undefined) this.queue(FRAME.abort, id, Buffer.alloc(0));
    } finally {
      this.live.delete(id);
      await body.return?.().catch(() => undefined);
    }
  }

  /**
   * Queues one frame for the relay. Frames queued in the same turn of the event loop (a small
   * answer's head, body and end; answers that end together) go out in one write: one trip
   * through the engine's exec stream instead of three.
   */
  private queue(type: number, id: number, payload: Uint8Array): void {
    if (this.closedReason !== undefined) throw new Error('the bridge is closed');
    const frame = encodeFrame(type, id, payload);
    this.outbox.push(frame);
    this.outboxBytes += frame.length;
    this.flushed ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        this.flush();
        resolve();
      }),
    );
  }

  private flush(): void {
    const frames = this.outbox;
    this.outbox = [];
    this.outboxBytes = 0;
    this.flushed = undefined;
    const input = this.input;
    if (this.closedReason !== undefined || !input || frames.length === 0) return;
    if (input.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))) return;
    // The relay's stdin is full: no answer queues more until it drains, or the relay is dropped.
    this.blocked ??= new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        input.removeListener('drain', done);
        this.waiting.delete(done);
        this.blocked = undefined;
        resolve();
      };
      const timer = setTimeout(() => {
        this.close(`the relay left its answers unread for ${formatDuration(this.limits.drainTimeoutMs)}`);
        done();
      }, this.limits.drainTimeoutMs);
      input.once('drain', done);
      this.waiting.add(done);
    });
  }

  /** Waits until another frame may be queued: the queue is small and the relay's stdin takes bytes. */
  private async room(): Promise<void> {
    if (this.outboxBytes >= MAX_OUTBOX_BYTES) await this.flushed;
    if (this.blocked) await this.blocked;
    if (this.closedReason !== undefined) throw new Error('the bridge is closed');
  }
}

/** A bridge running for one sandbox. */
export interface BridgeConnection {
  /** The relay's port inside the sandbox. */
  readonly port: number;
  /** `http://127.0.0.1:<port>`: the base URL an agent in the sandbox is given. */
  readonly baseUrl: string;
  readonly session: BridgeSession;
  /** Stops the relay; calls in flight are cut. */
  close(): void;
}

export interface StartRelayOptions {
  /** Port inside the sandbox (default: any free one). */
  port?: number;
  /** How long the relay may take to start listening (default 15 s). */
  startTimeoutMs?: number;
  signal?: AbortSignal;
  limits?: Partial<SessionLimits>;
  /** The Node the relay runs on, by absolute path (an agent layer's own); default `node` on the image's PATH. */
  node?: string;
}

/** Keeps the last `cap` bytes written (the relay's stderr, for a message when it fails). */
function tail(cap: number): { sink: Writable; text: () => string } {
  let kept = Buffer.alloc(0);
  const sink = new Writable({
    write: (chunk: Buffer, _encoding, callback) => {
      kept = Buffer.concat([kept, chunk]);
      if (kept.length > cap) kept = kept.subarray(kept.length - cap);
      callback();
    },
  });
  return { sink, text: () => kept.toString('utf8').trim() };
}

/**
 * Starts the relay in `sandbox` and connects it to `bridge`. Throws `ConfigError` when the
 * sandbox cannot run it (no `node` in the image, a port taken), `UsageError` when the
 * backend cannot keep a process's stdin open, `SandboxDead`, or the signal's reason.
 */
export async function startRelay(
  sandbox: Sandbox,
  bridge: ModelBridge,
  options: StartRelayOptions = {},
): Promise<BridgeConnection> {
  if (!sandbox.spawn)
    throw new ConfigError('this sandbox backend cannot run the model relay (no long-lived processes)');
  const limits: SessionLimits = {
    ...DEFAULT_SESSION_LIMITS,
    maxRequestBytes: bridge.maxRequestBytes,
    ...options.limits,
  };
  const session = new BridgeSession(
    (request, signal) => bridge.exchange(request, signal),
    limits,
    (reason) => bridge.problem(`model relay of sandbox ${sandbox.id.slice(0, 12)}: ${reason}`),
  );
  const stderr = tail(4096);
  const argv = relayArgv(
    {
      port: options.port ?? 0,
      maxRequestBytes: limits.maxRequestBytes,
      maxConcurrent: limits.maxConcurrent,
      maxHostFrameBytes: Math.max(limits.maxBodyFrameBytes, limits.maxHeadBytes),
    },
    options.node,
  );
  const process = await sandbox.spawn(argv, { stdout: session.sink(), stderr: stderr.sink });
  session.attach(process);
  let timer: NodeJS.Timeout | undefined;
  const startTimeoutMs = options.startTimeoutMs ?? 15_000;
  const onAbort = () => session.close('interrupted', true);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const port = await Promise.race([
      session.ready,
      new Promise<never>((_resolve, reject) => {
        timer = setTimeout(
          () => reject(new Error(`it did not start listening within ${formatDuration(startTimeoutMs)}`)),
          startTimeoutMs,
        );
      }),
    ]);
    return { port, baseUrl: `http://127.0.0.1:${port}`, session, close: () => session.close('closed', true) };
  } catch (error) {
    session.close('it did not start');
    if (options.signal?.aborted) throw abortError(options.signal);
    const code = await Promise.race([
      process.exited,
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000)),
    ]);
    const said = stderr.text();
    const noNode = code === 127 || /node: (not found|No such file)/.test(said);
    throw new ConfigError(
      `the model relay did not start in sandbox ${sandbox.id.slice(0, 12)}: ${
        noNode ? 'the sandbox image has no `node` on its PATH' : (error as Error).message
      }${said ? ` (it said: ${said.slice(-500)})` : ''}`,
      [],
      noNode
        ? { hint: 'the relay needs Node.js (18 or later) in the sandbox image; the base image `node` has it' }
        : {},
    );
  } finally {
    if (timer) clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}
