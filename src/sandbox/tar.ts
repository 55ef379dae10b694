/**
 * Tar archives to and from sandboxes, for every backend. Writing: ownership and modes are
 * set in the tar headers, because with every capability dropped nothing inside a sandbox
 * may chown. Reading: an archive produced from inside a sandbox is hostile data, so only
 * regular files and directories pass, names are confined to the requested path, sizes are
 * capped, and every refusal carries a typed kind and a reason.
 */
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import tar from 'tar-stream';
import { ImageError } from '../errors.js';
import { SANDBOX_GID, SANDBOX_UID, type EntryType, type RefusalKind } from './types.js';

export interface TarInput {
  /** Path inside the archive (relative, posix). */
  name: string;
  type: 'file' | 'directory';
  content?: Buffer;
  mode: number;
  owner: 'sandbox' | 'root';
}

const FIXED_MTIME = new Date(0);

export async function packTar(entries: TarInput[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pack.on('data', (chunk: unknown) => chunks.push(chunk as Buffer));
    pack.on('end', () => resolve(Buffer.concat(chunks)));
    pack.on('error', reject);
  });
  for (const entry of entries) {
    const uid = entry.owner === 'root' ? 0 : SANDBOX_UID;
    const gid = entry.owner === 'root' ? 0 : SANDBOX_GID;
    const header = { name: entry.name, mode: entry.mode, uid, gid, mtime: FIXED_MTIME };
    if (entry.type === 'directory') {
      pack.entry({ ...header, type: 'directory' });
    } else {
      const content = entry.content ?? Buffer.alloc(0);
      pack.entry({ ...header, type: 'file', size: content.length }, content);
    }
  }
  pack.finalize();
  return done;
}

export interface ReadLimits {
  maxFileBytes: number;
  maxTotalBytes: number;
}

export interface SafeEntry {
  /** Archive name normalised: relative, posix, no `..`. */
  name: string;
  type: 'file' | 'directory';
  mode: number;
  content?: Buffer;
}

export interface SafeRefusal {
  name: string;
  kind: RefusalKind;
  reason: string;
}

const TYPE_NAMES: Record<string, { kind: RefusalKind; what: string }> = {
  symlink: { kind: 'symlink', what: 'a symbolic link' },
  link: { kind: 'hard-link', what: 'a hard link' },
  fifo: { kind: 'special-file', what: 'a named pipe (fifo)' },
  'character-device': { kind: 'special-file', what: 'a character device' },
  'block-device': { kind: 'special-file', what: 'a block device' },
  'contiguous-file': { kind: 'special-file', what: 'a contiguous file' },
};

/** Normalises an archive member name; undefined when it is absolute or escapes with `..`. */
export function safeMemberName(raw: string): string | undefined {
  if (raw.includes('\0')) return undefined;
  if (raw.startsWith('/') || raw.includes('\\')) return undefined;
  const parts = raw.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p === '..')) return undefined;
  return posix.join(...(parts.length > 0 ? parts : ['.']));
}

/**
 * Reads a tar stream defensively. Entry data beyond the caps is drained, never kept.
 * Returns accepted entries and refusals; never throws for hostile content, only for a
 * broken stream.
 */
export async function readTarSafely(
  stream: Readable,
  limits: ReadLimits,
): Promise<{ entries: SafeEntry[]; refused: SafeRefusal[] }> {
  const extract = tar.extract();
  const entries: SafeEntry[] = [];
  const refused: SafeRefusal[] = [];
  let total = 0;
  stream.pipe(extract);
  stream.on('error', (error) => extract.destroy(error));
  for await (const entry of extract) {
    const header = entry.header;
    const name = safeMemberName(header.name);
    const drain = async () => {
      for await (const _chunk of entry) {
        // discard
      }
    };
    if (name === undefined) {
      refused.push({
        name: header.name,
        kind: 'invalid-path',
        reason: 'an absolute name or a name with `..` escapes the workspace',
      });
      await drain();
      continue;
    }
    if (header.type === 'directory') {
      entries.push({ name, type: 'directory', mode: (header.mode ?? 0o755) & 0o7777 });
      await drain();
      continue;
    }
    if (header.type !== 'file') {
      const known = TYPE_NAMES[header.type ?? ''];
      const what = known?.what ?? `an entry of type ${header.type}`;
      const target = header.linkname ? ` (pointing to ${header.linkname})` : '';
      refused.push({
        name,
        kind: known?.kind ?? 'special-file',
        reason: `${what}${target} is not a regular file`,
      });
      await drain();
      continue;
    }
    const size = header.size ?? 0;
    if (size > limits.maxFileBytes) {
      refused.push({
        name,
        kind: 'too-large',
        reason: `${size} bytes is over the ${limits.maxFileBytes}-byte per-file cap`,
      });
      await drain();
      continue;
    }
    if (total + size > limits.maxTotalBytes) {
      refused.push({
        name,
        kind: 'over-total',
        reason: `reading it would pass the ${limits.maxTotalBytes}-byte total cap`,
      });
      await drain();
      continue;
    }
    const chunks: Buffer[] = [];
    let got = 0;
    for await (const chunk of entry) {
      got += (chunk as Buffer).length;
      // The header may lie about the size; the cap holds on what actually arrives.
      if (got <= limits.maxFileBytes) chunks.push(chunk as Buffer);
    }
    if (got > limits.maxFileBytes) {
      refused.push({
        name,
        kind: 'too-large',
        reason: `more data than its header declared, over the per-file cap`,
      });
      continue;
    }
    total += got;
    entries.push({
      name,
      type: 'file',
      mode: (header.mode ?? 0o644) & 0o7777,
      content: Buffer.concat(chunks),
    });
  }
  return { entries, refused };
}

/**
 * Reads a whole tree (the engine's archive of a pristine workspace) into entries with
 * types, modes, sizes and sha256, keeping no content: the host's own record of what an
 * image holds. Names are those of the archive relative to `root` (the archive's top folder).
 */
export async function readTarTree(
  stream: Readable,
  root: string,
): Promise<
  Map<string, { type: EntryType; mode: number; size: number; sha256?: string; linkTarget?: string }>
> {
  const extract = tar.extract();
  const out = new Map<
    string,
    { type: EntryType; mode: number; size: number; sha256?: string; linkTarget?: string }
  >();
  stream.pipe(extract);
  stream.on('error', (error) => extract.destroy(error));
  const hashes = new Map<string, string>();
  for await (const entry of extract) {
    const header = entry.header;
    const name = safeMemberName(header.name);
    const rel =
      name === undefined
        ? undefined
        : name === root
          ? ''
          : name.startsWith(`${root}/`)
            ? name.slice(root.length + 1)
            : undefined;
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of entry) {
      hash.update(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
    if (rel === '' && header.type !== 'directory') {
      throw new ImageError(`/${root} in the image is not a folder (a ${header.type ?? 'strange entry'})`);
    }
    if (rel === undefined || rel === '') continue;
    const mode = (header.mode ?? 0) & 0o7777;
    switch (header.type) {
      case 'file':
      case 'contiguous-file': {
        const digest = hash.digest('hex');
        hashes.set(name!, digest);
        out.set(rel, { type: 'file', mode, size, sha256: digest });
        break;
      }
      case 'link': {
        // A hard link inside the image: the same data as the entry it names.
        const target = header.linkname ? safeMemberName(header.linkname) : undefined;
        const digest = target === undefined ? undefined : hashes.get(target);
        const first = target === undefined ? undefined : out.get(target.slice(root.length + 1));
        out.set(rel, { type: 'file', mode, size: first?.size ?? 0, ...(digest ? { sha256: digest } : {}) });
        break;
      }
      case 'directory':
        out.set(rel, { type: 'directory', mode, size: 0 });
        break;
      case 'symlink':
        out.set(rel, { type: 'symlink', mode, size: 0, linkTarget: header.linkname ?? '' });
        break;
      default:
        out.set(rel, { type: 'other', mode, size: 0 });
    }
  }
  return out;
}
