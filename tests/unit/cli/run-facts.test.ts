/**
 * The run's facts where people look: what a run cost (or that no model had a price, said
 * once), its engine and runtime, in `fix`'s summary, `inspect`, `runs`, `logs` and the eval's
 * terminal summary; `runs --json` for scripts, with numbers as numbers.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { printOutcome } from '../../../src/cli/commands/fix.js';
import { inspectCommand } from '../../../src/cli/commands/inspect.js';
import { logsCommand } from '../../../src/cli/commands/logs.js';
import { runsCommand } from '../../../src/cli/commands/runs.js';
import { costLine } from '../../../src/cli/commands/eval.js';
import { ticketHeading } from '../../../src/catalog/ticket.js';
import { summarize } from '../../../src/evals/summary.js';
import { formatCost } from '../../../src/format.js';
import { capturedContext } from '../../helpers/cli.js';
import { memoryRun, type MemoryRun } from '../../helpers/memory-run.js';
import { fakeSuite, result } from '../evals/helpers.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

async function run(): Promise<MemoryRun> {
  const made = await memoryRun();
  runs.push(made);
  expect(made.result.outcome).toBe('ready-for-review');
  return made;
}

/** Gives a recorded run a known cost, as a priced model would have left it. */
async function price(made: MemoryRun, cost: object): Promise<void> {
  const file = join(made.result.runDir, 'run.json');
  const record = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  await writeFile(file, JSON.stringify({ ...record, cost }));
  const events = (await readFile(join(made.result.runDir, 'events.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .map((e) => (e.kind === 'run_end' ? { ...e, cost } : e));
  await writeFile(join(made.result.runDir, 'events.jsonl'), events.map((e) => JSON.stringify(e)).join('\n'));
}

const PRICED = { usd: 0.0123, byRole: { main: 0.01, checker: 0.0023 } };

describe('cost', () => {
  it('formatCost: dollars; "no price" (never $0.0000) when no model had one; both when some had none', () => {
    expect(formatCost({ usd: 0.0123 })).toBe('$0.0123');
    expect(formatCost({ usd: 2.5 })).toBe('$2.50');
    expect(formatCost({ usd: 0, unpriced: ['m'] })).toBe('no price for m');
    expect(formatCost({ usd: 0.5, unpriced: ['m'] })).toBe('$0.5000 (no price for m)');
    expect(formatCost({ usd: 0 })).toBe('$0.0000');
    expect(formatCost(undefined)).toBe('-');
  });

  it("fix's summary says what the run cost, and that no model had a price when none had", async () => {
    const made = await run();
    const ctx = capturedContext(made.root);
    printOutcome(ctx, made.result, { keep: 'never', apply: false });
    expect(ctx.out()).toMatch(/^cost: no price for scripted$/m);
    expect(ctx.out()).not.toContain('$0.0000');
    const priced = capturedContext(made.root);
    printOutcome(
      priced,
      { ...made.result, record: { ...made.result.record, cost: PRICED } },
      {
        keep: 'never',
        apply: false,
      },
    );
    expect(priced.out()).toMatch(/^cost: \$0\.0123$/m);
  });

  it('inspect says the cost (each role when several spent), the engine and the runtime', async () => {
    const made = await run();
    const ctx = capturedContext(made.root);
    await inspectCommand(ctx, 'last', { runsDir: made.runsDir });
    expect(ctx.out()).toMatch(/^ {2}cost {6}no price for scripted$/m);
    expect(ctx.out()).toMatch(/^ {2}engine {4}memory \(memory\), runtime -$/m);
    await price(made, PRICED);
    const priced = capturedContext(made.root);
    await inspectCommand(priced, 'last', { runsDir: made.runsDir });
    expect(priced.out()).toMatch(/^ {2}cost {6}\$0\.0123 \(main \$0\.0100, checker \$0\.0023\)$/m);
  });

  it('runs has a cost column, "no price" said once under it; logs says the cost at the run\'s end', async () => {
    const [a, b] = [await run(), await run()];
    await price(b, PRICED);
    for (const made of [a, b]) {
      const ctx = capturedContext(made.root);
      await runsCommand(ctx, { runsDir: made.runsDir });
      const [header, , row] = ctx.out().split('\n');
      expect(header).toMatch(/\bcost\b/);
      if (made === a) {
        expect(row).toMatch(/\s-\s+no$/);
        expect(ctx.out().match(/no price for scripted/g)).toHaveLength(1);
      } else {
        expect(row).toMatch(/\s\$0\.0123\s+no$/);
        expect(ctx.out()).not.toContain('no price');
      }
      const logs = capturedContext(made.root);
      await logsCommand(logs, 'last', { runsDir: made.runsDir });
      const end = logs
        .out()
        .split('\n')
        .find((l) => l.includes('run_end'));
      expect(end).toContain(made === a ? 'no price for scripted' : '$0.0123');
    }
  });
});

describe('the ticket in a title', () => {
  it('inspect and ticket.md name the ticket id once when the title already starts with it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-ticket-'));
    try {
      const file = join(dir, 'OPS-9.md');
      await writeFile(file, '# OPS-9: Free shipping not applied\n\nA customer paid shipping on 45 EUR.\n');
      const made = await memoryRun({ overrides: { ticket: file } });
      runs.push(made);
      const ctx = capturedContext(made.root);
      await inspectCommand(ctx, 'last', { runsDir: made.runsDir });
      expect(ctx.out()).toMatch(/^ {2}ticket {4}OPS-9: Free shipping not applied$/m);
      expect(await readFile(join(made.result.runDir, 'ticket.md'), 'utf8')).toMatch(
        /^# OPS-9: Free shipping not applied\n/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('ticketHeading adds the id only when the title does not start with it', () => {
    expect(ticketHeading({ id: 'OPS-9', title: 'Free shipping' })).toBe('OPS-9: Free shipping');
    expect(ticketHeading({ id: 'OPS-9', title: 'OPS-9: Free shipping' })).toBe('OPS-9: Free shipping');
    expect(ticketHeading({ id: 'OPS-9', title: 'ops-9 - Free shipping' })).toBe('ops-9 - Free shipping');
    // A title that starts with a longer id is another ticket's.
    expect(ticketHeading({ id: 'OPS-9', title: 'OPS-91 is related' })).toBe('OPS-9: OPS-91 is related');
    expect(ticketHeading({ id: 'OPS-9', title: '' })).toBe('OPS-9');
  });
});

describe('runs --json', () => {
  it('gives numbers as numbers, ISO times, cost, engine and runtime', async () => {
    const made = await run();
    await price(made, PRICED);
    const ctx = capturedContext(made.root);
    await runsCommand(ctx, { runsDir: made.runsDir, json: true });
    const [row] = JSON.parse(ctx.out()) as Record<string, unknown>[];
    expect(row).toMatchObject({
      ticket: 'OPS-412',
      outcome: 'ready-for-review',
      attempts: 1,
      costUsd: 0.0123,
      applied: false,
      engine: 'memory',
      runtime: null,
      tokens: { input: expect.any(Number), output: expect.any(Number) },
    });
    expect(typeof row!.durationMs).toBe('number');
    expect(typeof row!.turns).toBe('number');
    expect(new Date(row!.startedAt as string).toISOString()).toBe(row!.startedAt);
    expect(new Date(row!.finishedAt as string).toISOString()).toBe(row!.finishedAt);
  });

  it('a cost no model priced is null, with the models named, not $0', async () => {
    const made = await run();
    const ctx = capturedContext(made.root);
    await runsCommand(ctx, { runsDir: made.runsDir, json: true });
    expect(JSON.parse(ctx.out())).toMatchObject([{ costUsd: null, unpriced: ['scripted'] }]);
  });
});

describe("the eval's terminal summary", () => {
  const meta = {
    suite: fakeSuite(['a']),
    n: 2,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:01:00.000Z',
    harnessVersion: '1.0.0',
  };

  it('says what the trials cost, and "no price" once for replayed ones', () => {
    const priced = summarize(
      [
        result({ taskId: 'a', trial: 0 }, 'ready-for-review', { costUsd: 0.2 }),
        result({ taskId: 'a', trial: 1 }, 'tests-failed', { costUsd: 0.4 }),
      ],
      meta,
    );
    expect(costLine(priced)).toMatch(
      /^cost: \$0\.6000 in all, \$0\.3000 per trial, \$0\.6000 per solved task; \d+\+\d+ tokens$/,
    );
    const replayed = summarize(
      [0, 1].map((trial) =>
        result({ taskId: 'a', trial }, 'ready-for-review', { costUsd: 0, unpriced: ['recorded-demo'] }),
      ),
      meta,
    );
    expect(costLine(replayed)).toMatch(/^cost: no price for recorded-demo; \d+\+\d+ tokens$/);
  });
});
