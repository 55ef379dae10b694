/**
 * Run records: everything a person needs to understand a `fix` run after the fact, under
 * `.sandbox-harness/runs/<run-id>/`. Ids sort by time. Files are written atomically
 * (temp + rename) so a crash or a second Ctrl-C never leaves half a `run.json`.
 */
import { mkdir, readdir, readFile, rename, appendFile, open, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { UsageError } from '../errors.js';

export const HARNESS_DIR = '.sandbox-harness';

export type Outcome =
  'ready-for-review' | 'nothing-to-fix' | 'failed' | 'rejected' | 'error' | 'interrupted' | 'running';

export type AttemptVerdict =
  | 'passed'
  | 'tests-failed'
  | 'rejected'
  | 'no-changes'
  | 'max-turns'
  | 'token-budget'
  | 'timeout'
  | 'interrupted'
  | 'error';

export interface AttemptRecord {
  n: number;
  verdict: AttemptVerdict;
  agentStatus?: string;
  turns: number;
  inputTokens: number;
  outputTokens: number;
  durationMs: number;
  changedFiles: string[];
  failingLayer?: string;
  containers: { role: string; id: string; kept: boolean }[];
  feedback?: string;
}

export interface RunRecord {
  id: string;
  version: 1;
  harnessVersion: string;
  startedAt: string;
  finishedAt?: string;
  durationMs?: number;
  outcome: Outcome;
  exitCode?: number;
  message?: string;
  ticket: { id?: string; title?: string; source: string; file?: string };
  catalog: { name: string; file: string; hash: string };
  repoDir: string;
  image?: { tag: string; id: string; reused: boolean };
  provider: { name: string; model: string };
  keep: 'on-failure' | 'always' | 'never';
  apply: boolean;
  applied?: boolean;
  applyError?: string;
  baseline?: { failing: boolean; failingLayer?: string; durationMs: number };
  attempts: AttemptRecord[];
  tokens: { input: number; output: number };
  turns: number;
  containers: { role: string; id: string; kept: boolean }[];
  testCommand: { name: string; command: string }[];
  patchFile?: string;
}

export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').replace(/\..*$/, '');
  return `${stamp}-${randomBytes(3).toString('hex')}`;
}

export function runsDirFor(repoDir: string): string {
  return join(repoDir, HARNESS_DIR, 'runs');
}

async function writeAtomic(file: string, content: string | Buffer): Promise<void> {
  const temp = `${file}.${process.pid}.${randomBytes(3).toString('hex')}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
}

/** A run's folder and the files in it. */
export class RunDir {
  constructor(
    readonly dir: string,
    readonly id: string,
  ) {}

  static async create(runsDir: string, id = newRunId()): Promise<RunDir> {
    const dir = join(runsDir, id);
    await mkdir(join(dir, 'attempts'), { recursive: true });
    // Run records live in the user's repo; a `*` .gitignore at the top of our folder keeps
    // them out of `git status` without touching the repo's own .gitignore.
    if (basename(dirname(runsDir)) === HARNESS_DIR) {
      await writeFile(join(dirname(runsDir), '.gitignore'), '*\n', { flag: 'wx' }).catch(() => undefined);
    }
    return new RunDir(dir, id);
  }

  path(...parts: string[]): string {
    return join(this.dir, ...parts);
  }

  async writeRecord(record: RunRecord): Promise<void> {
    await writeAtomic(this.path('run.json'), `${JSON.stringify(record, null, 2)}\n`);
  }

  async writeFile(relative: string, content: string | Buffer): Promise<string> {
    const file = this.path(relative);
    await mkdir(join(file, '..'), { recursive: true });
    await writeAtomic(file, content);
    return file;
  }

  async appendEvent(event: Record<string, unknown>): Promise<void> {
    await appendFile(this.path('events.jsonl'), `${JSON.stringify(event)}\n`);
  }
}

export interface StoredRun {
  dir: string;
  record: RunRecord;
}

export async function listRuns(runsDir: string): Promise<StoredRun[]> {
  let names: string[];
  try {
    names = await readdir(runsDir);
  } catch {
    return [];
  }
  const runs: StoredRun[] = [];
  for (const name of names.sort()) {
    try {
      const record = JSON.parse(await readFile(join(runsDir, name, 'run.json'), 'utf8')) as RunRecord;
      runs.push({ dir: join(runsDir, name), record });
    } catch {
      // A folder without a readable run.json is not a run (or one still being created).
    }
  }
  return runs;
}

/** Finds a run by full id, unique prefix, or `last`. */
export async function resolveRun(runsDir: string, ref: string): Promise<StoredRun> {
  const runs = await listRuns(runsDir);
  if (runs.length === 0) {
    throw new UsageError(`no runs recorded in ${runsDir}`, {
      hint: 'Run `sandbox-harness fix <ticket>` first, or pass --repo to point at the repo whose runs you mean.',
    });
  }
  if (ref === 'last' || ref === 'latest') return runs[runs.length - 1]!;
  const exact = runs.find((r) => r.record.id === ref);
  if (exact) return exact;
  const matches = runs.filter((r) => r.record.id.startsWith(ref));
  if (matches.length === 1) return matches[0]!;
  if (matches.length > 1) {
    throw new UsageError(`run id "${ref}" is ambiguous: ${matches.map((m) => m.record.id).join(', ')}`, {
      hint: 'Give more characters of the id.',
    });
  }
  throw new UsageError(`unknown run id "${ref}" in ${runsDir}`, {
    hint: '`sandbox-harness runs` lists the recorded runs; `last` means the newest.',
  });
}

export async function readRunFile(run: StoredRun, relative: string): Promise<string | undefined> {
  try {
    return await readFile(join(run.dir, relative), 'utf8');
  } catch {
    return undefined;
  }
}

export async function writeFileAtomic(file: string, content: string | Buffer): Promise<void> {
  await writeAtomic(file, content);
}
