/**
 * The build context of a repo image: which repo files go into the image, a content hash
 * that names the image (so an unchanged repo is never rebuilt), the pristine snapshot the
 * fix loop compares against, and the tar stream sent to the daemon.
 *
 * The walk never follows a symlink on the host, so nothing outside the repo can leak into
 * an image through a link. Secrets are excluded whatever `.dockerignore` says.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readFile, readdir, readlink, realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { once } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import dockerignore from '@balena/dockerignore';
import tar from 'tar-stream';
import { ImageError } from '../../errors.js';

type TarHeader = Parameters<tar.Pack['entry']>[0];

/** Name under which a Dockerfile that lives outside the context is added to the tar. */
export const INJECTED_DOCKERFILE = '.sandbox-harness.Dockerfile';

/**
 * Excluded from every context, whatever `.dockerignore` says. Matched against each path
 * segment (basename), at any depth; `dirOnly` rules only match folders.
 */
export const SECRET_EXCLUDES: ReadonlyArray<{
  pattern: string;
  test: (name: string) => boolean;
  dirOnly: boolean;
}> = [
  { pattern: '.git', test: (n) => n === '.git', dirOnly: false },
  { pattern: '.env*', test: (n) => n.startsWith('.env'), dirOnly: false },
  { pattern: '*.pem', test: (n) => n.endsWith('.pem'), dirOnly: false },
  { pattern: '*.key', test: (n) => n.endsWith('.key'), dirOnly: false },
  { pattern: '.npmrc', test: (n) => n === '.npmrc', dirOnly: false },
  { pattern: '.netrc', test: (n) => n === '.netrc', dirOnly: false },
  { pattern: '.pypirc', test: (n) => n === '.pypirc', dirOnly: false },
  { pattern: '.git-credentials', test: (n) => n === '.git-credentials', dirOnly: false },
  { pattern: '.aws/', test: (n) => n === '.aws', dirOnly: true },
  { pattern: '.ssh/', test: (n) => n === '.ssh', dirOnly: true },
  { pattern: '.gnupg/', test: (n) => n === '.gnupg', dirOnly: true },
  { pattern: '.sandbox-harness/', test: (n) => n === '.sandbox-harness', dirOnly: true },
];

/**
 * Tar entries get this mtime so the same files always give the same bytes (and the
 * daemon's layer cache sees nothing new).
 */
const FIXED_MTIME = new Date('2020-01-01T00:00:00Z');

export interface SnapshotEntry {
  /** sha256 (hex) of the file's bytes; for a symlink, of its target string. */
  sha256: string;
  /** Permission bits as put in the tar (mode & 0o777). */
  mode: number;
  /** Bytes; for a symlink, the length of its target string. */
  size: number;
  type: 'file' | 'symlink';
  /** Only for symlinks: the target, as stored (always relative, always inside the repo). */
  linkTarget?: string;
}
// One known difference between host and image: when the Dockerfile is injected and the repo
// has a `.dockerignore`, the image's copy gains one line naming the injected Dockerfile
// (what `docker build -f` does too); the snapshot keeps the repo's bytes.

/** Repo-relative posix path -> what the image holds at /workspace/<path>. */
export type ContextSnapshot = Map<string, SnapshotEntry>;

export interface SkippedPath {
  path: string;
  reason: string;
}

export interface BuildContextOptions {
  /** The repo (context root). */
  contextDir: string;
  /** The Dockerfile to build with; may live inside or outside the context. */
  dockerfile: string;
  buildArgs?: Record<string, string>;
  /** More exclusions, in `.dockerignore` syntax, applied on top of the repo's own. */
  extraExcludes?: string[];
  /** Anything else the image depends on (e.g. the base image id); part of the hash only. */
  hashInputs?: Record<string, string>;
  onWarning?: (message: string) => void;
}

export interface BuildContext {
  contextDir: string;
  /** Path of the Dockerfile inside the tar (what the build API's `dockerfile` gets). */
  dockerfileInContext: string;
  dockerfileBytes: Buffer;
  snapshot: ContextSnapshot;
  /** Directories that go into the tar (repo-relative, posix), sorted. */
  directories: string[];
  /** sha256 over the Dockerfile, the sorted context entries, build args and hash inputs. */
  contentHash: string;
  /** Paths left out, and why (secrets are listed; `.dockerignore`d paths are not). */
  skipped: SkippedPath[];
  warnings: string[];
  /**
   * Streams the context as a tar. Files are re-hashed while they stream: a file that
   * changed since the scan fails the stream (and `done`) instead of building an image
   * whose name no longer matches its content.
   */
  createTar(): { stream: Readable; done: Promise<void> };
}

interface FileRecord {
  rel: string;
  abs: string;
  entry: SnapshotEntry;
}

function secretReason(name: string, isDir: boolean): string | undefined {
  for (const rule of SECRET_EXCLUDES) {
    if (rule.dirOnly && !isDir) continue;
    if (rule.test(name)) return `secret-like path (${rule.pattern}), never put in an image`;
  }
  return undefined;
}

function toPosix(p: string): string {
  return sep === '/' ? p : p.split(sep).join('/');
}

function isInside(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

const HASH_CONCURRENCY = 16;
/** Below this, one readFile is much cheaper than a stream; above, memory stays bounded. */
const SMALL_FILE_BYTES = 1024 * 1024;

async function forEachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

async function hashFile(abs: string): Promise<{ sha256: string; size: number }> {
  const st = await lstat(abs);
  if (st.size <= SMALL_FILE_BYTES) {
    const data = await readFile(abs);
    return { sha256: sha256(data), size: data.length };
  }
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(abs)) {
    const buf = chunk as Buffer;
    size += buf.length;
    hash.update(buf);
  }
  return { sha256: hash.digest('hex'), size };
}

function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Compares like Go's string sort, so the order never depends on locale. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

export function computeContentHash(input: {
  dockerfileBytes: Buffer;
  snapshot: ContextSnapshot;
  directories: string[];
  buildArgs?: Record<string, string>;
  hashInputs?: Record<string, string>;
}): string {
  const hash = createHash('sha256');
  // NUL cannot occur in paths, hex or environment values, so fields cannot run together.
  hash.update('sandbox-harness-context-v1\n');
  hash.update(`dockerfile\0${sha256(input.dockerfileBytes)}\n`);
  for (const path of [...input.snapshot.keys()].sort(byteOrder)) {
    const e = input.snapshot.get(path);
    if (!e) continue;
    hash.update(`${e.type}\0${path}\0${e.mode.toString(8)}\0${e.sha256}\n`);
  }
  for (const dir of [...input.directories].sort(byteOrder)) hash.update(`dir\0${dir}\n`);
  for (const [key, value] of Object.entries(input.buildArgs ?? {}).sort(([a], [b]) => byteOrder(a, b))) {
    hash.update(`arg\0${key}\0${value}\n`);
  }
  for (const [key, value] of Object.entries(input.hashInputs ?? {}).sort(([a], [b]) => byteOrder(a, b))) {
    hash.update(`input\0${key}\0${value}\n`);
  }
  return hash.digest('hex');
}

/** Scans the repo: what goes in, what stays out, and the content hash. Reads every file once. */
export async function scanBuildContext(options: BuildContextOptions): Promise<BuildContext> {
  const contextDir = resolve(options.contextDir);
  const contextStat = await lstat(contextDir).catch(() => undefined);
  if (!contextStat?.isDirectory()) {
    throw new ImageError(`build context ${contextDir} is not a directory`, {
      hint: 'Point the harness at the repo folder (the one that holds its source and lockfile).',
    });
  }
  const realContext = await realpath(contextDir);
  const warnings: string[] = [];
  const warn = (message: string) => {
    warnings.push(message);
    options.onWarning?.(message);
  };
  const skipped: SkippedPath[] = [];

  const dockerignorePath = join(contextDir, '.dockerignore');
  const dockerignoreStat = await lstat(dockerignorePath).catch(() => undefined);
  const dockerignoreText = dockerignoreStat?.isFile() ? await readFile(dockerignorePath, 'utf8') : undefined;
  // Docker on Linux matches case-sensitively; the library defaults to ignoring case.
  const rules = dockerignore.default({ ignorecase: false });
  if (dockerignoreText !== undefined) rules.add(dockerignoreText);
  if (options.extraExcludes?.length) rules.add(options.extraExcludes);
  const patterns = [...(dockerignoreText ?? '').split(/\r?\n/), ...(options.extraExcludes ?? [])];
  // Like Docker: an excluded folder is only walked when some `!` rule might re-include a file inside it.
  const hasExceptions = patterns.some((p) => p.trim().startsWith('!'));

  const dockerfile = resolve(contextDir, options.dockerfile);
  const dockerfileStat = await lstat(dockerfile).catch(() => undefined);
  if (!dockerfileStat) {
    throw new ImageError(`Dockerfile ${dockerfile} does not exist`, {
      hint: "Add a Dockerfile.sandbox to the repo, or point the catalog's sandbox.dockerfile at an existing file.",
    });
  }
  const dockerfileBytes = await readFile(dockerfile).catch((error: unknown) => {
    throw new ImageError(`cannot read Dockerfile ${dockerfile}: ${(error as Error).message}`, {
      cause: error,
    });
  });
  const dockerfileRel = toPosix(relative(contextDir, dockerfile));

  const files: FileRecord[] = [];
  const dirModes = new Map<string, number>();

  const walk = async (dirAbs: string, dirRel: string): Promise<void> => {
    const entries = await readdir(dirAbs, { withFileTypes: true });
    entries.sort((a, b) => byteOrder(a.name, b.name));
    // Stat a whole folder at once; the loop below still visits entries in sorted order.
    const stats = await Promise.all(entries.map((dirent) => lstat(join(dirAbs, dirent.name))));
    for (const [index, dirent] of entries.entries()) {
      const rel = dirRel === '' ? dirent.name : `${dirRel}/${dirent.name}`;
      const abs = join(dirAbs, dirent.name);
      const st = stats[index];
      if (!st) continue;
      const secret = secretReason(dirent.name, st.isDirectory());
      if (secret) {
        skipped.push({ path: rel, reason: secret });
        continue;
      }
      const ignored = rules.ignores(rel);
      if (st.isDirectory()) {
        if (ignored && !hasExceptions) continue;
        if (!ignored) dirModes.set(rel, st.mode & 0o777);
        await walk(abs, rel);
        continue;
      }
      if (ignored) continue;
      if (st.isFile()) {
        // Hashed after the walk, many at a time.
        files.push({ rel, abs, entry: { sha256: '', mode: st.mode & 0o777, size: st.size, type: 'file' } });
      } else if (st.isSymbolicLink()) {
        const target = await readlink(abs);
        const reason = await symlinkProblem(contextDir, realContext, abs, target);
        if (reason) {
          warn(`skipped symlink ${rel} -> ${target}: ${reason}`);
          skipped.push({ path: rel, reason: `symlink ${reason}` });
          continue;
        }
        files.push({
          rel,
          abs,
          entry: {
            sha256: sha256(target),
            mode: 0o777,
            size: Buffer.byteLength(target),
            type: 'symlink',
            linkTarget: target,
          },
        });
      } else {
        warn(`skipped ${rel}: not a regular file, folder or symlink`);
        skipped.push({ path: rel, reason: 'not a regular file, folder or symlink' });
      }
    }
  };
  await walk(contextDir, '');
  await forEachLimited(
    files.filter((f) => f.entry.type === 'file'),
    HASH_CONCURRENCY,
    async (file) => {
      const { sha256: digest, size } = await hashFile(file.abs);
      file.entry.sha256 = digest;
      file.entry.size = size;
    },
  );

  const snapshot: ContextSnapshot = new Map(files.map((f) => [f.rel, f.entry]));
  const directories = [...dirModes.keys()];
  // The daemon reads the Dockerfile from inside the tar. One that is outside the context,
  // a symlink, or excluded from it is added under a name of its own.
  const dockerfileInside = isInside(contextDir, dockerfile) && snapshot.get(dockerfileRel)?.type === 'file';
  const contentHash = computeContentHash({
    dockerfileBytes,
    snapshot,
    directories,
    buildArgs: options.buildArgs,
    hashInputs: options.hashInputs,
  });
  const dockerfileInContext = dockerfileInside ? dockerfileRel : INJECTED_DOCKERFILE;
  // When the Dockerfile is injected, `.dockerignore` is extended the way `docker build -f`
  // does it: the daemon drops files its `.dockerignore` matches after reading the
  // Dockerfile, so neither the injected file nor a synthetic `.dockerignore` reach the image.
  const tarDockerignore = dockerfileInside
    ? undefined
    : Buffer.from(
        dockerignoreText !== undefined
          ? `${dockerignoreText}\n${INJECTED_DOCKERFILE}\n`
          : `.dockerignore\n${INJECTED_DOCKERFILE}\n`,
      );

  const createTar = (): { stream: Readable; done: Promise<void> } => {
    const pack = tar.pack();
    const out = new PassThrough();
    const header = { uid: 0, gid: 0, uname: '', gname: '', mtime: FIXED_MTIME };
    const write = async () => {
      for (const [dir, mode] of dirModes) {
        await entryDone(pack, { ...header, name: dir, type: 'directory', mode });
      }
      for (const file of files) {
        if (tarDockerignore && file.rel === '.dockerignore') continue;
        if (file.entry.type === 'symlink') {
          await entryDone(pack, {
            ...header,
            name: file.rel,
            type: 'symlink',
            linkname: file.entry.linkTarget,
            mode: 0o777,
          });
          continue;
        }
        await streamFile(pack, { ...header, name: file.rel, type: 'file', mode: file.entry.mode }, file);
      }
      if (!dockerfileInside) {
        await entryDone(
          pack,
          { ...header, name: dockerfileInContext, type: 'file', mode: 0o644, size: dockerfileBytes.length },
          dockerfileBytes,
        );
      }
      if (tarDockerignore) {
        await entryDone(
          pack,
          { ...header, name: '.dockerignore', type: 'file', mode: 0o644, size: tarDockerignore.length },
          tarDockerignore,
        );
      }
      pack.finalize();
    };
    const done = new Promise<void>((resolvePromise, reject) => {
      pack.on('error', reject);
      pack.on('end', () => resolvePromise());
      write().catch((error: unknown) => {
        reject(error);
        pack.destroy(error as Error);
        out.destroy(error as Error);
      });
    });
    // Readers see the failure through the stream (docker-modem aborts the upload on it) and
    // `done` carries the precise reason; neither being observed must not crash the process.
    done.catch(() => undefined);
    out.on('error', () => undefined);
    pack.pipe(out);
    return { stream: out, done };
  };

  return {
    contextDir,
    dockerfileInContext,
    dockerfileBytes,
    snapshot,
    directories,
    contentHash,
    skipped,
    warnings,
    createTar,
  };
}

/** Why a symlink may not go into the image, or undefined when it may. */
async function symlinkProblem(
  contextDir: string,
  realContext: string,
  linkAbs: string,
  target: string,
): Promise<string | undefined> {
  if (isAbsolute(target)) return 'has an absolute target, which would not resolve inside the container';
  const lexical = resolve(linkAbs, '..', target);
  if (!isInside(contextDir, lexical)) return 'points outside the repo';
  // Lexically inside is not enough: `a -> b/..` escapes when b is itself a link to `.`.
  const real = await realpath(linkAbs).catch(() => undefined);
  if (real !== undefined && !isInside(realContext, real)) return 'resolves outside the repo';
  return undefined;
}

function entryDone(pack: tar.Pack, header: TarHeader, content?: Buffer): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const callback = (error?: Error | null) => (error ? reject(error) : resolvePromise());
    if (content) pack.entry(header, content, callback);
    else pack.entry(header, callback);
  });
}

/**
 * Copies one file into the tar, re-hashing it on the way. Written by hand rather than with
 * `pipeline`: tar-stream's entry streams are streamx streams, not Node streams.
 */
async function streamFile(pack: tar.Pack, header: TarHeader, file: FileRecord): Promise<void> {
  const changed = (cause?: unknown) =>
    new ImageError(`${file.rel} changed while the image was being built; run again`, { cause });
  let settle!: (error?: Error | null) => void;
  const finished = new Promise<void>((resolveDone, reject) => {
    settle = (error) => (error ? reject(changed(error)) : resolveDone());
  });
  // Observed below on success; on failure the thrown error is the one that matters.
  finished.catch(() => undefined);
  const sink = pack.entry({ ...header, size: file.entry.size }, (error) => settle(error));
  // Errors reach us through the entry callback; the event would otherwise be uncaught.
  sink.on('error', () => undefined);
  const hash = createHash('sha256');
  let size = 0;
  try {
    for await (const chunk of createReadStream(file.abs)) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > file.entry.size) throw changed();
      hash.update(buf);
      if (!sink.write(buf)) await once(sink, 'drain');
    }
  } catch (error) {
    // The caller destroys the whole pack; the half-written entry goes with it.
    throw error instanceof ImageError ? error : changed(error);
  }
  if (size !== file.entry.size || hash.digest('hex') !== file.entry.sha256) throw changed();
  sink.end(undefined);
  await finished;
}
