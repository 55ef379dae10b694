/**
 * The apply journal: what `applyChangeSet` is about to change in a repo, made durable
 * before its first rename, so that a process killed half-way (kill -9, the OOM killer, a
 * power cut) leaves enough behind for the next run to put the repo back. The in-memory
 * rollback covers errors; only this covers a crash.
 *
 * It lives in the user's state folder, one file per repo (keyed by the repo's real path),
 * never inside the repo: a repo, or an agent's change to it, could otherwise ship a forged
 * journal that "restores" whatever it likes.
 */
import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { hostname, homedir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';

/** The harness's per-user state: `$XDG_STATE_HOME/sandbox-harness`, else `~/.local/state/sandbox-harness`. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  const home = env.HOME && env.HOME.startsWith('/') ? env.HOME : homedir();
  const base = xdg && xdg.startsWith('/') ? xdg : path.join(home, '.local', 'state');
  return path.join(base, 'sandbox-harness');
}

/** `<state>/apply`: where the journals go. */
export function defaultJournalDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(defaultStateDir(env), 'apply');
}

/** The journal of the repo whose real path is `root`. */
export function journalFile(journalDir: string, root: string): string {
  return path.join(journalDir, `${createHash('sha256').update(root).digest('hex').slice(0, 32)}.json`);
}

const journalSchema = z.object({
  version: z.literal(1),
  root: z.string(),
  pid: z.number().int(),
  host: z.string(),
  startedAt: z.string(),
  /** Names this apply's temp files with, so a crash's leftovers can be found and removed. */
  tempTag: z.string().regex(/^[0-9a-f]{12}$/),
  entries: z.array(
    z.object({
      path: z.string(),
      /** The host file before the apply, or null when it did not exist. */
      // Permission bits only: a restore never sets a set-id or sticky bit.
      before: z.object({ content: z.string(), mode: z.number().int().min(0).max(0o777) }).nullable(),
      /** sha256 of what the apply writes there. */
      after: z.string(),
    }),
  ),
  /** Repo-relative folders the apply creates, parents first. */
  createdDirs: z.array(z.string()),
});

export type Journal = z.infer<typeof journalSchema>;
export type JournalEntry = Journal['entries'][number];

export function newJournal(
  root: string,
  tempTag: string,
  entries: { path: string; before: { content: Buffer; mode: number } | null; after: string }[],
  createdDirs: string[],
): Journal {
  return {
    version: 1,
    root,
    pid: process.pid,
    host: hostname(),
    startedAt: new Date().toISOString(),
    tempTag,
    entries: entries.map((e) => ({
      path: e.path,
      before: e.before ? { content: e.before.content.toString('base64'), mode: e.before.mode } : null,
      after: e.after,
    })),
    createdDirs,
  };
}

export function serializeJournal(journal: Journal): Buffer {
  return Buffer.from(JSON.stringify(journal));
}

/** The journal in `bytes`, or a reason it cannot be used. */
export function parseJournal(bytes: Buffer, root: string): Journal | string {
  let data: unknown;
  try {
    data = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'it is not JSON';
  }
  const parsed = journalSchema.safeParse(data);
  if (!parsed.success)
    return `it is not a journal of this version (${parsed.error.issues[0]?.message ?? ''})`;
  if (parsed.data.root !== root) return `it belongs to ${parsed.data.root}`;
  return parsed.data;
}

/** Is the process that wrote `journal` still running (so its apply is not interrupted)? */
export function writerAlive(journal: Journal): boolean {
  if (journal.host !== hostname() || journal.pid === process.pid) return false;
  return pidAlive(journal.pid);
}

/** Where the journal is written before it is renamed into place; the pid tells whose it is. */
export function journalTempFile(file: string, tempTag: string): string {
  return `${file}.${process.pid}.${tempTag}.tmp`;
}

/**
 * Journal temp files of `file` that a dead process left (it died before the rename): the
 * journal never existed, so they are only litter.
 */
export async function staleJournalTemps(file: string): Promise<string[]> {
  const dir = path.dirname(file);
  const prefix = `${path.basename(file)}.`;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const match = name.startsWith(prefix)
      ? /^(\d+)\.[0-9a-f]{12}\.tmp$/.exec(name.slice(prefix.length))
      : null;
    if (!match) return [];
    return pidAlive(Number(match[1])) ? [] : [path.join(dir, name)];
  });
}

function pidAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The temp file an apply tagged `tempTag` writes beside `target` before renaming it there. */
export function tempFileFor(target: string, tempTag: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.${tempTag}.sandbox-harness.tmp`);
}
