/**
 * The tunnel guard as a pure state machine: what reaches the server, and when the proxy may
 * stop looking. Chunks are fed the way a socket delivers them, in any split.
 */
import { describe, expect, it } from 'vitest';
import { TunnelGuard, type TunnelStep } from '../../../src/sandbox/egress/tunnel-guard.js';
import {
  applicationData,
  changeCipherSpec,
  clientHello,
  handshake,
  records,
  serverHello,
} from '../../helpers/tls-hello.js';

const NAME = 'allowed.fake.test';

function guard() {
  return new TunnelGuard(NAME, `${NAME}:443`);
}

/** Feeds bytes in chunks of `size`; returns every step and what reached each side. */
function feed(g: TunnelGuard, side: 'client' | 'server', bytes: Buffer, size = bytes.length) {
  const steps: TunnelStep[] = [];
  for (let at = 0; at < bytes.length; at += size) {
    const chunk = bytes.subarray(at, at + size);
    steps.push(side === 'client' ? g.fromClient(chunk) : g.fromServer(chunk));
  }
  const toServer = Buffer.concat(steps.flatMap((s) => (s.refuse ? [] : s.toServer)));
  const toClient = Buffer.concat(steps.flatMap((s) => (s.refuse ? [] : s.toClient)));
  const refusal = steps.find((s) => s.refuse);
  return { steps, toServer, toClient, refusal: refusal?.refuse ? refusal : undefined, last: steps.at(-1)! };
}

describe('the first ClientHello', () => {
  it('forwards nothing until the whole hello is here, then exactly its bytes', () => {
    const g = guard();
    const hello = clientHello({ serverName: NAME }, 100);
    const first = feed(g, 'client', hello.subarray(0, hello.length - 1), 13);
    expect(first.toServer).toHaveLength(0);
    expect(first.refusal).toBeUndefined();
    const last = feed(g, 'client', hello.subarray(hello.length - 1));
    expect(last.toServer.equals(hello)).toBe(true);
    expect(g.open).toBe(false);
  });

  it('takes the name case-insensitively and with a trailing dot', () => {
    for (const name of ['ALLOWED.Fake.Test', 'allowed.fake.test.']) {
      const step = guard().fromClient(clientHello({ serverName: name }));
      expect(step.refuse, name).toBe(false);
    }
  });

  it('refuses another name (domain fronting), with the names in the reason and a TLS alert', () => {
    const step = guard().fromClient(clientHello({ serverName: 'other.fake.test' }, 50));
    expect(step).toMatchObject({ refuse: true, rule: 'tls-sni' });
    if (!step.refuse) return;
    expect(step.reason).toMatch(/names other\.fake\.test \(SNI\), not allowed\.fake\.test/);
    // A fatal unrecognized_name alert: what the client's TLS library reports.
    expect([...step.answer!]).toEqual([21, 3, 3, 0, 2, 2, 112]);
  });

  it('refuses a name that only looks alike: a suffix, a label more, IDNA, an IP literal', () => {
    for (const name of ['allowed.fake.test.evil', 'x.allowed.fake.test', 'allowed.fake.tést', '10.0.0.1']) {
      expect(guard().fromClient(clientHello({ serverName: name })), name).toMatchObject({
        refuse: true,
        rule: 'tls-sni',
      });
    }
  });

  it('refuses a hello without a server name, and one with ECH', () => {
    expect(guard().fromClient(clientHello({ serverName: null }))).toMatchObject({
      refuse: true,
      rule: 'tls-no-sni',
    });
    const ech = guard().fromClient(clientHello({ serverName: NAME, ech: true }));
    expect(ech).toMatchObject({ refuse: true, rule: 'tls-ech' });
    if (ech.refuse) expect(ech.reason).toMatch(/encrypted_client_hello/);
  });

  it('refuses a tunnel that does not start with TLS; plain HTTP gets a 403 that says where HTTP goes', () => {
    const http = guard().fromClient(Buffer.from('GET / HTTP/1.1\r\nHost: other.fake.test\r\n\r\n'));
    expect(http).toMatchObject({ refuse: true, rule: 'tunnel-not-tls' });
    if (http.refuse) {
      expect(http.answer!.toString()).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*absolute URL/);
    }
    const ssh = guard().fromClient(Buffer.from('SSH-2.0-OpenSSH_9.2\r\n'));
    expect(ssh).toMatchObject({ refuse: true, rule: 'tunnel-not-tls' });
    if (ssh.refuse) {
      expect(ssh.reason).toContain('"SSH-2.0-OpenSSH_"');
      expect(ssh.answer).toBeUndefined();
    }
  });

  it('refuses another record type before or inside the hello, and a second message after it', () => {
    expect(guard().fromClient(Buffer.concat([changeCipherSpec(), clientHello()]))).toMatchObject({
      refuse: true,
      rule: 'tunnel-not-tls',
    });
    const hello = clientHello({}, 60);
    const interleaved = Buffer.concat([hello.subarray(0, 65), changeCipherSpec(), hello.subarray(65)]);
    const step = feed(guard(), 'client', interleaved);
    expect(step.refusal).toMatchObject({ rule: 'tls-handshake' });
    expect(step.refusal?.reason).toMatch(/in the middle of its ClientHello|before its ClientHello/);
    const two = records(22, Buffer.concat([clientHello().subarray(5), handshake(11, Buffer.alloc(3))]));
    expect(guard().fromClient(two)).toMatchObject({ refuse: true, rule: 'tls-handshake' });
    expect(guard().fromClient(records(22, handshake(11, Buffer.alloc(8))))).toMatchObject({
      refuse: true,
      rule: 'tls-handshake',
    });
  });

  it('refuses a hello larger than the cap, and a flood of tiny records, before holding them all', () => {
    const g = guard();
    // 70 KiB announced: refused once the message header is in, not after 70 KiB.
    const step = g.fromClient(records(22, Buffer.from([1, 0x01, 0x18, 0x00, 0, 0])));
    expect(step).toMatchObject({ refuse: true, rule: 'tls-handshake' });
    const tiny = records(22, handshake(1, Buffer.alloc(60_000)), 1);
    const flood = feed(guard(), 'client', tiny, 4096);
    expect(flood.refusal?.reason).toMatch(/more than \d+ bytes of records/);
  });
});

describe('after the hello', () => {
  function judged(): TunnelGuard {
    const g = guard();
    expect(g.fromClient(clientHello({ serverName: NAME }))).toMatchObject({ refuse: false });
    return g;
  }

  it('passes early data and change_cipher_spec, then opens on the ServerHello with what was left', () => {
    const g = judged();
    const early = Buffer.concat([changeCipherSpec(), applicationData(300)]);
    // Record by record: the early data's tail is still held when the server answers.
    const passed = feed(g, 'client', early.subarray(0, 200), 100);
    expect(passed.refusal).toBeUndefined();
    expect(passed.toServer.equals(early.subarray(0, 6))).toBe(true);
    const flight = Buffer.concat([serverHello(), applicationData(2000)]);
    const opened = feed(g, 'server', flight.subarray(0, 120));
    expect(opened.last).toMatchObject({ refuse: false, open: true });
    expect(opened.toClient.equals(flight.subarray(0, 120))).toBe(true);
    // What the client had sent of its unfinished record goes on to the server as it was.
    expect(opened.toServer.equals(early.subarray(6, 200))).toBe(true);
    expect(g.open).toBe(true);
    // From here every byte passes untouched (the proxy pipes it).
    expect(g.fromClient(Buffer.from('anything'))).toMatchObject({ refuse: false, open: true });
  });

  it('refuses a further plaintext handshake message before the server answers', () => {
    const step = judged().fromClient(records(22, handshake(16, Buffer.alloc(33))));
    expect(step).toMatchObject({ refuse: true, rule: 'tls-handshake' });
  });

  it('judges the second ClientHello after a HelloRetryRequest, and opens on the ServerHello after it', () => {
    const g = judged();
    const retry = Buffer.concat([serverHello(true), changeCipherSpec()]);
    const told = feed(g, 'server', retry, 30);
    expect(told.refusal).toBeUndefined();
    expect(told.toClient.equals(retry)).toBe(true);
    expect(g.open).toBe(false);
    const second = Buffer.concat([changeCipherSpec(), clientHello({ serverName: NAME })]);
    const sent = feed(g, 'client', second, 40);
    expect(sent.refusal).toBeUndefined();
    expect(sent.toServer.equals(second)).toBe(true);
    expect(g.fromServer(serverHello())).toMatchObject({ refuse: false, open: true });
  });

  it('refuses a second ClientHello that names another host, without forwarding it', () => {
    const g = judged();
    g.fromServer(serverHello(true));
    const sent = feed(g, 'client', clientHello({ serverName: 'other.fake.test' }), 25);
    expect(sent.toServer).toHaveLength(0);
    expect(sent.refusal).toMatchObject({ rule: 'tls-sni' });
    expect(sent.refusal?.reason).toMatch(/second ClientHello/);
  });

  it('refuses a second retry, a ServerHello before the second hello, and a server that speaks first', () => {
    const twice = judged();
    twice.fromServer(serverHello(true));
    twice.fromClient(clientHello({ serverName: NAME }));
    expect(twice.fromServer(serverHello(true))).toMatchObject({ refuse: true, rule: 'tls-handshake' });
    const early = judged();
    early.fromServer(serverHello(true));
    expect(early.fromServer(serverHello())).toMatchObject({ refuse: true, rule: 'tls-handshake' });
    expect(guard().fromServer(Buffer.from('220 smtp ready\r\n'))).toMatchObject({
      refuse: true,
      rule: 'tunnel-not-tls',
    });
    expect(judged().fromServer(applicationData(10))).toMatchObject({ refuse: true, rule: 'tls-handshake' });
    expect(judged().fromServer(records(22, handshake(11, Buffer.alloc(4))))).toMatchObject({
      refuse: true,
      rule: 'tls-handshake',
    });
  });

  it('says what it was waiting for when the deadline passes', () => {
    expect(guard().expire(15_000).reason).toMatch(/client sent nothing within 15 s/);
    const partial = guard();
    partial.fromClient(clientHello().subarray(0, 20));
    expect(partial.expire(2000).reason).toMatch(/ClientHello was not complete within 2 s/);
    expect(judged().expire(15_000).reason).toMatch(/server did not answer/);
  });
});
