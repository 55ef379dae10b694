/**
 * The byte cap on command output: the head and the tail are kept exactly, the marker says
 * how many bytes were cut, memory stays bounded whatever the chunking, and a cut never
 * splits a UTF-8 character into garbage.
 */
import { describe, expect, it } from 'vitest';
import { CappedOutput } from '../../../src/sandbox/output.js';

function capture(maxBytes: number, chunks: (string | Buffer)[]): CappedOutput {
  const out = new CappedOutput(maxBytes);
  for (const chunk of chunks) out.write(Buffer.from(chunk));
  return out;
}

/** Waits for the writes above to be processed (Writable calls _write on the next tick at most). */
async function settled(out: CappedOutput): Promise<CappedOutput> {
  await new Promise<void>((resolve) => out.end(resolve));
  return out;
}

const MARKER =
  /\n\[\.\.\. (\d+) bytes cut by sandbox-harness: output over the (\d+)-byte cap; head and tail kept \.\.\.\]\n/;

function parts(text: string) {
  const match = MARKER.exec(text);
  if (!match) return { head: text, cut: 0, tail: '' };
  return {
    head: text.slice(0, match.index),
    cut: Number(match[1]),
    cap: Number(match[2]),
    tail: text.slice(match.index + match[0].length),
  };
}

function chunked(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

const digits = (n: number) => Array.from({ length: n }, (_, i) => String(i % 10)).join('');

describe('CappedOutput', () => {
  it('keeps everything up to the cap, byte for byte', async () => {
    const out = await settled(capture(10, ['abc', 'defghij']));
    expect(out.text()).toBe('abcdefghij');
    expect(out.truncated).toBe(false);
    expect(out.total).toBe(10);
  });

  it('one byte over the cap: head and tail halves, one byte cut', async () => {
    const out = await settled(capture(10, ['abcdefghijk']));
    expect(out.truncated).toBe(true);
    expect(parts(out.text())).toEqual({ head: 'abcde', cut: 1, cap: 10, tail: 'ghijk' });
  });

  it('an odd cap gives the extra byte to the tail', async () => {
    const out = await settled(capture(7, [digits(100)]));
    const { head, tail, cut } = parts(out.text());
    expect([head, tail, cut]).toEqual(['012', '6789', 93]);
  });

  it.each([
    ['one big chunk', (s: string) => [s]],
    ['one byte at a time', (s: string) => s.split('')],
    ['chunks of 7', (s: string) => chunked(s, 7)],
    ['chunks of 1000', (s: string) => chunked(s, 1000)],
  ])('keeps the exact head and tail with %s', async (_label, split) => {
    const text = Array.from({ length: 5000 }, (_, i) => `line ${i}\n`).join('');
    const out = await settled(capture(256, split(text)));
    const { head, tail, cut } = parts(out.text());
    expect(head).toBe(text.slice(0, 128));
    expect(tail).toBe(text.slice(-128));
    expect(cut).toBe(text.length - 256);
    expect(out.total).toBe(text.length);
  });

  it('a zero cap keeps nothing and says how much there was', async () => {
    const out = await settled(capture(0, ['abc']));
    expect(out.truncated).toBe(true);
    expect(parts(out.text())).toMatchObject({ head: '', tail: '', cut: 3 });
  });

  it('holds at most about twice the cap in memory, whatever the chunks', async () => {
    const out = capture(1024, [
      Buffer.alloc(8 * 1024 * 1024, 0x61),
      'z'.repeat(10),
      Buffer.alloc(4 * 1024 * 1024, 0x62),
    ]);
    await settled(out);
    expect(out.retainedBytes).toBeLessThanOrEqual(2 * 1024);
    const { head, tail } = parts(out.text());
    expect(head).toBe('a'.repeat(512));
    expect(tail).toBe('b'.repeat(512));
  });

  it('never splits a UTF-8 character at either cut', async () => {
    // 'é' is 2 bytes and '€' 3: a 9-byte cap cuts the head after 4 bytes, inside a character.
    const text = 'éééé€€€€€€€€€€ééé';
    const out = await settled(capture(9, [text]));
    const { head, tail, cut } = parts(out.text());
    expect(out.text()).not.toContain('\uFFFD');
    expect(text.startsWith(head)).toBe(true);
    expect(text.endsWith(tail)).toBe(true);
    expect(Buffer.byteLength(head) + cut + Buffer.byteLength(tail)).toBe(Buffer.byteLength(text));
    expect(Buffer.byteLength(head)).toBeGreaterThanOrEqual(2);
    expect(Buffer.byteLength(tail)).toBeGreaterThanOrEqual(3);
  });

  it('leaves invalid bytes of the command itself as they are (replaced), but only those', async () => {
    const out = await settled(capture(100, [Buffer.from([0x61, 0xff, 0x62])]));
    expect(out.text()).toBe('a\uFFFDb');
  });
});
