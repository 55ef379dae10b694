import type { Phase, ProgressSink } from '../fix/progress.js';
import { formatDuration } from '../format.js';
import { terminalSafe } from './terminal.js';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** How often a live line redraws while nothing else happens (spinner frame, elapsed time). */
export const SPINNER_INTERVAL_MS = 100;

// Live lines of every progress sink, so other output can end them first (see settleProgress).
const live = new Set<() => void>();

/**
 * Ends every live progress line (a newline, the spinner stopped) so that what is printed
 * next starts on a line of its own and is never overwritten by a later redraw. The CLI's
 * print helpers call it; a phase that goes on redraws on a fresh line at its next detail.
 */
export function settleProgress(): void {
  for (const settle of [...live]) settle();
}

/**
 * On a terminal: one live line per phase, rewritten in place, left as a summary when the
 * phase ends; while a phase is live a timer keeps the spinner and the elapsed time moving,
 * so a long command (a build, a test run) does not look stuck. The timer is unref'd (it
 * never keeps the process alive) and stops when the phase ends. Elsewhere (CI logs, pipes):
 * plain lines, details only when they say something new, and no timer, so a log stays
 * readable.
 */
export function terminalProgress(stream: NodeJS.WritableStream, isTTY: boolean): ProgressSink {
  let current: { phase: Phase; text: string; started: number } | undefined;
  let frame = 0;
  let lastDetail = '';
  let drawn = false;
  let timer: NodeJS.Timeout | undefined;
  const columns = () => (stream as NodeJS.WriteStream).columns ?? 100;
  const elapsed = () => (current ? formatDuration(Date.now() - current.started) : '');
  const stopTimer = () => {
    if (timer) clearInterval(timer);
    timer = undefined;
  };
  const settle = () => {
    stopTimer();
    live.delete(settle);
    if (drawn) stream.write('\n');
    drawn = false;
  };
  const render = () => {
    if (!current) return;
    frame = (frame + 1) % FRAMES.length;
    const line = `${FRAMES[frame]} ${current.text}${lastDetail ? `: ${lastDetail}` : ''} (${elapsed()})`;
    stream.write(`\r\x1b[K${line.slice(0, columns() - 1)}`);
    drawn = true;
    live.add(settle);
    if (!timer) {
      timer = setInterval(render, SPINNER_INTERVAL_MS);
      timer.unref();
    }
  };
  return {
    phase(phase, raw) {
      const text = terminalSafe(raw);
      if (drawn) stream.write('\n');
      drawn = false;
      current = { phase, text, started: Date.now() };
      lastDetail = '';
      if (isTTY) render();
      else stream.write(`[${phase}] ${text}\n`);
    },
    detail(raw) {
      // Details quote build output and tool names: hostile text.
      const text = terminalSafe(raw);
      const changed = text !== lastDetail;
      lastDetail = text;
      if (isTTY) render();
      else if (changed) stream.write(`  ${text}\n`);
    },
    tick(raw) {
      if (!isTTY) return;
      lastDetail = terminalSafe(raw);
      render();
    },
    end(raw) {
      const text = terminalSafe(raw);
      if (!current) return;
      stopTimer();
      live.delete(settle);
      if (isTTY)
        stream.write(`\r\x1b[K${`✔ ${current.text}: ${text} (${elapsed()})`.slice(0, columns() - 1)}\n`);
      else stream.write(`  -> ${text} (${elapsed()})\n`);
      drawn = false;
      current = undefined;
    },
  };
}
