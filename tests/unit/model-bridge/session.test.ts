/**
 * The host's end of the relay's frames, fed hostile bytes: every protocol break closes the
 * bridge for that sandbox (the relay is killed), nothing throws into the host, and a relay
 * that stops reading its answers is dropped instead of buffered for.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { BridgeAnswer } from '../../../src/model-bridge/bridge.js';
import { encodeFrame, FRAME, frameDecoder } from '../../../src/model-bridge/frames.js';
import { BridgeSession, DEFAULT_SESSION_LIMITS } from '../../../src/model-bridge/session.js';
import { fromChunks } from '../../../src/model-bridge/upstream.js';

function requestPayload(head: unknown, body = '{}'): Buffer {
  const headBytes = Buffer.from(typeof head === 'string' ? head : JSON.stringify(head));
  const length = Buffer.alloc(4);
  length.writeUInt32BE(headBytes.length, 0);
  return Buffer.concat([length, headBytes, Buffer.from(body)]);
}

const goodHead = { method: 'POST', path: '/v1/messages', headers: [['content-type', 'application/json']] };
const hello = encodeFrame(FRAME.hello, 0, Buffer.from('{"port":4000}'));

/** A session over a fake relay process whose stdin is kept; `answers` decides each exchange. */
function harness(
  options: {
    exchange?: () => Promise<BridgeAnswer>;
    limits?: Partial<typeof DEFAULT_SESSION_LIMITS>;
    input?: Writable;
  } = {},
) {
  const written: Buffer[] = [];
  const input =
    options.input ??
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        written.push(chunk);
        callback();
      },
    });
  let kills = 0;
  let exchanges = 0;
  const session = new BridgeSession(
    () => {
      exchanges += 1;
      return (
        options.exchange?.() ?? new Promise<BridgeAnswer>(() => undefined) // never answers
      );
    },
    { ...DEFAULT_SESSION_LIMITS, ...options.limits },
  );
  session.attach({
    input,
    exited: new Promise<number>(() => undefined),
    kill: async () => {
      kills += 1;
    },
  });
  return { session, written, kills: () => kills, exchanges: () => exchanges };
}

describe('the bridge session against a hostile relay', () => {
  it('serves a well-formed request and answers in frames', async () => {
    const h = harness({
      exchange: async () => ({
        status: 200,
        headers: [['content-type', 'application/json']],
        body: fromChunks([Buffer.from('{"ok":true}')]),
      }),
    });
    h.session.receive(hello);
    await expect(h.session.ready).resolves.toBe(4000);
    h.session.receive(encodeFrame(FRAME.request, 1, requestPayload(goodHead)));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const frames: [number, number, string][] = [];
    const decode = frameDecoder(1024, (type, id, payload) => frames.push([type, id, payload.toString()]));
    for (const chunk of h.written) decode(chunk);
    expect(frames).toEqual([
      [FRAME.head, 1, '{"status":200,"headers":[["content-type","application/json"]]}'],
      [FRAME.body, 1, '{"ok":true}'],
      [FRAME.end, 1, ''],
    ]);
    // A small answer is one write: one trip through the engine's exec stream, not three.
    expect(h.written).toHaveLength(1);
    expect(h.session.closedReason).toBeUndefined();
  });

  it.each([
    ['a frame before its hello', () => [encodeFrame(FRAME.request, 1, requestPayload(goodHead))]],
    ['a hello without a port', () => [encodeFrame(FRAME.hello, 0, Buffer.from('{"port":"80"}'))]],
    ['a hello that is not JSON', () => [encodeFrame(FRAME.hello, 0, Buffer.from('port=1'))]],
    ['a frame of unknown type', () => [hello, encodeFrame(99, 1, Buffer.alloc(0))]],
    ['a frame of unknown type 16', () => [hello, encodeFrame(FRAME.head, 1, Buffer.from('{}'))]],
    [
      'request id 1 again',
      () => [
        hello,
        encodeFrame(FRAME.request, 1, requestPayload(goodHead)),
        encodeFrame(FRAME.request, 1, requestPayload(goodHead)),
      ],
    ],
    ['request id 0', () => [hello, encodeFrame(FRAME.request, 0, requestPayload(goodHead))]],
    [
      'a cancel of request 5, which was never sent',
      () => [hello, encodeFrame(FRAME.cancel, 5, Buffer.alloc(0))],
    ],
    ['a request frame without a head', () => [hello, encodeFrame(FRAME.request, 1, Buffer.from('ab'))]],
    [
      'a request head of a bad size',
      () => [hello, encodeFrame(FRAME.request, 1, Buffer.from([0, 0, 0, 200, 1]))],
    ],
    [
      'a request head that is not JSON',
      () => [hello, encodeFrame(FRAME.request, 1, requestPayload('{method'))],
    ],
    [
      'a request with a bad method',
      () => [hello, encodeFrame(FRAME.request, 1, requestPayload({ ...goodHead, method: 'POST /x' }))],
    ],
    [
      'a request with a bad path',
      () => [hello, encodeFrame(FRAME.request, 1, requestPayload({ ...goodHead, path: 'http://x/v1' }))],
    ],
    [
      'a request with bad headers',
      () => [hello, encodeFrame(FRAME.request, 1, requestPayload({ ...goodHead, headers: [['a', 1]] }))],
    ],
    [
      'a request with bad headers',
      () => [
        hello,
        encodeFrame(
          FRAME.request,
          1,
          requestPayload({ ...goodHead, headers: Array.from({ length: 201 }, () => ['a', 'b']) }),
        ),
      ],
    ],
  ])('closes the bridge on %s, killing the relay', async (why, frames) => {
    const h = harness();
    for (const frame of frames()) h.session.receive(frame);
    expect(h.session.closedReason).toContain(why);
    expect(h.kills()).toBe(1);
    // Nothing after the broken frame reached the bridge (a well-formed request before it did).
    expect(h.exchanges()).toBe(why.startsWith('request id 1 again') ? 1 : 0);
    // Later bytes are ignored, never thrown on.
    expect(() => h.session.receive(randomBytes(64))).not.toThrow();
  });

  it('refuses an oversize frame from its header, before holding its payload', () => {
    const h = harness({ limits: { maxRequestBytes: 1000, maxHeadBytes: 100 } });
    h.session.receive(hello);
    h.session.receive(encodeFrame(FRAME.request, 1, Buffer.alloc(2000)).subarray(0, 9));
    expect(h.session.closedReason).toMatch(
      /a bad frame \(RangeError: a frame of 2000 bytes is over the limit of 1104\)/,
    );
  });

  it('closes the bridge on more requests in flight than the relay may have', () => {
    const h = harness({ limits: { maxConcurrent: 2 } });
    h.session.receive(hello);
    for (let id = 1; id <= 3; id++)
      h.session.receive(encodeFrame(FRAME.request, id, requestPayload(goodHead)));
    expect(h.session.closedReason).toContain('more than 2 requests at once');
    expect(h.exchanges()).toBe(2);
  });

  it('a cancelled request frees its slot at once, so the next one in the same chunk is taken', () => {
    const h = harness({ limits: { maxConcurrent: 1 } });
    h.session.receive(hello);
    h.session.receive(
      Buffer.concat([
        encodeFrame(FRAME.request, 1, requestPayload(goodHead)),
        encodeFrame(FRAME.cancel, 1, Buffer.alloc(0)),
        encodeFrame(FRAME.request, 2, requestPayload(goodHead)),
      ]),
    );
    expect(h.session.closedReason).toBeUndefined();
    expect(h.exchanges()).toBe(2);
  });

  it('survives a flood of random bytes: it closes, the host does not throw', () => {
    for (let round = 0; round < 200; round++) {
      const h = harness();
      if (round % 2 === 0) h.session.receive(hello);
      expect(() => {
        for (let i = 0; i < 20; i++) h.session.receive(randomBytes(1 + ((i * 37) % 300)));
      }).not.toThrow();
    }
  });

  it('drops a relay that leaves its answers unread, instead of buffering for it', async () => {
    // A stdin that never takes another byte.
    const stuck = new Writable({ highWaterMark: 16, write: () => undefined });
    const big = Buffer.alloc(1024 * 1024, 'x');
    const h = harness({
      input: stuck,
      limits: { drainTimeoutMs: 200 },
      exchange: async () => ({ status: 200, headers: [], body: fromChunks([big, big, big]) }),
    });
    h.session.receive(hello);
    h.session.receive(encodeFrame(FRAME.request, 1, requestPayload(goodHead)));
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(h.session.closedReason).toContain('left its answers unread for 200ms');
    expect(h.kills()).toBe(1);
    // It stopped once the stdin was full: the queue's cap and one piece of the answer at
    // most, never the whole 3 MiB behind it.
    expect(stuck.writableLength).toBeLessThan(1.5 * 1024 * 1024);
  });
});
