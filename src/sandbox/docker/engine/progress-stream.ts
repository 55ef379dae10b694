/**
 * The daemon's JSON-lines progress stream (build, pull, import, load), read as hostile data:
 * a line that is not JSON, a line past any sane length or a connection that drops before the
 * end is the engine failing (`SandboxUnavailable`, with the cause), never an exception thrown
 * out of an event handler, never a build that seems to have finished.
 */
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { HarnessError, ImageError, SandboxUnavailable } from '../../../errors.js';
import { daemonMessage, isConnectionError, translateDaemonError } from './daemon-errors.js';

/** No progress event is near this long; a longer line is not the daemon speaking. */
const MAX_LINE_CHARS = 1024 * 1024;

interface ProgressEvent {
  stream?: string;
  status?: string;
  progress?: string;
  error?: string;
  id?: string;
}

export interface FollowOptions {
  /** What was being done, for messages: `building repo:1`, `pulling node:20`. */
  context: string;
  where: string | undefined;
  onLine?: ((line: string) => void) | undefined;
}

/** Follows the stream to its end; the first `error` event in it rejects with ImageError. */
export function followProgress(stream: Readable, options: FollowOptions): Promise<void> {
  const { onLine } = options;
  return new Promise((resolve, reject) => {
    // The daemon reports a failed build or pull as an ordinary event and then finishes the
    // stream, so the first `error` event is remembered and decides the outcome.
    let streamError: string | undefined;
    let settled = false;
    let ended = false;
    let buffer = '';
    const decoder = new StringDecoder('utf8');
    // Build output arrives in arbitrary chunks (a line can span events) and the legacy
    // builder wraps each stderr chunk in colour codes; lines are reassembled per stream
    // (so stdout and stderr fragments do not run together) and cleaned here.
    const partial = { out: '', err: '' };
    const emit = (text: string) => {
      // eslint-disable-next-line no-control-regex
      const line = text.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');
      if (onLine && line.trim() !== '') onLine(line);
    };
    const flush = () => {
      for (const key of ['out', 'err'] as const) {
        if (partial[key] !== '') emit(partial[key]);
        partial[key] = '';
      }
    };
    const finish = (error?: HarnessError) => {
      if (settled) return;
      settled = true;
      flush();
      if (error) {
        stream.destroy();
        reject(error);
      } else if (streamError !== undefined) reject(new ImageError(streamError.trim()));
      else resolve();
    };
    const broken = (what: string) =>
      new SandboxUnavailable(
        `${options.context}: ${options.where ? `the engine at ${options.where}` : 'the engine'} ${what}`,
      );
    const event = (line: string) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        finish(broken(`sent a progress line that is not JSON: ${JSON.stringify(line.slice(0, 120))}`));
        return;
      }
      if (typeof parsed !== 'object' || parsed === null) return;
      const e = parsed as ProgressEvent;
      if (typeof e.error === 'string') streamError ??= e.error;
      if (!onLine) return;
      if (typeof e.stream === 'string' && e.error === undefined) {
        const key = e.stream.startsWith('\x1b[91m') ? 'err' : 'out';
        const lines = (partial[key] + e.stream).split('\n');
        partial[key] = lines.pop() ?? '';
        for (const l of lines) emit(l);
        return;
      }
      flush();
      const text =
        typeof e.error === 'string'
          ? e.error
          : [e.id, e.status, e.progress].filter((p) => typeof p === 'string' && p !== '').join(' ');
      for (const l of text.split('\n')) emit(l);
    };
    const take = (text: string) => {
      buffer += text;
      for (let at = buffer.indexOf('\n'); at >= 0 && !settled; at = buffer.indexOf('\n')) {
        const line = buffer.slice(0, at).replace(/\r$/, '');
        buffer = buffer.slice(at + 1);
        if (line !== '') event(line);
      }
      if (buffer.length > MAX_LINE_CHARS) finish(broken('sent a progress line of more than a megabyte'));
    };
    stream.on('data', (chunk: Buffer | string) => {
      if (!settled) take(typeof chunk === 'string' ? chunk : decoder.write(chunk));
    });
    stream.on('end', () => {
      ended = true;
      take(decoder.end());
      if (buffer.trim() !== '' && !settled) event(buffer.trim());
      finish();
    });
    stream.on('error', (error: unknown) => {
      if (error instanceof HarnessError) finish(error);
      else if (isConnectionError(error)) finish(translateDaemonError(error, options.context, options.where));
      else finish(new ImageError(daemonMessage(error), { cause: error }));
    });
    // Closed without an end and without an error: the connection went away mid-answer.
    stream.on('close', () => {
      if (!ended) finish(broken('closed the connection before the end of its answer'));
    });
  });
}
