/**
 * The journal's promise, checked on a run folder: `run.json` is exactly (byte for byte) the
 * fold of the domain events in its `events.jsonl`.
 */
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { foldRun, type LoggedEvent } from '../../src/runs/journal.js';

export async function expectRecordIsFoldOfEvents(
  runDir: string,
  /** `fields`: the same fields and values, in any order (a record rewritten after being read back through its schema). */
  compare: 'bytes' | 'fields' = 'bytes',
): Promise<void> {
  const recordText = await readFile(join(runDir, 'run.json'), 'utf8');
  const events = (await readFile(join(runDir, 'events.jsonl'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LoggedEvent);
  const folded = foldRun(events);
  expect(folded, `${runDir}: events.jsonl has no run_start`).toBeDefined();
  const why = `${runDir}: run.json is not the fold of its events`;
  if (compare === 'fields') expect(folded, why).toEqual(JSON.parse(recordText));
  else expect(`${JSON.stringify(folded, null, 2)}\n`, why).toBe(recordText);
}

/** Every run folder (a folder with a run.json) under `root`, at any depth. */
export async function runFoldersUnder(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    if (entries.some((e) => e.name === 'run.json' && e.isFile())) out.push(dir);
    for (const e of entries) {
      if (e.isDirectory() && e.name !== 'node_modules' && !(await lstat(join(dir, e.name))).isSymbolicLink())
        await walk(join(dir, e.name));
    }
  };
  await walk(root);
  return out.sort();
}
