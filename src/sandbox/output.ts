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
      this.tail.push(Buffer.from(rest));
      this.tailBytes += rest.length;
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

  /** The bytes kept: all of them unless `truncated`. */
  bytes(): Buffer {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailLimit) tail = tail.subarray(tail.length - this.tailLimit);
    return Buffer.concat([head, tail]);
  }

  text(): string {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailLimit) tail = tail.subarray(tail.length - this.tailLimit);
    if (!this.truncated) return Buffer.concat([head, tail]).toString('utf8');
    const cut = this.total - head.length - tail.length;
    return `${head.toString('utf8')}\n[... ${cut} bytes cut by sandbox-harness: output over the ${this.headLimit + this.tailLimit}-byte cap; head and tail kept ...]\n${tail.toString('utf8')}`;
  }
}
