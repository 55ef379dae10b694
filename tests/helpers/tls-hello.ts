/**
 * TLS handshake bytes made by hand, for tests of the egress proxy's tunnel guard: a TLS 1.3
 * ClientHello a real server answers (with a HelloRetryRequest when its key_share is empty),
 * with or without a server name, with an ECH extension, and split into records of any size.
 */
import { randomBytes } from 'node:crypto';

const u8 = (n: number) => Buffer.from([n]);
const u16 = (n: number) => Buffer.from([n >> 8, n & 255]);
const u24 = (n: number) => Buffer.from([n >> 16, (n >> 8) & 255, n & 255]);
const vec8 = (b: Buffer) => Buffer.concat([u8(b.length), b]);
const vec16 = (b: Buffer) => Buffer.concat([u16(b.length), b]);
export const extension = (type: number, data: Buffer) => Buffer.concat([u16(type), vec16(data)]);

export function serverNameExtension(...names: string[]): Buffer {
  return extension(
    0,
    vec16(Buffer.concat(names.map((name) => Buffer.concat([u8(0), vec16(Buffer.from(name, 'latin1'))])))),
  );
}

export interface HelloOptions {
  /** The server_name extension's one name; null: no server_name extension. */
  serverName?: string | null;
  /** An empty key_share: a server answers with a HelloRetryRequest. */
  emptyKeyShare?: boolean;
  /** Adds an `encrypted_client_hello` extension (0xfe0d) with random contents. */
  ech?: boolean;
  /** More extensions, as `extension(type, data)` makes them. */
  extra?: Buffer[];
}

/** The ClientHello's handshake message body (after the 4-byte message header). */
export function clientHelloBody(options: HelloOptions = {}): Buffer {
  const extensions: Buffer[] = [];
  if (options.serverName !== null)
    extensions.push(serverNameExtension(options.serverName ?? 'allowed.fake.test'));
  extensions.push(extension(43, vec8(u16(0x0304)))); // supported_versions: TLS 1.3
  extensions.push(extension(10, vec16(Buffer.concat([u16(0x001d), u16(0x0017)])))); // x25519, P-256
  extensions.push(extension(13, vec16(Buffer.concat([u16(0x0403), u16(0x0804)])))); // signature_algorithms
  const share = options.emptyKeyShare
    ? Buffer.alloc(0)
    : Buffer.concat([u16(0x001d), vec16(randomBytes(32))]);
  extensions.push(extension(51, vec16(share)));
  if (options.ech) extensions.push(extension(0xfe0d, randomBytes(90)));
  extensions.push(...(options.extra ?? []));
  return Buffer.concat([
    u16(0x0303),
    randomBytes(32),
    vec8(randomBytes(32)),
    vec16(u16(0x1301)), // TLS_AES_128_GCM_SHA256
    vec8(u8(0)),
    vec16(Buffer.concat(extensions)),
  ]);
}

/** A handshake message: type, 3-byte length, body. */
export function handshake(type: number, body: Buffer): Buffer {
  return Buffer.concat([u8(type), u24(body.length), body]);
}

/** Bytes as records of one content type, each at most `size` bytes of body. */
export function records(type: number, bytes: Buffer, size = 16_384): Buffer {
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) {
    const part = bytes.subarray(at, at + size);
    out.push(Buffer.concat([u8(type), u16(0x0301), u16(part.length), part]));
  }
  return Buffer.concat(out);
}

/** A whole ClientHello as it goes on the wire. */
export function clientHello(options: HelloOptions = {}, recordSize?: number): Buffer {
  return records(22, handshake(1, clientHelloBody(options)), recordSize);
}

const RETRY_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');

/** A ServerHello record (or a HelloRetryRequest), enough for the guard: version, random, the rest. */
export function serverHello(retry = false): Buffer {
  const body = Buffer.concat([
    u16(0x0303),
    retry ? RETRY_RANDOM : randomBytes(32),
    vec8(randomBytes(32)),
    u16(0x1301),
    u8(0),
    vec16(extension(43, u16(0x0304))),
  ]);
  return records(22, handshake(2, body));
}

export const changeCipherSpec = () => Buffer.from([20, 3, 3, 0, 1, 1]);
export const applicationData = (n: number) => records(23, randomBytes(n));
