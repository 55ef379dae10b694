/**
 * The one way the harness reads back small files of its own (caches, status files) that
 * someone else could have put something at: never through a link at the name, never waiting
 * on a pipe, sized by the file that was opened (a file swapped after a look cannot pass for
 * another), at most `maxBytes`. Anything else (missing, a link, a folder, a device, too big,
 * grown past the limit while read) is undefined, never an error.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

export async function readOwnFile(file: string, maxBytes: number): Promise<Buffer | undefined> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.size > maxBytes) return undefined;
    // One byte more than the limit: a file that grew past it since the look is refused.
    const bytes = Buffer.alloc(info.size + 1);
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    return bytesRead > maxBytes ? undefined : bytes.subarray(0, bytesRead);
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}
