/**
 * One writer at a time for a folder of eval results (an unsharded eval's out folder, or one
 * shard's folder in a shared one), on a local disk or a file system shared by machines.
 *
 * The holder of generation G is the file `holder.G.json`, created exclusively (a file written
 * whole, then linked to its name: that fails when the name exists, on NFS too). The highest
 * generation holds the folder. Its owner shows it is alive by rewriting `holder.G.beat` (a
 * counter) every few seconds and says it is done by writing `released` there. A process that
 * wants the folder takes generation G+1, which only one process can create, when G is
 * released, or its owner is dead: on this machine (same host, boot and pid namespace) when its
 * process is gone; on another machine when its counter did not move for `staleMs` of our own
 * clock (clocks of two machines are never compared, and a process id is only ever read on the
 * machine it belongs to). An owner that finds a higher generation than its own has lost the
 * folder and stops before writing another result.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { link, open, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeFileAtomic } from '../atomic-write.js';
import { UsageError } from '../errors.js';
import { formatDuration } from '../format.js';

const HOLDER = /^holder\.(\d{1,9})\.json$/;
const BEAT = /^holder\.(\d{1,9})\.beat$/;

/** Where a process runs, as far as a process id means anything: two equal identities share pids. */
export interface MachineIdentity {
  host: string;
  /** The kernel's boot id (Linux); absent elsewhere: then nothing is "this machine". */
  bootId?: string;
  /** The pid namespace (`pid:[4026531836]`): two containers of one machine do not share pids. */
  pidNamespace?: string;
}

interface HolderRecord extends MachineIdentity {
  token: string;
  pid: number;
  /** The process's start time in clock ticks since boot (/proc), so a reused pid is not taken for it. */
  pidStart?: string;
  startedAt: string;
  /** What the holder runs (`eval shard 2/4`), for the message of a process that has to wait. */
  purpose: string;
}

export interface HolderLockOptions {
  /** What the holder does, in messages (`shard 2/4 of the eval`). */
  purpose: string;
  /** How often the holder shows it is alive (default 5 s). */
  beatMs?: number;
  /** How long an owner on another machine may show no sign of life before it is taken for dead (default 30 s). */
  staleMs?: number;
  say?: (line: string) => void;
  signal?: AbortSignal;
  /** Tests: another machine. */
  identity?: MachineIdentity;
}

export interface HeldLock {
  /** Aborted, with the reason, once another process took the folder (or the folder is gone). */
  readonly lost: AbortSignal;
  /** Stops the heartbeat and marks the folder free. */
  release(): Promise<void>;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

let machine: MachineIdentity | undefined;

export function thisMachine(): MachineIdentity {
  if (machine) return machine;
  let pidNamespace: string | undefined;
  try {
    pidNamespace = readlinkSync('/proc/self/ns/pid');
  } catch {
    pidNamespace = undefined;
  }
  const bootId = readText('/proc/sys/kernel/random/boot_id');
  machine = {
    host: os.hostname(),
    ...(bootId ? { bootId } : {}),
    ...(pidNamespace ? { pidNamespace } : {}),
  };
  return machine;
}

/** Field 22 of /proc/PID/stat: when the process started (after the command name, which may hold spaces). */
function processStart(pid: number): string | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

function sameMachine(a: MachineIdentity, b: MachineIdentity): boolean {
  return (
    a.bootId !== undefined &&
    a.pidNamespace !== undefined &&
    a.host === b.host &&
    a.bootId === b.bootId &&
    a.pidNamespace === b.pidNamespace
  );
}

/** On this machine: is the holder's process still there (the same process, not a reused pid)? */
function processAlive(record: HolderRecord): boolean {
  const start = processStart(record.pid);
  return start !== undefined && (record.pidStart === undefined || start === record.pidStart);
}

async function generations(dir: string): Promise<number[]> {
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[];
    throw error;
  });
  return names.flatMap((name) => {
    const match = HOLDER.exec(name);
    return match ? [Number(match[1])] : [];
  });
}

const holderFile = (dir: string, gen: number) => path.join(dir, `holder.${gen}.json`);
const beatFile = (dir: string, gen: number) => path.join(dir, `holder.${gen}.beat`);

async function readRecord(dir: string, gen: number): Promise<HolderRecord | undefined> {
  try {
    const value = JSON.parse(await readFile(holderFile(dir, gen), 'utf8')) as Partial<HolderRecord>;
    if (typeof value.token === 'string' && typeof value.host === 'string' && typeof value.pid === 'number')
      return value as HolderRecord;
  } catch {
    // Not a record: treated as one whose owner cannot be told apart from a dead one (below).
  }
  return undefined;
}

/** The beat file's text: a counter, or `released`; undefined when there is none yet. */
async function readBeat(dir: string, gen: number): Promise<string | undefined> {
  return (await readFile(beatFile(dir, gen), 'utf8').catch(() => undefined))?.trim();
}

/** Creates generation `gen` with `record`, exclusively; false when another process made it first. */
async function createGeneration(dir: string, gen: number, record: HolderRecord): Promise<boolean> {
  const temp = path.join(dir, `.holder.${gen}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', 0o644);
  try {
    await handle.writeFile(`${JSON.stringify(record, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temp, holderFile(dir, gen));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await rm(temp, { force: true });
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}

function describeHolder(record: HolderRecord | undefined): string {
  return record
    ? `pid ${record.pid} on ${record.host} (${record.purpose}, since ${record.startedAt})`
    : 'a process whose record cannot be read';
}

/**
 * Whether generation `gen` still holds the folder: false when it is released or its owner is
 * dead. Throws when a live owner holds it.
 */
async function stillHeld(
  dir: string,
  gen: number,
  me: MachineIdentity,
  options: HolderLockOptions,
): Promise<boolean> {
  const beat = await readBeat(dir, gen);
  if (beat === 'released') return false;
  const record = await readRecord(dir, gen);
  const busy = () =>
    new UsageError(`${dir} is in use by ${describeHolder(record)}`, {
      hint: 'wait for it to finish, or stop it first; a holder that died is taken over by itself',
    });
  if (record && sameMachine(record, me)) {
    if (processAlive(record)) throw busy();
    return false;
  }
  // Another machine (or a record that cannot be read): alive while its counter moves.
  const staleMs = options.staleMs ?? 30_000;
  options.say?.(
    `${dir} was last held by ${describeHolder(record)}; waiting ${formatDuration(staleMs)} to see whether it is alive`,
  );
  const deadline = Date.now() + staleMs;
  while (Date.now() < deadline) {
    await sleep(Math.min(1000, staleMs), options.signal);
    const now = await readBeat(dir, gen);
    if (now === 'released') return false;
    if (now !== beat || (await generations(dir)).some((g) => g > gen)) throw busy();
  }
  return false;
}

/** Takes the folder for this process (see the file's comment), or throws when a live process holds it. */
export async function acquireHolderLock(dir: string, options: HolderLockOptions): Promise<HeldLock> {
  const me = options.identity ?? thisMachine();
  const pidStart = processStart(process.pid);
  const record: HolderRecord = {
    ...me,
    token: randomBytes(12).toString('hex'),
    pid: process.pid,
    ...(pidStart !== undefined ? { pidStart } : {}),
    startedAt: new Date().toISOString(),
    purpose: options.purpose,
  };
  for (let tries = 0; ; tries++) {
    if (tries > 100) throw new UsageError(`could not take ${dir}: other processes keep taking it`);
    const current = Math.max(0, ...(await generations(dir)));
    if (current > 0 && (await stillHeld(dir, current, me, options))) continue;
    if (await createGeneration(dir, current + 1, record)) return hold(dir, current + 1, record, options);
  }
}

function hold(dir: string, gen: number, record: HolderRecord, options: HolderLockOptions): HeldLock {
  const lost = new AbortController();
  let beat = 0;
  let writing: Promise<void> = Promise.resolve();
  const writeBeat = (text: string) =>
    (writing = writing.then(() => writeFileAtomic(beatFile(dir, gen), `${text}\n`)));
  const check = async () => {
    const newer = (await generations(dir)).filter((g) => g > gen);
    if (newer.length > 0) {
      const taker = await readRecord(dir, Math.max(...newer));
      lost.abort(
        new UsageError(`${dir} was taken over by ${describeHolder(taker)}: this process stops writing there`),
      );
      return;
    }
    await writeBeat(String(++beat));
  };
  const timer = setInterval(() => {
    if (!lost.signal.aborted) void check().catch((error: unknown) => lost.abort(error));
  }, options.beatMs ?? 5000);
  timer.unref();
  void writeBeat(String(beat)).catch((error: unknown) => lost.abort(error));
  // The generations before this one are nobody's any more.
  void (async () => {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const match = HOLDER.exec(name) ?? BEAT.exec(name);
      if (match && Number(match[1]) < gen)
        await rm(path.join(dir, name), { force: true }).catch(() => undefined);
    }
  })();
  return {
    lost: lost.signal,
    async release() {
      clearInterval(timer);
      await writing.catch(() => undefined);
      if (!lost.signal.aborted && !(await generations(dir)).some((g) => g > gen)) await writeBeat('released');
      await writing.catch(() => undefined);
    },
  };
}

/** For `eval merge`: which holder, if any, is writing in `dir` right now (on this machine, or not yet known to be dead). */
export async function currentHolder(dir: string): Promise<string | undefined> {
  const gen = Math.max(0, ...(await generations(dir)));
  if (gen === 0 || (await readBeat(dir, gen)) === 'released') return undefined;
  const record = await readRecord(dir, gen);
  if (record && sameMachine(record, thisMachine()) && !processAlive(record)) return undefined;
  return describeHolder(record);
}
