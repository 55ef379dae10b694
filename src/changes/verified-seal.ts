/**
 * The seal that ties a verified change to its verification. A run keeps what passed
 * verification in its folder (the saved change, the patch, the record), where anyone with
 * the repo can edit it; `apply` must write exactly what was tested, for the run it names, to
 * the repo it ran on. So when verification passes, the harness seals the run: an HMAC-SHA256,
 * with a key of this user's kept in the state folder (outside every repo and run folder,
 * mode 0600), over the run's id, the sha256 of the saved change (every path, kind, mode,
 * content hash and content, and the host state it replaces), the sha256 of the patch, and
 * the sha256 of the record's fields that were settled by then (`SEALED_RECORD_FIELDS`).
 *
 * Before anything is written, `apply` (and `fix` itself, at the end of a run) recomputes
 * each of these from the files as they are and checks the seal with the key: an edited
 * change, patch or record, a seal edited, missing, made with another key or taken from
 * another run are each refused, named. Without the key, a seal cannot be made; an agent
 * (in its sandbox) never sees the key, and a repo or a record cannot name another.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { constants } from 'node:fs';
import { link, mkdir, open, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { defaultStateDir } from './apply-journal.js';
import { sha256 } from './hash.js';

export const SEAL_FILE = 'verified-change.seal.json';
export const PATCH_FILE = 'patch.diff';

const KEY_BYTES = 32;

/**
 * The fields of a run record that are settled when verification passes and never change
 * after it: who ran what, where, with which catalog, image and tests. The rest (outcome,
 * times, costs, whether it was applied) is written later, by `fix` and by `apply`, and is
 * not sealed; `apply` reads none of it to decide what to write.
 */
export const SEALED_RECORD_FIELDS = [
  'id',
  'startedAt',
  'harnessVersion',
  'ticket',
  'catalog',
  'repoDir',
  'provider',
  'image',
  'testCommand',
  'heldOutTests',
  'patchFile',
] as const;

/** JSON with every object's keys sorted: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The sha256 of a record's sealed fields. */
export function sealedRecordHash(record: Record<string, unknown>): string {
  const view: Record<string, unknown> = {};
  for (const field of SEALED_RECORD_FIELDS) view[field] = record[field];
  return sha256(Buffer.from(canonicalJson(view)));
}

/** What a seal vouches for. */
export interface SealedFacts {
  runId: string;
  /** sha256 of the record's sealed fields (`sealedRecordHash`). */
  record: string;
  /** sha256 of the saved change file's bytes. */
  change: string;
  /** sha256 of the patch file's bytes. */
  patch: string;
}

const SHA256 = /^[0-9a-f]{64}$/;

const sealSchema = z.strictObject({
  version: z.literal(1),
  runId: z.string().max(200),
  record: z.string().regex(SHA256),
  change: z.string().regex(SHA256),
  patch: z.string().regex(SHA256),
  mac: z.string().regex(SHA256),
});

function macOf(facts: SealedFacts, key: Buffer): string {
  const { runId, record, change, patch } = facts;
  return createHmac('sha256', key)
    .update(canonicalJson({ version: 1, runId, record, change, patch }))
    .digest('hex');
}

/** The seal file's text for `facts`. */
export function sealText(facts: SealedFacts, key: Buffer): string {
  return `${JSON.stringify({ version: 1, ...facts, mac: macOf(facts, key) }, null, 2)}\n`;
}

/**
 * Why the seal `text` does not vouch for `facts` with `key`, or undefined when it does. The
 * seal's own signature is checked first; then each fact, so the problem names what was edited.
 */
export function sealProblem(text: string | undefined, facts: SealedFacts, key: Buffer): string | undefined {
  if (text === undefined) return `${SEAL_FILE} is missing: the run was not sealed when its tests passed`;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return `${SEAL_FILE} is not JSON`;
  }
  const parsed = sealSchema.safeParse(value);
  if (!parsed.success)
    return `${SEAL_FILE} is not a seal of this harness (${parsed.error.issues[0]?.message ?? 'invalid'})`;
  const seal = parsed.data;
  const expected = Buffer.from(macOf(seal, key), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(seal.mac, 'hex')))
    return `${SEAL_FILE} was edited, or made with another user's key (its signature does not match)`;
  if (seal.runId !== facts.runId) return `${SEAL_FILE} is the seal of another run (${seal.runId})`;
  if (seal.change !== facts.change)
    return 'the saved change (verified-change.json) was edited after verification';
  if (seal.patch !== facts.patch) return `${PATCH_FILE} was edited after verification`;
  if (seal.record !== facts.record)
    return `run.json was edited after verification (one of: ${SEALED_RECORD_FIELDS.join(', ')})`;
  return undefined;
}

/** `<state>/seal.key`: this user's sealing key. */
export function sealKeyFile(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(defaultStateDir(env), 'seal.key');
}

/**
 * The key in `file`, or undefined when there is none. A key that is not a regular file of
 * this user's, that others could change, or of the wrong size is refused (thrown): a seal
 * checked with a key someone else chose proves nothing.
 */
export async function readSealKey(file: string): Promise<Buffer | undefined> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`the sealing key ${file} cannot be read: ${(error as Error).message}`);
  }
  try {
    const info = await handle.stat();
    const owner = process.getuid?.();
    if (!info.isFile() || (owner !== undefined && info.uid !== owner) || (info.mode & 0o077) !== 0)
      throw new Error(`the sealing key ${file} is not a private file of this user's (mode 0600)`);
    const key = Buffer.alloc(KEY_BYTES + 1);
    const { bytesRead } = await handle.read(key, 0, key.length, 0);
    if (bytesRead !== KEY_BYTES) throw new Error(`the sealing key ${file} is not ${KEY_BYTES} bytes`);
    return key.subarray(0, KEY_BYTES);
  } finally {
    await handle.close();
  }
}

/** This user's key, made on first use (exclusively: two runs starting together get the same one). */
export async function ensureSealKey(file: string): Promise<Buffer> {
  const existing = await readSealKey(file);
  if (existing) return existing;
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(randomBytes(KEY_BYTES));
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    // link() never replaces: whoever links first made the key everyone uses.
    await link(temp, file).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
  } finally {
    await unlink(temp).catch(() => undefined);
  }
  const key = await readSealKey(file);
  if (!key) throw new Error(`the sealing key ${file} vanished while it was made`);
  return key;
}
