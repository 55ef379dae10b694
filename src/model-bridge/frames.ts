/**
 * The relay's wire: frames over the stdin and stdout of one process the host started in the
 * sandbox. A frame is a 9-byte header (type: u8, request id: u32 BE, payload length: u32 BE)
 * and its payload. Lengths come first, so the host refuses an oversize frame from its header
 * alone, before it holds any of it; nothing in a payload can end a frame early or start one.
 *
 * `encodeFrame` and `frameDecoder` are self-contained on purpose: the relay script carries
 * their source text into the sandbox (see relay.ts), so both ends parse with the same code.
 */

/** Frame types. Relay to host below 16, host to relay from 16. */
export const FRAME = {
  /** Relay is listening; payload `{"port":N}`. Once, first, id 0. */
  hello: 1,
  /** A whole HTTP request: u32 BE head length, head JSON `{method, path, headers}`, body bytes. */
  request: 2,
  /** The client went away before its answer ended. */
  cancel: 3,
  /** Answer head: `{"status":N,"headers":[[name,value],...]}`. */
  head: 16,
  /** Answer bytes, as they arrive. */
  body: 17,
  /** Answer complete. */
  end: 18,
  /** Answer broken midway: the relay drops the client's connection. */
  abort: 19,
} as const;

export const FRAME_HEADER_BYTES = 9;

/** One frame's bytes. */
export function encodeFrame(type: number, id: number, payload: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(9 + payload.length);
  frame.writeUInt8(type, 0);
  frame.writeUInt32BE(id, 1);
  frame.writeUInt32BE(payload.length, 5);
  frame.set(payload, 9);
  return frame;
}

/**
 * A push parser: feed it chunks as they arrive; it calls `onFrame` once per whole frame.
 * Throws a RangeError as soon as a header declares more than `maxPayload` bytes; after a
 * throw the stream is broken and must be dropped. Bytes are joined at most twice per frame
 * (header, then payload), whatever the chunking, so a large frame in small chunks costs no
 * more than one copy of itself.
 */
export function frameDecoder(
  maxPayload: number,
  onFrame: (type: number, id: number, payload: Buffer) => void,
): (chunk: Buffer) => void {
  let chunks: Buffer[] = [];
  let bytes = 0;
  let need = 9;
  let type = -1;
  let id = 0;
  return function push(chunk: Buffer): void {
    chunks.push(chunk);
    bytes += chunk.length;
    while (bytes >= need) {
      const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes);
      chunks = [all];
      if (type < 0) {
        const length = all.readUInt32BE(5);
        if (length > maxPayload) {
          throw new RangeError(`a frame of ${length} bytes is over the limit of ${maxPayload}`);
        }
        type = all.readUInt8(0);
        id = all.readUInt32BE(1);
        need = 9 + length;
        continue;
      }
      const payload = all.subarray(9, need);
      const rest = all.subarray(need);
      const frameType = type;
      type = -1;
      chunks = rest.length > 0 ? [rest] : [];
      bytes = rest.length;
      need = 9;
      onFrame(frameType, id, payload);
    }
  };
}
