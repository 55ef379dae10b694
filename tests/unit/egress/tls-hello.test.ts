/** The ClientHello reader on hostile input: truncated, oversize, fragmented, zero-length, duplicated. */
import { describe, expect, it } from 'vitest';
import {
  HandshakeAssembler,
  MAX_HANDSHAKE_MESSAGE,
  RecordReader,
  TlsViolation,
  isHelloRetryRequest,
  parseClientHello,
} from '../../../src/sandbox/egress/tls-hello.js';
import {
  clientHello,
  clientHelloBody,
  extension,
  handshake,
  records,
  serverHello,
  serverNameExtension,
} from '../../helpers/tls-hello.js';

/** Every record the reader returns for these bytes fed in chunks of `chunk` bytes. */
function readAll(bytes: Buffer, chunk = bytes.length) {
  const reader = new RecordReader('the client');
  const out = [];
  for (let at = 0; at < bytes.length; at += chunk) {
    reader.feed(bytes.subarray(at, at + chunk));
    for (let r = reader.next(); r; r = reader.next()) out.push(r);
  }
  return { out, left: reader.buffered };
}

function messagesOf(bytes: Buffer, chunk?: number) {
  const assembler = new HandshakeAssembler('the client');
  return readAll(bytes, chunk).out.flatMap((r) => assembler.push(r.body));
}

describe('TLS records', () => {
  it('reassembles a ClientHello split across records and across 1-byte chunks', () => {
    const wire = clientHello({ serverName: 'allowed.fake.test' }, 7);
    const [message, ...more] = messagesOf(wire, 1);
    expect(more).toEqual([]);
    expect(message!.type).toBe(1);
    expect(parseClientHello(message!.body).serverName).toBe('allowed.fake.test');
  });

  it('waits for a record whose bytes are not all here, and holds only that record', () => {
    const wire = clientHello();
    const { out, left } = readAll(wire.subarray(0, wire.length - 1));
    expect(out).toEqual([]);
    expect(left).toBe(wire.length - 1);
  });

  it('refuses a zero-length record, an oversize announced length, and a record that is not TLS', () => {
    expect(() => readAll(Buffer.from([22, 3, 1, 0, 0]))).toThrow(/empty record/);
    // Refused from the header alone: the 40 KiB body is never waited for.
    expect(() => readAll(Buffer.from([22, 3, 1, 0xa0, 0x00]))).toThrow(/announced a record of 40960 bytes/);
    expect(() => readAll(Buffer.from('GET / HTTP/1.1\r\n'))).toThrow(/type 71, which is not TLS/);
    expect(() => readAll(Buffer.from([22, 2, 0, 0, 1, 1]))).toThrow(/version 2\.0/);
  });

  it('refuses a handshake message that announces more than the cap, before its body comes', () => {
    const header = Buffer.from([1, 0x01, 0x00, 0x01]); // 65537 bytes
    expect(() => messagesOf(records(22, header))).toThrow(TlsViolation);
    expect(() => messagesOf(records(22, header))).toThrow(new RegExp(`at most ${MAX_HANDSHAKE_MESSAGE}`));
  });
});

describe('ClientHello', () => {
  it('reads the one server name, and an ECH extension', () => {
    expect(parseClientHello(clientHelloBody({ serverName: 'a.example' }))).toEqual({
      serverName: 'a.example',
    });
    expect(parseClientHello(clientHelloBody({ serverName: null }))).toEqual({});
    expect(parseClientHello(clientHelloBody({ ech: true })).encrypted).toMatch(/encrypted_client_hello/);
    expect(
      parseClientHello(clientHelloBody({ extra: [extension(0xffce, Buffer.alloc(4))] })).encrypted,
    ).toMatch(/ESNI/);
  });

  it('refuses every truncation of a hello, never reading past its end', () => {
    const body = clientHelloBody();
    // Cut right after the compression methods it is a TLS 1.2 hello without extensions: no name.
    const withoutExtensions = 2 + 32 + 33 + 4 + 2;
    for (let n = 0; n < body.length; n++) {
      if (n === withoutExtensions) expect(parseClientHello(body.subarray(0, n))).toEqual({});
      else expect(() => parseClientHello(body.subarray(0, n)), `${n} bytes`).toThrow(TlsViolation);
    }
  });

  it('refuses lengths that point past the end, trailing bytes, and fields out of range', () => {
    const body = clientHelloBody({ serverName: null });
    // The extensions' length says one more byte than there is.
    const tooLong = Buffer.from(body);
    // version, random, session id (1 + 32), cipher suites (2 + 2), compression (1 + 1)
    const extensionsAt = 2 + 32 + 33 + 4 + 2;
    tooLong.writeUInt16BE(body.readUInt16BE(extensionsAt) + 1, extensionsAt);
    expect(() => parseClientHello(tooLong)).toThrow(/needs \d+ bytes/);
    expect(() => parseClientHello(Buffer.concat([body, Buffer.from([0])]))).toThrow(/after its extensions/);
    const longSession = Buffer.from(body);
    longSession[34] = 33;
    expect(() => parseClientHello(longSession)).toThrow(/legacy_session_id is 33 bytes/);
    const noSuites = Buffer.concat([body.subarray(0, 67), Buffer.from([0, 0]), body.subarray(71)]);
    expect(() => parseClientHello(noSuites)).toThrow(/cipher_suites is 0 bytes/);
    const sslv2 = Buffer.from(body);
    sslv2[0] = 2;
    expect(() => parseClientHello(sslv2)).toThrow(/not TLS/);
  });

  it('refuses two server names, a name of another type, an empty name, and an extension twice', () => {
    const withNames = (...names: string[]) =>
      clientHelloBody({ serverName: null, extra: [serverNameExtension(...names)] });
    expect(() => parseClientHello(withNames('a.example', 'b.example'))).toThrow(/more than one host/);
    expect(() => parseClientHello(withNames(''))).toThrow(/name is 0 bytes/);
    const otherType = extension(0, Buffer.from([0, 4, 1, 0, 1, 0x61]));
    expect(() => parseClientHello(clientHelloBody({ serverName: null, extra: [otherType] }))).toThrow(
      /type 1/,
    );
    expect(() => parseClientHello(clientHelloBody({ extra: [serverNameExtension('b.example')] }))).toThrow(
      /extension 0 twice/,
    );
    const emptyList = extension(0, Buffer.from([0, 0]));
    expect(() => parseClientHello(clientHelloBody({ serverName: null, extra: [emptyList] }))).toThrow(
      /server name list is 0 bytes/,
    );
  });

  it('keeps bytes outside printable ASCII visible, never as they came', () => {
    const body = clientHelloBody({ serverName: 'a\u0000b\nexample' });
    expect(parseClientHello(body).serverName).toBe('a?b?example');
  });
});

describe('ServerHello', () => {
  it('tells a HelloRetryRequest from a ServerHello, and refuses a truncated one', () => {
    const body = (wire: Buffer) => wire.subarray(9);
    expect(isHelloRetryRequest(body(serverHello(true)))).toBe(true);
    expect(isHelloRetryRequest(body(serverHello(false)))).toBe(false);
    expect(() => isHelloRetryRequest(Buffer.from([3, 3, 1]))).toThrow(TlsViolation);
    expect(handshake(2, Buffer.alloc(0))).toHaveLength(4);
  });
});
