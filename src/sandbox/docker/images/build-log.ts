/** Build logs: one file per build under the cache folder, which also remembers its last lines for messages. */
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheDir } from '../../../image-context/cache-dir.js';

export async function logsDir(): Promise<string> {
  const dir = join(cacheDir(), 'logs');
  await mkdir(dir, { recursive: true });
  return dir;
}

export function timestampForFile(date = new Date()): string {
  return date.toISOString().replace(/[:.]/g, '-');
}

/** A log file that also remembers its last lines, for error messages. */
export class LogFile {
  private readonly stream: WriteStream;
  private readonly tail: string[] = [];

  constructor(
    readonly path: string,
    private readonly tailSize = 40,
  ) {
    this.stream = createWriteStream(path, { flags: 'a' });
    // A full disk must not turn into an unhandled error; the build itself reports failures.
    this.stream.on('error', () => undefined);
  }

  line(text: string): void {
    this.stream.write(`${text}\n`);
    this.tail.push(text);
    if (this.tail.length > this.tailSize) this.tail.shift();
  }

  lastLines(count: number): string[] {
    return this.tail.slice(-count);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.stream.end(() => resolve()));
  }
}
