import type { Phase, ProgressSink } from '../fix/progress.js';
import { terminalSafe } from './terminal.js';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * On a terminal: one live line per phase, rewritten in place, left as a summary when the
 * phase ends. Elsewhere (CI logs, pipes): plain lines, and details only when they say
 * something new, so a log stays readable.
 */
export function terminalProgress(stream: NodeJS.WritableStream, isTTY: boolean): ProgressSink {
  let current: { phase: Phase; text: string; started: number } | undefined;
  let frame = 0;
  let lastDetail = '';
  const columns = () => (stream as NodeJS.WriteStream).columns ?? 100;
  const elapsed = () => (current ? `${((Date.now() - current.started) / 1000).toFixed(1)}s` : '');
  const render = (detail: string) => {
    if (!current) return;
    frame = (frame + 1) % FRAMES.length;
    const line = `${FRAMES[frame]} ${current.text}${detail ? `: ${detail}` : ''} (${elapsed()})`;
    stream.write(`\r\x1b[K${line.slice(0, columns() - 1)}`);
  };
  return {
    phase(phase, raw) {
      const text = terminalSafe(raw);
      if (current && isTTY) stream.write('\n');
      current = { phase, text, started: Date.now() };
      lastDetail = '';
      if (isTTY) render('');
      else stream.write(`[${phase}] ${text}\n`);
    },
    detail(raw) {
      // Details quote build output and tool names: hostile text.
      const text = terminalSafe(raw);
      if (isTTY) render(text);
      else if (text !== lastDetail) stream.write(`  ${text}\n`);
      lastDetail = text;
    },
    end(raw) {
      const text = terminalSafe(raw);
      if (!current) return;
      if (isTTY)
        stream.write(`\r\x1b[K${`✔ ${current.text}: ${text} (${elapsed()})`.slice(0, columns() - 1)}\n`);
      else stream.write(`  -> ${text} (${elapsed()})\n`);
      current = undefined;
    },
  };
}
