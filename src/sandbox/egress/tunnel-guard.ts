/**
 * Judges a CONNECT tunnel by what it carries, not only by its CONNECT line: a TLS handshake
 * whose ClientHello names exactly the host the tunnel was allowed for. A pure state machine
 * over the two directions' bytes (the proxy feeds it chunks and does what each step says), so
 * every hostile shape of the stream is testable without sockets.
 *
 * What is judged, and until when:
 * - The client's first bytes must be a TLS handshake record; the ClientHello (assembled across
 *   records and chunks, capped) must carry one server name equal to the CONNECT name, and no
 *   encrypted-hello extension (ECH or ESNI: the outer name is only a cover). Nothing reaches the
 *   server before this hello is judged.
 * - Until the server's ServerHello, the client may send only what a TLS client sends then
 *   (change_cipher_spec, alerts, early data); a further plaintext handshake message is
 *   refused. A HelloRetryRequest from the server allows exactly one second ClientHello, judged
 *   like the first; a second retry is refused.
 * - Once the server has sent a real ServerHello, an honest TLS server accepts no new hello in
 *   the clear, so the guard is done: the proxy pipes both ways with no further per-byte work.
 *
 * Anything else in a tunnel (plain HTTP, SSH, a protocol whose server speaks first) is refused:
 * plain HTTP goes through the proxy by absolute URL, where every request is judged.
 */
import {
  CONTENT,
  HANDSHAKE,
  HandshakeAssembler,
  MAX_HANDSHAKE_MESSAGE,
  RecordReader,
  TlsViolation,
  fatalAlert,
  isHelloRetryRequest,
  parseClientHello,
  type HandshakeMessage,
} from './tls-hello.js';
import { comparableName } from './names.js';

/** The checks a tunnel can fail, as the egress log's `rule`. */
export type TunnelRule = 'tls-sni' | 'tls-no-sni' | 'tls-ech' | 'tls-handshake' | 'tunnel-not-tls';

export interface TunnelRefusal {
  refuse: true;
  rule: TunnelRule;
  reason: string;
  /** What the client gets inside the tunnel before it is closed (a TLS alert, an HTTP 403). */
  answer?: Buffer;
}

export interface TunnelPass {
  refuse: false;
  toServer: Buffer[];
  toClient: Buffer[];
  /** Judging is over: from now on the proxy pipes both directions. */
  open: boolean;
}

export type TunnelStep = TunnelRefusal | TunnelPass;

/** Held client bytes while a hello is assembled: the largest hello plus its record headers. */
const MAX_HELD = MAX_HANDSHAKE_MESSAGE + 4096;

type ClientPhase =
  /** Waiting for the first ClientHello. */
  | 'hello'
  /** A hello was judged; waiting for the server's answer. */
  | 'sent'
  /** The server asked for a retry: one more ClientHello may come. */
  | 'retry';

export class TunnelGuard {
  private readonly client = new RecordReader('the client');
  private readonly server = new RecordReader('the server');
  private readonly clientMessages = new HandshakeAssembler('the client');
  private readonly serverMessages = new HandshakeAssembler('the server');
  private phase: ClientPhase = 'hello';
  private held: Buffer[] = [];
  private heldBytes = 0;
  private retried = false;
  private opened = false;
  private refused = false;

  /**
   * @param name the CONNECT name the tunnel was allowed for, as `comparableName` gives it
   * @param target `name:port`, for reasons
   */
  constructor(
    private readonly name: string,
    private readonly target: string,
  ) {}

  get open(): boolean {
    return this.opened;
  }

  /** Bytes the client sent into the tunnel. */
  fromClient(chunk: Buffer): TunnelStep {
    if (this.refused) return this.refusal('tls-handshake', 'the tunnel was already refused');
    if (this.opened) return pass([chunk], [], true);
    if (this.phase === 'hello' && this.client.buffered === 0 && this.held.length === 0 && chunk.length > 0) {
      if (chunk[0] !== CONTENT.handshake) return this.notTls(chunk);
    }
    this.client.feed(chunk);
    const toServer: Buffer[] = [];
    try {
      for (let record = this.client.next(); record; record = this.client.next()) {
        if (this.phase === 'sent') {
          if (record.type === CONTENT.handshake)
            return this.refusal(
              'tls-handshake',
              `the client sent a further handshake message in the clear before the server answered its ClientHello; the proxy judges only the hello`,
            );
          toServer.push(record.raw);
          continue;
        }
        // 'hello' or 'retry': a ClientHello is being assembled.
        if (record.type !== CONTENT.handshake) {
          if (this.phase === 'hello' || this.clientMessages.midMessage)
            throw new TlsViolation(
              `the client sent a record of type ${record.type} ${this.phase === 'hello' ? 'before' : 'in the middle of'} its ClientHello`,
            );
          toServer.push(record.raw);
          continue;
        }
        this.held.push(record.raw);
        this.heldBytes += record.raw.length;
        if (this.heldBytes > MAX_HELD)
          throw new TlsViolation(`the client's ClientHello took more than ${MAX_HELD} bytes of records`);
        const messages = this.clientMessages.push(record.body);
        if (messages.length === 0) continue;
        const refusal = this.judgeHello(messages[0]!);
        if (refusal) return refusal;
        if (messages.length > 1 || this.clientMessages.midMessage)
          return this.refusal(
            'tls-handshake',
            'the client sent another handshake message right after its ClientHello, before the server answered',
          );
        toServer.push(...this.held);
        this.held = [];
        this.heldBytes = 0;
        this.phase = 'sent';
      }
    } catch (error) {
      return this.violation(error);
    }
    return pass(toServer, [], false);
  }

  /** Bytes the server sent back. */
  fromServer(chunk: Buffer): TunnelStep {
    if (this.refused) return this.refusal('tls-handshake', 'the tunnel was already refused');
    if (this.opened) return pass([], [chunk], true);
    if (this.phase === 'hello')
      return this.refusal(
        'tunnel-not-tls',
        `the server at ${this.target} spoke before the client's TLS hello; a tunnel must carry TLS whose server name is the CONNECT name`,
        null,
      );
    this.server.feed(chunk);
    const toClient: Buffer[] = [];
    try {
      for (let record = this.server.next(); record; record = this.server.next()) {
        toClient.push(record.raw);
        if (record.type === CONTENT.applicationData)
          throw new TlsViolation('the server sent application data before its ServerHello');
        if (record.type !== CONTENT.handshake) {
          if (this.serverMessages.midMessage)
            throw new TlsViolation(
              `the server sent a record of type ${record.type} inside a handshake message`,
            );
          continue;
        }
        for (const message of this.serverMessages.push(record.body)) {
          const answer = this.judgeServerHello(message);
          if (answer === 'open') {
            this.opened = true;
            if (this.held.length > 0)
              throw new TlsViolation('the server answered before the client finished its second ClientHello');
            const rest = this.client.rest();
            return pass(rest.length > 0 ? [rest] : [], [...toClient, this.server.rest()], true);
          }
        }
      }
    } catch (error) {
      return this.violation(error);
    }
    return pass([], toClient, false);
  }

  /** A ServerHello opens the tunnel; a HelloRetryRequest lets one more ClientHello come. */
  private judgeServerHello(message: HandshakeMessage): 'open' | 'retry' {
    if (message.type !== HANDSHAKE.serverHello)
      throw new TlsViolation(
        `the server's first handshake message is of type ${message.type}, not a ServerHello`,
      );
    if (this.phase !== 'sent')
      throw new TlsViolation('the server sent a ServerHello before the client sent its second ClientHello');
    if (!isHelloRetryRequest(message.body)) return 'open';
    if (this.retried) throw new TlsViolation('the server asked for a second HelloRetryRequest');
    this.retried = true;
    this.phase = 'retry';
    return 'retry';
  }

  private judgeHello(message: HandshakeMessage): TunnelRefusal | undefined {
    const which = this.retried ? 'second ClientHello (after a HelloRetryRequest)' : 'ClientHello';
    if (message.type !== HANDSHAKE.clientHello)
      throw new TlsViolation(`the client's handshake message is of type ${message.type}, not a ClientHello`);
    const hello = parseClientHello(message.body);
    if (hello.encrypted)
      return this.refusal(
        'tls-ech',
        `the ${which} carries ${hello.encrypted}: its outer server name is a cover for a hidden one, so the tunnel to ${this.target} cannot be judged by name`,
      );
    if (hello.serverName === undefined)
      return this.refusal(
        'tls-no-sni',
        `the ${which} names no server (no SNI), so the tunnel to ${this.target} cannot be judged by name`,
      );
    if (comparableName(hello.serverName) !== this.name)
      return this.refusal(
        'tls-sni',
        `the ${which} names ${hello.serverName} (SNI), not ${this.name}, the name the tunnel to ${this.target} was allowed for`,
      );
    return undefined;
  }

  private notTls(chunk: Buffer): TunnelRefusal {
    const http = /^[A-Z]{3,12} \S+ HTTP\/\d/.test(chunk.subarray(0, 64).toString('latin1'));
    const reason = `the tunnel to ${this.target} carried ${http ? 'plain HTTP' : `bytes that are not TLS (${preview(chunk)})`}; a tunnel must carry TLS whose server name is the CONNECT name${http ? ', and plain HTTP goes through the proxy by absolute URL (HTTP_PROXY), where every request is judged' : ''}`;
    this.refused = true;
    return { refuse: true, rule: 'tunnel-not-tls', reason, ...(http ? { answer: httpDenial(reason) } : {}) };
  }

  private violation(error: unknown): TunnelRefusal {
    if (!(error instanceof TlsViolation)) throw error;
    return this.refusal('tls-handshake', `${error.message} (tunnel to ${this.target})`);
  }

  /** The refusal for a tunnel that took too long to be judged. */
  expire(ms: number): TunnelRefusal {
    const seconds = `${Math.round(ms / 100) / 10} s`;
    const what =
      this.phase === 'hello'
        ? this.client.buffered + this.heldBytes === 0
          ? `the client sent nothing within ${seconds} (a tunnel must start with a TLS ClientHello)`
          : `the client's ClientHello was not complete within ${seconds}`
        : this.phase === 'retry'
          ? `the client's second ClientHello was not complete within ${seconds}`
          : `the server did not answer the ClientHello within ${seconds}`;
    return this.refusal('tls-handshake', `${what} (tunnel to ${this.target})`);
  }

  /** `answer`: what the client gets (default a TLS alert; null: nothing, the tunnel just closes). */
  private refusal(rule: TunnelRule, reason: string, answer?: Buffer | null): TunnelRefusal {
    this.refused = true;
    this.held = [];
    const alert = fatalAlert(rule === 'tls-sni' ? 'unrecognized_name' : 'access_denied');
    const sent = answer === null ? undefined : (answer ?? alert);
    return { refuse: true, rule, reason, ...(sent ? { answer: sent } : {}) };
  }
}

function pass(toServer: Buffer[], toClient: Buffer[], open: boolean): TunnelPass {
  return {
    refuse: false,
    toServer: toServer.filter((b) => b.length > 0),
    toClient: toClient.filter((b) => b.length > 0),
    open,
  };
}

/** The first bytes, printable ASCII as text, anything else in hex. */
function preview(chunk: Buffer): string {
  const head = chunk.subarray(0, 16);
  return /^[\x20-\x7e]+$/.test(head.toString('latin1'))
    ? JSON.stringify(head.toString('latin1'))
    : `0x${head.toString('hex')}`;
}

export function httpDenial(reason: string, status = '403 Forbidden'): Buffer {
  const body = `sandbox-harness egress denied: ${reason}\n`;
  return Buffer.from(
    `HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nX-Sandbox-Harness-Egress: denied\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
