/**
 * `work`: a backlog done one item at a time (WIP = 1). The first item not yet done whose
 * dependencies pass is fixed (`fix`, patch applied to the working tree), then verified in a
 * fresh sandbox built from the repo as it is now, so with every item applied before it;
 * only then is it `passing`. Anything else makes it `blocked`, with the reason.
 *
 * The state file beside the backlog is written (atomically) before and after each step, so
 * a `work` that is killed continues where it was: passing items are never redone, and the
 * item that was running starts again (a crashed apply is undone by `fix` first). Nothing is
 * ever committed or pushed.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from '../atomic-write.js';
import { ConfigError, errorMessage, Interrupted } from '../errors.js';
import { silentProgress, type ProgressSink } from '../fix/progress.js';
import type { FixResult } from '../fix/run-fix.js';
import type { Backlog, BacklogItem } from './backlog.js';

export const ITEM_STATUSES = ['pending', 'running', 'passing', 'blocked'] as const;
export type ItemStatus = (typeof ITEM_STATUSES)[number];

const itemStateSchema = z.object({
  status: z.enum(ITEM_STATUSES),
  runId: z.string().optional(),
  outcome: z.string().optional(),
  reason: z.string().optional(),
  /** The end of the verification's output, for a blocked item. */
  output: z.string().optional(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
});
const stateSchema = z.object({ version: z.literal(1), items: z.record(z.string(), itemStateSchema) });
export type ItemState = z.infer<typeof itemStateSchema>;
export type WorkState = z.infer<typeof stateSchema>;

export interface Verification {
  passed: boolean;
  exitCode: number;
  output: string;
}

export interface WorkDeps {
  /**
   * `fix` on the item, applying its verified patch to the working tree; `progress` shows its
   * steps (turns, verification, apply) under the item's own line.
   */
  fix(item: BacklogItem, signal: AbortSignal, progress: ProgressSink): Promise<FixResult>;
  /** The item's verification in a fresh sandbox of the repo as it is now. */
  verify(item: BacklogItem, signal: AbortSignal): Promise<Verification>;
}

export interface WorkOptions {
  backlog: Backlog;
  stateFile: string;
  /** Go on with the items that do not depend on a blocked one, instead of stopping. */
  keepGoing: boolean;
  signal: AbortSignal;
  /**
   * One phase per item, from its start to its verdict (so its time is the item's), with the
   * item's `fix` and verification inside it as details.
   */
  progress?: ProgressSink;
}

/** The state file of a backlog: `<name>.state.json` beside it. */
export function stateFileFor(backlogFile: string): string {
  const dir = path.dirname(backlogFile);
  const name = path.basename(backlogFile).replace(/\.ya?ml$/i, '');
  return path.join(dir, `${name}.state.json`);
}

export async function readWorkState(file: string, backlog: Backlog): Promise<WorkState> {
  let state: WorkState = { version: 1, items: {} };
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    text = undefined;
  }
  if (text !== undefined) {
    const parsed = stateSchema.safeParse(
      (() => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          return undefined;
        }
      })(),
    );
    if (!parsed.success) {
      throw new ConfigError(`the state file ${file} is not one sandbox-harness wrote`, [], {
        hint: 'Move it away to start the backlog over.',
      });
    }
    state = parsed.data;
  }
  for (const item of backlog.items) state.items[item.id] ??= { status: 'pending' };
  return state;
}

const TAIL = 4000;

export async function runBacklog(options: WorkOptions, deps: WorkDeps): Promise<WorkState> {
  const { backlog, stateFile, signal } = options;
  const state = await readWorkState(stateFile, backlog);
  const save = () => writeFileAtomic(stateFile, `${JSON.stringify(state, null, 2)}\n`);
  const progress = options.progress ?? silentProgress;
  for (;;) {
    if (signal.aborted) throw new Interrupted();
    const item = nextItem(backlog, state);
    if (!item) break;
    const entry = state.items[item.id]!;
    Object.assign(entry, {
      status: 'running',
      startedAt: new Date().toISOString(),
    } satisfies Partial<ItemState>);
    delete entry.reason;
    delete entry.output;
    delete entry.finishedAt;
    await save();
    progress.phase('item', `${item.id}: fix ${item.ticket}`);
    const ended = await doItem(item, entry, deps, signal, progress);
    entry.finishedAt = new Date().toISOString();
    await save();
    progress.end(
      `${item.id}: ${ended === 'interrupted' ? 'interrupted' : entry.status}${entry.reason ? ` (${entry.reason})` : ''}`,
    );
    if (ended === 'interrupted') throw new Interrupted();
    if (entry.status === 'blocked' && !options.keepGoing) break;
  }
  await save();
  return state;
}

/** The first item not done whose dependencies pass; items behind a blocked one are blocked too. */
function nextItem(backlog: Backlog, state: WorkState): BacklogItem | undefined {
  for (const item of backlog.items) {
    const entry = state.items[item.id]!;
    if (entry.status === 'passing' || entry.status === 'blocked') continue;
    const blockedBy = item.dependsOn.find((dep) => state.items[dep]?.status === 'blocked');
    if (blockedBy) {
      Object.assign(entry, { status: 'blocked', reason: `depends on ${blockedBy}, which is blocked` });
      continue;
    }
    if (item.dependsOn.every((dep) => state.items[dep]?.status === 'passing')) return item;
  }
  return undefined;
}

async function doItem(
  item: BacklogItem,
  entry: ItemState,
  deps: WorkDeps,
  signal: AbortSignal,
  progress: ProgressSink,
): Promise<'done' | 'interrupted'> {
  let fixed: FixResult;
  try {
    fixed = await deps.fix(item, signal, withinPhase(progress));
  } catch (error) {
    if (error instanceof Interrupted || signal.aborted) return 'interrupted';
    Object.assign(entry, { status: 'blocked', reason: `fix could not run: ${errorMessage(error)}` });
    return 'done';
  }
  entry.runId = fixed.runId;
  entry.outcome = fixed.outcome;
  if (fixed.outcome === 'interrupted') return 'interrupted';
  const applied = fixed.outcome === 'ready-for-review' && fixed.record.applied === true;
  if (!applied && fixed.outcome !== 'nothing-to-fix') {
    const why =
      fixed.outcome === 'ready-for-review'
        ? `the verified patch was not applied: ${fixed.record.applyError ?? 'unknown reason'}`
        : `fix ended ${fixed.outcome}: ${fixed.record.message ?? ''}`.trim();
    Object.assign(entry, { status: 'blocked', reason: why });
    return 'done';
  }
  let verification: Verification;
  progress.detail(
    `${item.id}: verifying ${item.verify ? `(${item.verify})` : "with the catalog's tests"} in a fresh sandbox with every applied item`,
  );
  try {
    verification = await deps.verify(item, signal);
  } catch (error) {
    if (error instanceof Interrupted || signal.aborted) return 'interrupted';
    Object.assign(entry, {
      status: 'blocked',
      reason: `the verification could not run: ${errorMessage(error)}`,
    });
    return 'done';
  }
  if (verification.passed) {
    entry.status = 'passing';
    return 'done';
  }
  Object.assign(entry, {
    status: 'blocked',
    reason: `the verification failed (exit ${verification.exitCode}) in a fresh sandbox with every applied item`,
    output: verification.output.slice(-TAIL),
  });
  return 'done';
}

/**
 * A `fix` inside an item: its phases and their ends become details of the item's phase
 * (`attempt 1/3`, `turn 2: run_command npm test (exit 1, 7.1s)`, `verified: ...`), so the
 * item's one line goes on moving and its time is the item's whole time.
 */
export function withinPhase(outer: ProgressSink): ProgressSink {
  return {
    phase: (_phase, text) => outer.detail(text),
    detail: (text) => outer.detail(text),
    tick: (text) => outer.tick?.(text),
    end: (text) => outer.detail(text),
  };
}
