import { Writable } from 'node:stream';

/**
 * Collects a stream's bytes up to a cap, keeping the head and the tail and counting what
 * was cut, so a flood (`yes`) costs bounded memory and the reader still sees how the
 * output began and ended.
 */
export class CappedOutput extends Writable {
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  total = 0;

  constructor(maxBytes: number) {
    super();
    this.headLimit = Math.floor(maxBytes / 2);
    this.tailLimit = maxBytes - this.headLimit;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.total += chunk.length;
    let rest = chunk;
    if (this.headBytes < this.headLimit) {
      const take = Math.min(this.headLimit - this.headBytes, rest.length);
      this.head.push(rest.subarray(0, take));
      this.headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length > 0 && this.tailLimit > 0) {
      // Only the end of a big chunk can ever be part of the tail; copying just that keeps
      // memory at the cap even when the daemon hands over megabytes at once.
      const keep = rest.subarray(Math.max(0, rest.length - this.tailLimit));
      this.tail.push(Buffer.from(keep));
      this.tailBytes += keep.length;
      // Drop whole chunks from the front while the rest still fills the tail window.
      while (this.tail.length > 1 && this.tailBytes - this.tail[0]!.length >= this.tailLimit) {
        this.tailBytes -= this.tail.shift()!.length;
      }
    }
    callback();
  }

  get truncated(): boolean {
    return this.total > this.headLimit + this.tailLimit;
  }

  /** Bytes held in memory: at most twice the cap, however the output arrived. */
  get retainedBytes(): number {
    return this.headBytes + this.tailBytes;
  }

  /** The bytes kept: all of them unless `truncated`. */
  bytes(): Buffer {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailLimit) tail = tail.subarray(tail.length - this.tailLimit);
    return Buffer.concat([head, tail]);
  }

  text(): string {
    let head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailLimit) tail = tail.subarray(tail.length - this.tailLimit);
    if (!this.truncated) return Buffer.concat([head, tail]).toString('utf8');
    // The cuts fall at byte counts; move them to character boundaries so neither side ends
    // or starts with half a UTF-8 character (shown as U+FFFD), and count those bytes as cut.
    head = head.subarray(0, completeUtf8Length(head));
    let skip = 0;
    while (skip < tail.length && skip < 3 && (tail[skip]! & 0xc0) === 0x80) skip++;
    tail = tail.subarray(skip);
    const cut = this.total - head.length - tail.length;
    return `${head.toString('utf8')}\n[... ${cut} bytes cut by sandbox-harness: output over the ${this.headLimit + this.tailLimit}-byte cap; head and tail kept ...]\n${tail.toString('utf8')}`;
  }
}

/** Length of `bytes` without a UTF-8 character that is cut off at its end. */
function completeUtf8Length(bytes: Buffer): number {
  // Look back over at most 3 continuation bytes for the lead byte of the last character.
  for (let back = 1; back <= Math.min(4, bytes.length); back++) {
    const byte = bytes[bytes.length - back]!;
    if ((byte & 0xc0) === 0x80) continue;
    const needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needed > back ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}
