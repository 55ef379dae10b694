/**
 * Just enough TLS to judge a tunnel without terminating it: record framing, handshake messages
 * assembled across records, the ClientHello's server name and encrypted-hello extensions, and
 * whether a ServerHello is a HelloRetryRequest. Everything here reads hostile bytes: every
 * length is checked against what is there and against a cap before anything is kept, and a
 * violation is an answer (a `problem`), never an exception that escapes.
 *
 * Hand-written on purpose: the maintained npm reader (`read-tls-client-hello`) takes exactly
 * one record (a hello fragmented across records is an error there), reads a socket itself,
 * and has no caps or deadline; nothing on npm assembles a second hello after a retry.
 */

/** RFC 8446 5.1: a plaintext record carries at most 2^14 bytes. */
export const MAX_PLAINTEXT_RECORD = 16_384;
/** RFC 8446 5.2: a protected record (early data) at most 2^14 + 256. */
export const MAX_CIPHERTEXT_RECORD = 16_384 + 256;
/** The largest handshake message kept to judge (a ClientHello with big key shares is ~2 KiB). */
export const MAX_HANDSHAKE_MESSAGE = 64 * 1024;

export const CONTENT = {
  changeCipherSpec: 20,
  alert: 21,
  handshake: 22,
  applicationData: 23,
} as const;

export const HANDSHAKE = { clientHello: 1, serverHello: 2 } as const;

const EXTENSION = {
  serverName: 0x0000,
  /** RFC 9849 (ECH): the outer name is only a cover; the real one is encrypted. */
  encryptedClientHello: 0xfe0d,
  /** ECH's marker inside an inner hello; never legitimate in a hello on the wire. */
  echOuterExtensions: 0xfd00,
  /** The ESNI drafts' encrypted_server_name. */
  encryptedServerName: 0xffce,
} as const;

/** RFC 8446 4.1.3: the `random` of a ServerHello that is really a HelloRetryRequest. */
const HELLO_RETRY_RANDOM = Buffer.from(
  'cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c',
  'hex',
);

export interface TlsRecord {
  type: number;
  /** The whole record as it came (header and body), to forward unchanged. */
  raw: Buffer;
  body: Buffer;
}

export class TlsViolation extends Error {}

/**
 * Bytes queued as the chunks they came in, joined once when taken: a peer that sends one
 * byte at a time costs a copy per byte, not a copy of everything held per byte.
 */
class ByteQueue {
  private parts: Buffer[] = [];
  private size = 0;

  get length(): number {
    return this.size;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.parts.push(chunk);
    this.size += chunk.length;
  }

  /** The first `n` bytes, left in the queue (n is small: a header). */
  peek(n: number): Buffer {
    const first = this.parts[0];
    if (first && first.length >= n) return first.subarray(0, n);
    // Copies only the first n bytes, however large the parts.
    return Buffer.concat(this.parts.slice(0, n), Math.min(n, this.size));
  }

  take(n: number): Buffer {
    const taken: Buffer[] = [];
    let need = n;
    while (need > 0) {
      const part = this.parts[0]!;
      if (part.length <= need) {
        taken.push(part);
        this.parts.shift();
        need -= part.length;
      } else {
        taken.push(part.subarray(0, need));
        this.parts[0] = part.subarray(need);
        need = 0;
      }
    }
    this.size -= n;
    return taken.length === 1 ? taken[0]! : Buffer.concat(taken, n);
  }

  takeAll(): Buffer {
    return this.take(this.size);
  }
}

/**
 * Records from one direction of a stream. Holds at most one unfinished record plus the chunk
 * it was fed; a header that announces more than a record may carry is a violation at once,
 * before its body is waited for.
 */
export class RecordReader {
  private readonly queue = new ByteQueue();

  constructor(private readonly who: string) {}

  feed(chunk: Buffer): void {
    this.queue.push(chunk);
  }

  /** Bytes fed but not yet returned as a record (an unfinished record). */
  rest(): Buffer {
    return this.queue.takeAll();
  }

  get buffered(): number {
    return this.queue.length;
  }

  /** The next whole record, or undefined until its last byte is here. Throws `TlsViolation`. */
  next(): TlsRecord | undefined {
    if (this.queue.length < 5) return undefined;
    const header = this.queue.peek(5);
    const type = header[0]!;
    const major = header[1]!;
    const minor = header[2]!;
    const length = header.readUInt16BE(3);
    if (type < CONTENT.changeCipherSpec || type > CONTENT.applicationData)
      throw new TlsViolation(`${this.who} sent a record of type ${type}, which is not TLS`);
    if (major !== 3 || minor > 4)
      throw new TlsViolation(`${this.who} sent a record of version ${major}.${minor}, which is not TLS`);
    const max = type === CONTENT.applicationData ? MAX_CIPHERTEXT_RECORD : MAX_PLAINTEXT_RECORD;
    if (length === 0) throw new TlsViolation(`${this.who} sent an empty record of type ${type}`);
    if (length > max)
      throw new TlsViolation(`${this.who} announced a record of ${length} bytes (at most ${max})`);
    if (this.queue.length < 5 + length) return undefined;
    const raw = this.queue.take(5 + length);
    return { type, raw, body: raw.subarray(5) };
  }
}

export interface HandshakeMessage {
  type: number;
  body: Buffer;
}

/**
 * Handshake messages from the bodies of consecutive handshake records (a message may span
 * records, and a record may hold several messages). The announced length is checked against
 * the cap as soon as the 4-byte header is complete, before any body is kept.
 */
export class HandshakeAssembler {
  private readonly queue = new ByteQueue();

  constructor(
    private readonly who: string,
    private readonly cap = MAX_HANDSHAKE_MESSAGE,
  ) {}

  /** True while a message has begun and is not complete: no other record type may come then. */
  get midMessage(): boolean {
    return this.queue.length > 0;
  }

  /** The messages this record body completes. Throws `TlsViolation`. */
  push(body: Buffer): HandshakeMessage[] {
    this.queue.push(body);
    const messages: HandshakeMessage[] = [];
    while (this.queue.length >= 4) {
      const header = this.queue.peek(4);
      const length = header.readUIntBE(1, 3);
      if (length > this.cap)
        throw new TlsViolation(
          `${this.who} announced a handshake message of ${length} bytes (at most ${this.cap} are judged)`,
        );
      if (this.queue.length < 4 + length) break;
      const message = this.queue.take(4 + length);
      messages.push({ type: message[0]!, body: message.subarray(4) });
    }
    return messages;
  }
}

export interface ClientHelloFacts {
  /** The one host_name of the server_name extension, as sent (undefined: none). */
  serverName?: string;
  /** The name of an extension that hides the real name (ECH or ESNI), if present. */
  encrypted?: string;
}

/** A bounded cursor over a handshake message body; every read checks what is left. */
class Cursor {
  private at = 0;

  constructor(
    private readonly bytes: Buffer,
    private readonly what: string,
  ) {}

  get left(): number {
    return this.bytes.length - this.at;
  }

  private take(n: number, field: string): Buffer {
    if (n > this.left)
      throw new TlsViolation(`${this.what}: ${field} needs ${n} bytes, ${this.left} are left`);
    const out = this.bytes.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }

  u8(field: string): number {
    return this.take(1, field)[0]!;
  }

  u16(field: string): number {
    return this.take(2, field).readUInt16BE(0);
  }

  bytesOf(n: number, field: string): Buffer {
    return this.take(n, field);
  }

  /** A vector with a 1- or 2-byte length prefix, its length within [min, max]. */
  vector(prefix: 1 | 2, field: string, min: number, max: number): Buffer {
    const length = prefix === 1 ? this.u8(`${field} length`) : this.u16(`${field} length`);
    if (length < min || length > max)
      throw new TlsViolation(`${this.what}: ${field} is ${length} bytes (expected ${min} to ${max})`);
    return this.take(length, field);
  }
}

const EXTENSION_NAMES: Record<number, string> = {
  [EXTENSION.encryptedClientHello]: 'encrypted_client_hello (ECH)',
  [EXTENSION.echOuterExtensions]: 'ech_outer_extensions',
  [EXTENSION.encryptedServerName]: 'encrypted_server_name (ESNI)',
};

/** RFC 6066 3: exactly one host_name, 1 to 255 bytes. */
function serverNameOf(data: Buffer): string {
  const what = 'the ClientHello server_name extension';
  const list = new Cursor(data, what);
  const names = new Cursor(list.vector(2, 'server name list', 1, 0xffff), what);
  if (list.left !== 0) throw new TlsViolation(`${what} has ${list.left} bytes after its list`);
  let hostName: string | undefined;
  while (names.left > 0) {
    const type = names.u8('name type');
    const name = names.vector(2, 'name', 1, 255);
    if (type !== 0) throw new TlsViolation(`${what} has a name of type ${type} (only host_name is judged)`);
    if (hostName !== undefined) throw new TlsViolation(`${what} names more than one host`);
    // Bytes outside printable ASCII are kept visible (and never match a policy name).
    hostName = name.toString('latin1').replace(/[^\x21-\x7e]/g, '?');
  }
  return hostName!;
}

/**
 * The facts the proxy judges a ClientHello by (RFC 8446 4.1.2, RFC 5246 7.4.1.2): every field
 * walked to its end, nothing after the extensions, no extension twice (a server may read
 * either copy).
 */
export function parseClientHello(body: Buffer): ClientHelloFacts {
  const what = 'the ClientHello';
  const hello = new Cursor(body, what);
  const major = hello.u8('legacy_version');
  hello.u8('legacy_version');
  if (major !== 3) throw new TlsViolation(`${what} has version ${major}.x, which is not TLS`);
  hello.bytesOf(32, 'random');
  hello.vector(1, 'legacy_session_id', 0, 32);
  const suites = hello.vector(2, 'cipher_suites', 2, 0xfffe);
  if (suites.length % 2 !== 0) throw new TlsViolation(`${what}: cipher_suites has an odd length`);
  hello.vector(1, 'legacy_compression_methods', 1, 0xff);
  const facts: ClientHelloFacts = {};
  if (hello.left === 0) return facts; // TLS 1.2 allows a hello without extensions: no name
  const extensions = new Cursor(hello.vector(2, 'extensions', 0, 0xffff), what);
  if (hello.left !== 0) throw new TlsViolation(`${what} has ${hello.left} bytes after its extensions`);
  const seen = new Set<number>();
  while (extensions.left > 0) {
    const type = extensions.u16('extension type');
    const data = extensions.vector(2, `extension ${type}`, 0, 0xffff);
    if (seen.has(type)) throw new TlsViolation(`${what} has extension ${type} twice`);
    seen.add(type);
    if (type === EXTENSION.serverName) facts.serverName = serverNameOf(data);
    const hidden = EXTENSION_NAMES[type];
    if (hidden !== undefined) facts.encrypted ??= hidden;
  }
  return facts;
}

/** Whether a ServerHello is a HelloRetryRequest (after which a second ClientHello comes in the clear). */
export function isHelloRetryRequest(body: Buffer): boolean {
  const hello = new Cursor(body, 'the ServerHello');
  hello.u16('legacy_version');
  return hello.bytesOf(32, 'random').equals(HELLO_RETRY_RANDOM);
}

/** A fatal alert record (RFC 8446 6): what the client's TLS library reports as the reason. */
export function fatalAlert(description: 'access_denied' | 'unrecognized_name' | 'decode_error'): Buffer {
  const code = { access_denied: 49, unrecognized_name: 112, decode_error: 50 }[description];
  return Buffer.from([CONTENT.alert, 3, 3, 0, 2, 2, code]);
}
