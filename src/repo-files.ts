/**
 * Reading a file that lives in a folder the host does not control: a repo's AGENTS.md,
 * `Dockerfile.sandbox` and `.dockerignore`, a ticket beside a catalog. Such a file must be a
 * regular file whose real path is inside that folder: `AGENTS.md -> ~/.aws/credentials`
 * would otherwise put a host secret in the prompt, and a Dockerfile link could carry a
 * host file into a build.
 *
 * A symlink whose target stays inside the folder is fine (`CLAUDE.md -> AGENTS.md` is
 * common); one that leaves it, at any step of the path, is refused with the link named.
 * The check is repeated on the opened file descriptor, so a link swapped in between the
 * check and the read is caught too. A file with several hard links is refused: one of its
 * other names may be outside the folder, and nothing on disk says which.
 *
 * Leaf module (like `errors.ts`): the catalog, the fix flow and the image builder all use
 * it, and none of them may import the others.
 */
import { constants } from 'node:fs';
import { lstat, open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type HarnessError } from './errors.js';

export interface ReadRepoFileOptions {
  /** How the folder is called in messages (default "the repo"). */
  rootName?: string;
  /** Builds the error thrown for a refused file (default: ConfigError). */
  error?: (message: string, hint: string) => HarnessError;
  /** Larger files are refused (default 4 MiB: these are instructions, not data). */
  maxBytes?: number;
  /** A missing file (or a missing folder on the way) gives undefined instead of an error. */
  optional?: boolean;
}

export const DEFAULT_REPO_FILE_MAX_BYTES = 4 * 1024 * 1024;

/** Lexically: `candidate` is `root` or below it (no link is looked at). */
export function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === '' || (!rel.startsWith(`..${path.sep}`) && rel !== '..' && !path.isAbsolute(rel));
}

function errnoCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * Reads `relativePath` inside `root`, refusing anything that is not a regular file whose
 * real path is inside `root`. `what` names the file in messages ("AGENTS.md", "ticket").
 */
export async function readRepoFile(
  root: string,
  relativePath: string,
  what: string,
  options: ReadRepoFileOptions & { optional: true },
): Promise<Buffer | undefined>;
export async function readRepoFile(
  root: string,
  relativePath: string,
  what: string,
  options?: ReadRepoFileOptions,
): Promise<Buffer>;
export async function readRepoFile(
  root: string,
  relativePath: string,
  what: string,
  options: ReadRepoFileOptions = {},
): Promise<Buffer | undefined> {
  const rootName = options.rootName ?? 'the repo';
  const absRoot = path.resolve(root);
  const abs = path.resolve(absRoot, relativePath);
  const rel = path.relative(absRoot, abs).split(path.sep).join('/');
  const label = what === rel ? rel : `${what} ${rel}`;
  /** `about` is the step of the path the problem is with, when it is not the file itself. */
  const fail = (problem: string, hint: string, about = rel): HarnessError => {
    const message = about === rel ? `${label} ${problem}` : `${label}: ${about} ${problem}`;
    return options.error ? options.error(message, hint) : new ConfigError(message, [], { hint });
  };
  const missing = (): HarnessError =>
    fail(`does not exist (looked at ${abs})`, `Create ${rel} in ${rootName}, or check the name.`);
  const outsideHint = `The harness only reads files inside ${rootName} (${absRoot}). Replace the link with a copy of the file if you meant it, or remove it.`;

  if (rel === '' || !isInside(absRoot, abs)) {
    throw fail(`is outside ${rootName} (${absRoot})`, outsideHint);
  }
  const realRoot = await realpath(absRoot).catch(() => {
    throw fail(`cannot be read: ${rootName} ${absRoot} does not exist`, 'Check the path.');
  });

  // Every step of the path, so the message can name the link that leaves the folder.
  const parts = rel.split('/');
  for (let i = 0; i < parts.length; i++) {
    const stepRel = parts.slice(0, i + 1).join('/');
    const step = path.join(absRoot, ...parts.slice(0, i + 1));
    const st = await lstat(step).catch((error: unknown) => {
      if (errnoCode(error) === 'ENOENT' || errnoCode(error) === 'ENOTDIR') return undefined;
      throw fail(`cannot be read: ${(error as Error).message}`, 'Check the permissions of the file.');
    });
    if (!st) {
      if (options.optional) return undefined;
      throw missing();
    }
    if (st.isSymbolicLink()) {
      const target = await readlink(step);
      const lexical = path.resolve(path.dirname(step), target);
      const real = await realpath(step).catch(() => undefined);
      // A dangling link is judged by where it points; one that points inside is just missing.
      if (real === undefined ? !isInside(absRoot, lexical) : !isInside(realRoot, real)) {
        const via = real !== undefined && real !== lexical ? `, which resolves to ${real}` : '';
        throw fail(`is a symlink to ${target}${via}, outside ${rootName} (${absRoot})`, outsideHint, stepRel);
      }
      if (real === undefined) {
        if (options.optional) return undefined;
        throw fail(`is a symlink to ${target}, which does not exist`, `Fix or remove the link.`, stepRel);
      }
    } else if (i < parts.length - 1 && !st.isDirectory()) {
      if (options.optional) return undefined;
      throw fail('is not a folder', 'Check the path.', stepRel);
    }
  }

  const real = await realpath(abs).catch(() => undefined);
  if (real === undefined) {
    if (options.optional) return undefined;
    throw missing();
  }
  if (!isInside(realRoot, real)) {
    throw fail(`resolves to ${real}, outside ${rootName} (${absRoot})`, outsideHint);
  }

  let handle: FileHandle;
  try {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
    handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (errnoCode(error) === 'ELOOP') throw fail(`changed into a symlink while it was read`, outsideHint);
    if (errnoCode(error) === 'ENOENT' && options.optional) return undefined;
    throw fail(`cannot be read: ${(error as Error).message}`, 'Check the permissions of the file.');
  }
  try {
    const st = await handle.stat();
    if (st.isDirectory()) throw fail('is a folder, not a file', `Point at a file inside ${rel}.`);
    if (!st.isFile())
      throw fail('is not a regular file (a device, socket or pipe)', 'Replace it with a file.');
    if (st.nlink > 1) {
      throw fail(
        `has ${st.nlink} hard links; another name of the same file may be outside ${rootName}, so it is not read`,
        `Replace it with a copy of its own (\`cp --remove-destination ${rel} ${rel}.tmp && mv ${rel}.tmp ${rel}\`).`,
      );
    }
    // What was opened, not what the path says now: a component swapped for a link between
    // the checks above and open() shows here.
    const opened = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
    if (opened !== undefined && !isInside(realRoot, opened)) {
      throw fail(`resolves to ${opened}, outside ${rootName} (${absRoot})`, outsideHint);
    }
    const maxBytes = options.maxBytes ?? DEFAULT_REPO_FILE_MAX_BYTES;
    if (st.size > maxBytes) {
      throw fail(`is ${st.size} bytes, more than the ${maxBytes} read from such a file`, 'Make it smaller.');
    }
    const buffer = Buffer.alloc(Math.min(st.size, maxBytes) + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > maxBytes) {
      throw fail(`grew past ${maxBytes} bytes while it was read`, 'Make it smaller.');
    }
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}
