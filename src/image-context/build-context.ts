/**
 * The build context of a repo image: which repo files go into the image, a content hash
 * that names the image (so an unchanged repo is never rebuilt), the pristine snapshot the
 * fix loop compares against, and the tar stream sent to the daemon.
 *
 * What goes in: in a git work tree, what git lists (tracked files and untracked ones no
 * ignore rule matches) plus dependency folders (`node_modules`, `.venv`) even when ignored;
 * outside git, every file. Then, always: minus `.dockerignore` and the caller's excludes,
 * minus secret-like names (`secrets.ts`), and the build is refused when a file that would go
 * in contains a private key or a well-known token. The walk never follows a symlink on the
 * host, so nothing outside the repo can leak into an image through a link.
 */
import { createHash } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { lstat, open, readdir, readlink, realpath } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { once } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import dockerignore from '@balena/dockerignore';
import pLimit from 'p-limit';
import tar from 'tar-stream';
import { BuildRefused, ImageError } from '../errors.js';
import { readRepoFile } from '../repo-files.js';
import { cacheDir } from './cache-dir.js';
import { gitListing } from './git-files.js';
import {
  CleanDigestCache,
  SECRET_RULES_VERSION,
  SecretScanner,
  scanForSecrets,
  secretNameReason,
  type SecretHit,
} from './secrets.js';

type TarHeader = Parameters<tar.Pack['entry']>[0];

/** Name under which a Dockerfile that lives outside the context is added to the tar. */
export const INJECTED_DOCKERFILE = '.sandbox-harness.Dockerfile';

/**
 * Installed dependencies: part of the context even when git ignores them, so a repo whose
 * dependencies were installed on the host builds without network.
 */
export const DEPENDENCY_DIRS: ReadonlySet<string> = new Set(['node_modules', '.venv']);

/** Bumped whenever the rules for what enters a context change: old images are not reused. */
const CONTEXT_HASH_VERSION = 'sandbox-harness-context-v2';

/** How many secret hits an error lists before it only counts the rest. */
const MAX_LISTED_HITS = 30;

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
  /**
   * The Dockerfile to build with, absolute or relative to `dockerfileRoot` (else to the
   * context); may live inside or outside the context.
   */
  dockerfile: string;
  /**
   * The folder the Dockerfile must really be in: a regular file there, not a link out of it.
   * Default: the Dockerfile's own folder.
   */
  dockerfileRoot?: string;
  buildArgs?: Record<string, string>;
  /** More exclusions, in `.dockerignore` syntax, applied on top of the repo's own. */
  extraExcludes?: string[];
  /** Anything else the image depends on (e.g. the base image id); part of the hash only. */
  hashInputs?: Record<string, string>;
  /**
   * Refuse the context when a file that would go in holds a private key or a well-known
   * token (default true). Off only where nothing is built from it.
   */
  secretScan?: boolean;
  /**
   * Where digests of files found clean are remembered between scans (default: a file in the
   * harness's cache folder); false: scan every file every time.
   */
  secretScanCache?: string | false;
  /** Use git's list of files when the context is in a git work tree (default true). */
  useGit?: boolean;
  onWarning?: (message: string) => void;
}

/** Where a secret was found; never the secret itself. */
export interface SecretFinding extends SecretHit {
  /** Repo-relative path (or the Dockerfile's name). */
  path: string;
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
  /** Paths left out, and why (secrets are listed; `.dockerignore`d and git-ignored paths are not). */
  skipped: SkippedPath[];
  /** What decided the list of files: git's view of the work tree, or the folder as it is. */
  fileSource: 'git' | 'folder';
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
  /** Inside `node_modules` or `.venv`: scanned for the strict token formats only. */
  dependencies: boolean;
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
  const run = pLimit(limit);
  await Promise.all(items.map((item) => run(() => fn(item))));
}

/** Never through a link (a file swapped for one since the walk), never waiting on a FIFO. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const CHUNK_BYTES = 1024 * 1024;

/**
 * Reads a file in chunks; small files come back whole (one read, which the secret scan
 * shares with the hash).
 */
async function readFileOnce(
  file: FileRecord,
  onChunk: (chunk: Buffer) => void,
): Promise<{ sha256: string; size: number; data?: Buffer }> {
  const changed = (cause?: unknown) =>
    new ImageError(`${file.rel} changed while the build context was read; run again`, { cause });
  const handle = await open(file.abs, READ_FLAGS).catch((error: unknown) => {
    throw changed(error);
  });
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw changed();
    if (st.size <= SMALL_FILE_BYTES) {
      const data = await handle.readFile();
      return { sha256: sha256(data), size: data.length, data };
    }
    const hash = createHash('sha256');
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, size);
      if (bytesRead === 0) break;
      const chunk = buffer.subarray(0, bytesRead);
      hash.update(chunk);
      onChunk(chunk);
      size += bytesRead;
    }
    return { sha256: hash.digest('hex'), size };
  } finally {
    await handle.close();
  }
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
  buildArgs?: Record<string, string> | undefined;
  hashInputs?: Record<string, string> | undefined;
}): string {
  const hash = createHash('sha256');
  // NUL cannot occur in paths, hex or environment values, so fields cannot run together.
  hash.update(`${CONTEXT_HASH_VERSION}\n`);
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

  const imageError = (message: string, hint: string) => new BuildRefused(message, { hint });
  const dockerignoreText = (
    await readRepoFile(contextDir, '.dockerignore', '.dockerignore', { optional: true, error: imageError })
  )?.toString('utf8');
  // Docker on Linux matches case-sensitively; the library defaults to ignoring case.
  const rules = dockerignore.default({ ignorecase: false });
  if (dockerignoreText !== undefined) rules.add(dockerignoreText);
  if (options.extraExcludes?.length) rules.add(options.extraExcludes);
  const patterns = [...(dockerignoreText ?? '').split(/\r?\n/), ...(options.extraExcludes ?? [])];
  // Like Docker: an excluded folder is only walked when some `!` rule might re-include a file inside it.
  const hasExceptions = patterns.some((p) => p.trim().startsWith('!'));

  const dockerfile = resolve(options.dockerfileRoot ?? contextDir, options.dockerfile);
  const dockerfileRoot = resolve(options.dockerfileRoot ?? dirname(dockerfile));
  const dockerfileBytes = await readRepoFile(
    dockerfileRoot,
    relative(dockerfileRoot, dockerfile),
    'Dockerfile',
    {
      rootName: dockerfileRoot === contextDir ? 'the repo' : 'its folder',
      error: imageError,
    },
  );
  const dockerfileRel = toPosix(relative(contextDir, dockerfile));

  const git = options.useGit === false ? undefined : await gitListing(contextDir);
  if (git?.kind === 'none' && !git.reason.startsWith('not inside')) {
    warn(`build context of ${contextDir}: ${git.reason}; every file not excluded otherwise goes in`);
  }
  const listed = git?.kind === 'git' ? git : undefined;
  /** Folders on the way to something git lists: only these are walked in a git work tree. */
  const listedDirs = new Set<string>();
  for (const path of listed ? [...listed.files, ...listed.wholeDirs] : []) {
    for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) listedDirs.add(path.slice(0, i));
  }

  const files: FileRecord[] = [];
  const dirModes = new Map<string, number>();

  /**
   * `filtered`: only what git lists goes in (false outside git, and inside folders that go
   * in whole: dependency folders, nested repositories). `dependencies`: inside one.
   */
  const walk = async (
    dirAbs: string,
    dirRel: string,
    filtered: boolean,
    dependencies: boolean,
  ): Promise<void> => {
    const entries = await readdir(dirAbs, { withFileTypes: true });
    entries.sort((a, b) => byteOrder(a.name, b.name));
    // Stat a whole folder at once; the loop below still visits entries in sorted order.
    const stats = await Promise.all(entries.map((dirent) => lstat(join(dirAbs, dirent.name))));
    for (const [index, dirent] of entries.entries()) {
      const rel = dirRel === '' ? dirent.name : `${dirRel}/${dirent.name}`;
      const abs = join(dirAbs, dirent.name);
      const st = stats[index];
      if (!st) continue;
      const secret = secretNameReason(dirent.name, st.isDirectory(), dirRel);
      if (secret) {
        skipped.push({ path: rel, reason: secret });
        continue;
      }
      const ignored = rules.ignores(rel);
      if (st.isDirectory()) {
        const dependency = DEPENDENCY_DIRS.has(dirent.name);
        const whole = !filtered || dependency || listed?.wholeDirs.has(rel) || listed?.files.has(rel);
        if (!whole && !listedDirs.has(rel)) continue;
        if (ignored && !hasExceptions) continue;
        if (!ignored) dirModes.set(rel, st.mode & 0o777);
        await walk(abs, rel, !whole, dependencies || dependency);
        continue;
      }
      if (ignored || (filtered && !listed?.files.has(rel))) continue;
      if (st.isFile()) {
        // Hashed after the walk, many at a time.
        files.push({
          rel,
          abs,
          entry: { sha256: '', mode: st.mode & 0o777, size: st.size, type: 'file' },
          dependencies,
        });
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
          dependencies,
        });
      } else {
        warn(`skipped ${rel}: not a regular file, folder or symlink`);
        skipped.push({ path: rel, reason: 'not a regular file, folder or symlink' });
      }
    }
  };
  await walk(contextDir, '', listed !== undefined, false);

  const scan = options.secretScan !== false;
  const cache = await CleanDigestCache.open(
    !scan || options.secretScanCache === false
      ? undefined
      : (options.secretScanCache ?? join(cacheDir(), 'secret-scan', `clean-${SECRET_RULES_VERSION}.txt`)),
  );
  const findings: SecretFinding[] = [];
  const found = (path: string, hits: SecretHit[]) => {
    for (const hit of hits) findings.push({ path, ...hit });
  };
  // Its ENV, LABEL and ARG lines end up in the image's config, whether or not it is in the context.
  const dockerfileIsAFile = files.some((f) => f.rel === dockerfileRel && f.entry.type === 'file');
  if (scan && !dockerfileIsAFile) found(dockerfile, scanForSecrets(dockerfileBytes));
  await forEachLimited(
    files.filter((f) => f.entry.type === 'file'),
    HASH_CONCURRENCY,
    async (file) => {
      const { sha256: digest, size, data } = await readFileOnce(file, () => undefined);
      file.entry.sha256 = digest;
      file.entry.size = size;
      if (!scan || cache.has(digest, file.dependencies)) return;
      // A large file is read a second time, but only the first time its content is seen.
      const hits = data ? scanForSecrets(data, file.dependencies) : await scanLargeFile(file);
      if (hits.length === 0) cache.add(digest, file.dependencies);
      else found(file.rel, hits);
    },
  );
  await cache.save();
  if (findings.length > 0) throw secretsError(contextDir, findings);

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
            linkname: file.entry.linkTarget ?? '', // every symlink entry is made with its target
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
    fileSource: listed ? 'git' : 'folder',
    warnings,
    createTar,
  };
}

async function scanLargeFile(file: FileRecord): Promise<SecretHit[]> {
  const scanner = new SecretScanner(file.dependencies);
  await readFileOnce(file, (chunk) => scanner.push(chunk));
  return scanner.hits;
}

function secretsError(contextDir: string, findings: SecretFinding[]): BuildRefused {
  findings.sort((a, b) => byteOrder(a.path, b.path) || a.line - b.line);
  const listed = findings.slice(0, MAX_LISTED_HITS).map((f) => `  ${f.path}:${f.line}: ${f.what}`);
  const more = findings.length - listed.length;
  return new BuildRefused(
    [
      `refusing to build: ${findings.length === 1 ? 'a file' : 'files'} in ${contextDir} would put what looks like a credential in the image, where the agent (and so the model) can read it:`,
      ...listed,
      ...(more > 0 ? [`  ... and ${more} more`] : []),
    ].join('\n'),
    {
      hint:
        "Keep these files out of the image: list them in the repo's .dockerignore, or in the catalog's " +
        'sandbox.build.exclude (globs, .dockerignore syntax). A test fixture that only looks like a key ' +
        'can be excluded the same way, or use an obviously fake value (one with "EXAMPLE" in it).',
      details: { findings },
    },
  );
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
