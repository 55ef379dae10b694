import { describe, expect, it } from 'vitest';
import {
  createProgressReporter,
  estimateEtaMs,
  formatBar,
  formatProgressEvent,
  formatProgressLine,
  poolTally,
  queueTally,
  type EvalProgress,
} from '../../../src/evals/eval-progress.js';
import { result } from './helpers.js';

function progress(extra: Partial<EvalProgress> = {}): EvalProgress {
  return {
    done: 3,
    total: 10,
    passed: 2,
    failed: 1,
    infrastructure: 0,
    errors: 0,
    inFlight: 2,
    resumed: 0,
    elapsedMs: 60_000,
    etaMs: 140_000,
    ...extra,
  };
}

describe('estimateEtaMs', () => {
  it('is unknown until a trial of this run has finished', () => {
    expect(estimateEtaMs(0, 9, 5000)).toBeNull();
  });

  it('extrapolates this run’s throughput to the remaining trials', () => {
    // 3 trials in 60 s -> 20 s each -> 7 remaining take 140 s
    expect(estimateEtaMs(3, 7, 60_000)).toBe(140_000);
  });

  it('is zero when nothing remains', () => {
    expect(estimateEtaMs(0, 0, 0)).toBe(0);
  });
});

describe('times in the progress line (the terminal style of src/format.ts)', () => {
  it('writes elapsed and remaining time in minutes and hours', () => {
    expect(formatProgressLine(progress({ elapsedMs: 3_720_000, etaMs: 185_000 }), 10)).toMatch(
      /elapsed 1h02m eta 3m05s$/,
    );
  });

  it('shows an ETA that is not known yet as -', () => {
    expect(formatProgressLine(progress({ etaMs: null }), 10)).toMatch(/ eta -$/);
  });
});

describe('formatBar', () => {
  it('fills in proportion to done/total, rounding down', () => {
    expect(formatBar(3, 10, 10)).toBe('[###.......]');
    expect(formatBar(99, 100, 10)).toBe('[#########.]');
    expect(formatBar(10, 10, 10)).toBe('[##########]');
  });

  it('is full for an empty eval rather than dividing by zero', () => {
    expect(formatBar(0, 0, 4)).toBe('[####]');
  });
});

describe('formatProgressLine', () => {
  it('shows bar, counts, trials running and ETA', () => {
    expect(formatProgressLine(progress(), 10)).toBe(
      '[###.......] 3/10 pass 2 fail 1 running 2 elapsed 1m00s eta 2m20s',
    );
  });

  it('mentions infrastructure failures only when there are some', () => {
    expect(formatProgressLine(progress({ infrastructure: 1, inFlight: 0 }), 10)).toBe(
      '[###.......] 3/10 pass 2 fail 1 infra 1 elapsed 1m00s eta 2m20s',
    );
  });
});

describe('formatProgressEvent', () => {
  it('names the trial that finished, its category and cost', () => {
    const last = result({ taskId: 'fix-add', trial: 2 }, 'tests-failed', { turns: 7, durationMs: 42_000 });
    expect(formatProgressEvent(progress({ last }))).toBe(
      '[3/10] fix-add#2 tests-failed (7 turns, 42.0s) pass 2 fail 1 eta 2m20s',
    );
  });

  it('says when a trial was retried after an infrastructure failure', () => {
    const last = result({ taskId: 't', trial: 0 }, 'ready-for-review', { infraRetried: true });
    expect(formatProgressEvent(progress({ last }))).toContain('retried after infrastructure failure');
  });

  it('mentions resumed trials in the opening line', () => {
    expect(formatProgressEvent(progress({ done: 4, resumed: 4, passed: 4, failed: 0 }))).toBe(
      '[4/10] pass 4 fail 0 (4 resumed)',
    );
  });
});

describe('createProgressReporter', () => {
  function sink(isTTY: boolean, columns?: number) {
    const chunks: string[] = [];
    return { chunks, stream: { isTTY, columns, write: (c: string) => chunks.push(c) } };
  }

  it('redraws one line with \\r on a terminal and ends it on finish', () => {
    const { chunks, stream } = sink(true);
    const reporter = createProgressReporter(stream);
    reporter.update(progress({ done: 1 }));
    reporter.update(progress({ done: 2 }));
    expect(chunks.every((c) => c.startsWith('\r') && !c.includes('\n'))).toBe(true);
    reporter.finish();
    expect(chunks.at(-1)).toBe('\n');
  });

  it('pads a shorter redraw so no characters of the longer line remain', () => {
    const { chunks, stream } = sink(true);
    const reporter = createProgressReporter(stream);
    reporter.update(progress({ inFlight: 12 }));
    reporter.update(progress({ inFlight: 0 }));
    expect(chunks[1]?.length).toBe(chunks[0]?.length);
  });

  it('cuts the line to the terminal width so \\r rewinds the whole of it', () => {
    const { chunks, stream } = sink(true, 30);
    createProgressReporter(stream).update(progress());
    expect(chunks[0]?.length).toBe(30); // "\r" + 29 characters
  });

  it('writes plain lines, one per update, when not a terminal', () => {
    const { chunks, stream } = sink(false);
    const reporter = createProgressReporter(stream);
    reporter.update(progress());
    reporter.update(progress({ done: 4 }));
    reporter.finish();
    expect(chunks).toEqual(['[3/10] pass 2 fail 1\n', '[4/10] pass 2 fail 1\n']);
  });
});

describe('progress over several engines', () => {
  const engines: EvalProgress['engines'] = [
    {
      name: 'local',
      inFleet: true,
      capacity: 2,
      running: 1,
      lost: false,
      trials: 3,
      passes: 2,
      infrastructure: 0,
      meanTrialMs: 41_000,
    },
    {
      name: 'box-b',
      inFleet: true,
      capacity: 4,
      running: 0,
      lost: true,
      trials: 2,
      passes: 0,
      infrastructure: 2,
      meanTrialMs: 5_000,
    },
    {
      name: 'old',
      inFleet: false,
      capacity: 0,
      running: 0,
      lost: false,
      trials: 1,
      passes: 1,
      infrastructure: 0,
      meanTrialMs: 1000,
    },
  ];

  it('shows each engine of the eval on the redrawn line: running over capacity, or lost', () => {
    expect(formatProgressLine(progress({ engines }))).toBe(
      '[######..............] 3/10 pass 2 fail 1 running 2 [local 1/2 box-b lost] elapsed 1m00s eta 2m20s',
    );
  });

  it('names the engine of each finished trial, where a retried one failed first, and what each engine did', () => {
    const last = result({ taskId: 'fix-it', trial: 1 }, 'ready-for-review', {
      engine: 'local',
      infraRetried: true,
      firstTry: { engine: 'box-b', category: 'infrastructure', durationMs: 5000 },
    });
    expect(formatProgressEvent(progress({ engines, last }))).toBe(
      '[3/10] fix-it#1 ready-for-review on local (4 turns, 1.5s, retried after infrastructure failure on box-b) pass 2 fail 1 eta 2m20s' +
        ' | local 3 run, 2 pass, 41.0s avg; box-b (lost) 2 run, 0 pass, 2 infra, 5.0s avg',
    );
  });

  it('says nothing about engines for an eval on one engine', () => {
    const one = [engines[0]!];
    expect(formatProgressLine(progress({ engines: one }))).not.toContain('[local');
    expect(
      formatProgressEvent(
        progress({
          engines: one,
          last: result({ taskId: 't', trial: 0 }, 'ready-for-review', { engine: 'local' }),
        }),
      ),
    ).not.toMatch(/ on local|\|/);
  });

  it('prints a lost engine on a line of its own, also on a terminal', () => {
    const written: string[] = [];
    const reporter = createProgressReporter({ write: (c: string) => written.push(c), isTTY: true });
    reporter.update(progress({ engines }));
    reporter.update(
      progress({ engines, notice: 'engine box-b lost (gone); its trials are retried on the other engines' }),
    );
    expect(written[1]).toMatch(
      /^\rengine box-b lost \(gone\); its trials are retried on the other engines *\n$/,
    );
    expect(written[2]).toMatch(/^\r\[######/);
    const plain: string[] = [];
    const log = createProgressReporter({ write: (c: string) => plain.push(c) }, { tty: false });
    log.update(progress({ notice: 'engine box-b lost (gone)' }));
    expect(plain).toEqual(['[3/10] engine box-b lost (gone)\n']);
  });
});

describe("a cluster's queue in the progress", () => {
  it('counts waiting jobs by their latest event and names the reason most of them give', () => {
    const seen: { count: number; reason: string }[] = [];
    const tally = queueTally((q) => seen.push(q));
    tally({ job: '1', state: 'PENDING', reason: 'Resources' });
    tally({ job: '2', state: 'PENDING', reason: 'Priority' });
    tally({ job: '3', state: 'PENDING', reason: 'Priority' });
    tally({ job: '2', state: 'RUNNING', reason: '' });
    tally({ job: '3', state: 'CANCELLED', reason: '' });
    tally({ job: '1', state: 'RUNNING', reason: '' });
    expect(seen).toEqual([
      { count: 1, reason: 'Resources' },
      { count: 2, reason: 'Resources' },
      { count: 3, reason: 'Priority' },
      { count: 2, reason: 'Resources' },
      { count: 1, reason: 'Resources' },
      { count: 0, reason: '' },
    ]);
  });

  it('shows queued trials apart from running ones on the redrawn line', () => {
    expect(
      formatProgressLine(progress({ inFlight: 5, queued: { count: 3, reason: 'Resources' } }), 10),
    ).toContain(' running 2 queued 3 (Resources) ');
    expect(formatProgressLine(progress({ queued: { count: 0, reason: '' } }), 10)).not.toContain('queued');
  });

  it('redraws the line when the queue changes on a terminal; a log hears when the wait starts, changes reason or ends', () => {
    const tty: string[] = [];
    const onTty = createProgressReporter({ write: (c: string) => tty.push(c), isTTY: true });
    onTty.update(progress({ inFlight: 4 }));
    onTty.queue?.({ count: 2, reason: 'Resources' });
    expect(tty.at(-1)).toContain('running 2 queued 2 (Resources)');

    const log: string[] = [];
    const onLog = createProgressReporter({ write: (c: string) => log.push(c), isTTY: false });
    onLog.update(progress());
    log.length = 0;
    onLog.queue?.({ count: 1, reason: 'Resources' });
    onLog.queue?.({ count: 2, reason: 'Resources' });
    onLog.queue?.({ count: 2, reason: 'ReqNodeNotAvail, UnavailableNodes:node2' });
    onLog.queue?.({ count: 0, reason: '' });
    expect(log).toEqual([
      '[3/10] queued 1: Resources\n',
      '[3/10] queued 2: ReqNodeNotAvail, UnavailableNodes:node2\n',
      '[3/10] no trial waits in the queue\n',
    ]);
  });
});

describe('the warm pools in the progress (eval --pool)', () => {
  const stats = (ready: number, handedOut: number, cold: number) => ({
    ready,
    starting: 0,
    handedOut,
    cold,
    discarded: 0,
  });

  it("sums every trial's pool, each by its latest counts, and says only a change", () => {
    const seen: unknown[] = [];
    const tally = poolTally((p) => seen.push(p));
    tally('a-t0', stats(2, 0, 0));
    tally('a-t1', stats(1, 0, 1));
    tally('a-t0', stats(1, 1, 0));
    tally('a-t0', stats(1, 1, 0));
    // A drained pool holds nothing, but what it gave stays counted.
    tally('a-t0', stats(0, 2, 0));
    expect(seen).toEqual([
      { ready: 2, taken: 0, cold: 0 },
      { ready: 3, taken: 0, cold: 1 },
      { ready: 2, taken: 1, cold: 1 },
      { ready: 1, taken: 2, cold: 1 },
    ]);
  });

  it('is on the redrawn line at once, and on the next trial line of a log', () => {
    const tty: string[] = [];
    const onTty = createProgressReporter({ write: (c: string) => tty.push(c), isTTY: true });
    onTty.update(progress());
    onTty.pool?.({ ready: 3, taken: 4, cold: 1 });
    expect(tty.at(-1)).toContain(' pool 3 warm (4 taken, 1 cold)');

    const log: string[] = [];
    const onLog = createProgressReporter({ write: (c: string) => log.push(c), isTTY: false });
    onLog.update(progress());
    log.length = 0;
    onLog.pool?.({ ready: 2, taken: 1, cold: 0 });
    expect(log).toEqual([]);
    onLog.update(progress({ done: 4, last: result({ taskId: 'x', trial: 0 }, 'ready-for-review') }));
    expect(log.at(-1)).toContain(' pool 2 warm (1 taken, 0 cold)');
    expect(formatProgressLine(progress(), 10)).not.toContain('pool');
  });
});
