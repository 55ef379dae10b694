import { Writable } from 'node:stream';

/**
 * Collects raw bytes up to a cap and remembers whether more came: for the harness's own
 * scripts, whose output is data (a listing, a file), where a cut is an error, not a view.
 */
export class BoundedBuffer extends Writable {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  total = 0;

  constructor(private readonly maxBytes: number) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.total += chunk.length;
    if (this.kept < this.maxBytes) {
      const take = chunk.subarray(0, this.maxBytes - this.kept);
      this.chunks.push(Buffer.from(take));
      this.kept += take.length;
    }
    callback();
  }

  get overflowed(): boolean {
    return this.total > this.maxBytes;
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}
