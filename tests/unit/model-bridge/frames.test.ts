/**
 * The relay's frames: whatever the chunking, a frame comes out whole and once; an oversize
 * frame is refused from its header alone, before its payload is held.
 */
import { describe, expect, it, vi } from 'vitest';
import { encodeFrame, frameDecoder } from '../../../src/model-bridge/frames.js';

function collect(max = 1024) {
  const frames: { type: number; id: number; payload: string }[] = [];
  const push = frameDecoder(max, (type, id, payload) =>
    frames.push({ type, id, payload: payload.toString() }),
  );
  return { frames, push };
}

describe('frames', () => {
  const stream = Buffer.concat([
    encodeFrame(2, 1, Buffer.from('first')),
    encodeFrame(17, 0xffffffff, Buffer.alloc(0)),
    encodeFrame(3, 7, Buffer.from('x'.repeat(300))),
  ]);

  it('come out whole whatever the chunking: all at once, and byte by byte', () => {
    const whole = collect();
    whole.push(stream);
    const bytewise = collect();
    for (let i = 0; i < stream.length; i++) bytewise.push(stream.subarray(i, i + 1));
    const expected = [
      { type: 2, id: 1, payload: 'first' },
      { type: 17, id: 0xffffffff, payload: '' },
      { type: 3, id: 7, payload: 'x'.repeat(300) },
    ];
    expect(whole.frames).toEqual(expected);
    expect(bytewise.frames).toEqual(expected);
  });

  it('refuses a frame over the limit from its header, before any payload arrives', () => {
    const { frames, push } = collect(100);
    const header = encodeFrame(2, 1, Buffer.alloc(101)).subarray(0, 9);
    expect(() => push(header)).toThrow(/101 bytes is over the limit of 100/);
    expect(frames).toEqual([]);
  });

  it('a header that claims 4 GiB is refused, not waited for', () => {
    const { push } = collect(1024);
    const header = Buffer.from([2, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
    expect(() => push(header)).toThrow(/4294967295 bytes/);
  });

  it('joins a large frame sent in small chunks twice (header, payload), not once per chunk', () => {
    const big = Buffer.alloc(1024 * 1024, 7);
    const frame = encodeFrame(2, 1, big);
    let got: Buffer | undefined;
    const push = frameDecoder(big.length, (_type, _id, payload) => (got = payload));
    const concat = vi.spyOn(Buffer, 'concat');
    try {
      for (let at = 0; at < frame.length; at += 1024) push(frame.subarray(at, at + 1024));
      // 1025 chunks joined on each arrival would copy the frame a thousand times over.
      expect(concat.mock.calls.length).toBeLessThanOrEqual(2);
    } finally {
      concat.mockRestore();
    }
    expect(got?.equals(big)).toBe(true);
  });
});
