import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SPINNER_INTERVAL_MS, settleProgress, terminalProgress } from '../../../src/cli/progress-line.js';

const CLEAR_LINE = '\r\u001b[K';

/** A stream that records each write, as a terminal would receive them. */
function recorder(): { stream: NodeJS.WritableStream; writes: string[] } {
  const stream = new PassThrough();
  const writes: string[] = [];
  stream.write = ((chunk: string) => {
    writes.push(chunk);
    return true;
  }) as typeof stream.write;
  return { stream, writes };
}

describe('terminal progress: the spinner moves while a long phase runs', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => {
    settleProgress();
    vi.useRealTimers();
  });

  it('redraws a live line on a timer, advancing the frame and the elapsed time, with no new detail', () => {
    const { stream, writes } = recorder();
    const progress = terminalProgress(stream, true);
    progress.phase('baseline', 'baseline: running the tests');
    progress.detail('npm test');
    writes.length = 0;
    vi.advanceTimersByTime(10 * SPINNER_INTERVAL_MS);
    expect(writes).toHaveLength(10);
    for (const w of writes) {
      expect(w.startsWith(CLEAR_LINE)).toBe(true);
      // Elapsed time in the CLI's style (src/format.ts): `100ms` under a second, then `1.0s`.
      expect(w.slice(CLEAR_LINE.length)).toMatch(
        /^. baseline: running the tests: npm test \((?:\d+ms|\d+\.\ds)\)$/,
      );
    }
    expect(new Set(writes.map((w) => w.charAt(4))).size).toBeGreaterThan(5);
    expect(writes.at(-1)).toContain('(1.0s)');
    vi.advanceTimersByTime(2000);
    expect(writes.at(-1)).toContain('(3.0s)');
  });

  it('stops at the end of the phase and leaves the summary line', () => {
    const { stream, writes } = recorder();
    const progress = terminalProgress(stream, true);
    progress.phase('image', 'sandbox image');
    vi.advanceTimersByTime(350);
    progress.end('built');
    expect(writes.at(-1)).toMatch(/^\r.\[K✔ sandbox image: built \(350ms\)\n$/);
    expect(writes.at(-1)?.startsWith(CLEAR_LINE)).toBe(true);
    const count = writes.length;
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(5000);
    expect(writes).toHaveLength(count);
  });

  it('never runs a timer on output that is not a terminal', () => {
    const { stream, writes } = recorder();
    const progress = terminalProgress(stream, false);
    progress.phase('baseline', 'baseline');
    progress.detail('npm test');
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000);
    expect(writes).toEqual(['[baseline] baseline\n', '  npm test\n']);
  });

  it('one timer per live line: a new phase replaces the old one', () => {
    const { stream } = recorder();
    const progress = terminalProgress(stream, true);
    progress.phase('attempt', 'attempt 1/3');
    progress.detail('turn 1: run_command');
    progress.phase('verify', 'attempt 1: checking the change');
    expect(vi.getTimerCount()).toBe(1);
    progress.end('ok');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('settleProgress() ends a live line so other output is never drawn over; the next detail resumes', () => {
    const { stream, writes } = recorder();
    const progress = terminalProgress(stream, true);
    progress.phase('attempt', 'attempt 1/3');
    settleProgress();
    expect(writes.at(-1)).toBe('\n');
    expect(vi.getTimerCount()).toBe(0);
    const count = writes.length;
    vi.advanceTimersByTime(1000);
    expect(writes).toHaveLength(count);
    progress.detail('turn 2: edit_file');
    expect(vi.getTimerCount()).toBe(1);
    progress.end('done');
  });
});

describe('terminal progress timer', () => {
  it("is unref'd: a live line never keeps the process alive", () => {
    const spy = vi.spyOn(globalThis, 'setInterval');
    try {
      const progress = terminalProgress(recorder().stream, true);
      progress.phase('image', 'sandbox image');
      const timer = spy.mock.results[0]?.value as NodeJS.Timeout;
      expect(timer.hasRef()).toBe(false);
      progress.end('cached');
    } finally {
      spy.mockRestore();
    }
  });
});

describe("terminal progress: a build's steps", () => {
  afterEach(() => settleProgress());

  it('pass on the live line of a terminal, and stay out of a log (the phase end says how it went)', () => {
    const log = recorder();
    const plain = terminalProgress(log.stream, false);
    plain.phase('image', 'sandbox image');
    for (let step = 1; step <= 15; step++) plain.tick?.(`Step ${step}/15 : RUN something`);
    plain.end('sandbox-harness/repo:abc (built)');
    expect(log.writes).toEqual([
      '[image] sandbox image\n',
      expect.stringMatching(/^ {2}-> sandbox-harness\/repo:abc \(built\)/),
    ]);

    const tty = recorder();
    const live = terminalProgress(tty.stream, true);
    live.phase('image', 'sandbox image');
    live.tick?.('Step 3/15 : COPY . /workspace');
    expect(tty.writes.at(-1)).toContain('sandbox image: Step 3/15 : COPY . /workspace');
  });
});
