/**
 * An in-memory `Sandbox` for fast unit tests. It models what the file-level contract talks
 * about (folders, symlinks, fifos, hard links, modes, root-owned entries) and passes the
 * same file-level conformance suite as Docker (`tests/sandbox-conformance/files.ts`), so it
 * cannot drift. `exec` is answered by a handler the test supplies (tests never pretend to
 * run a shell), but it honours what the contract says of every command: caps on output,
 * the timeout, the abort signal, cwd and env are passed on.
 */
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import {
  DiskBudgetExceeded,
  Interrupted,
  SandboxDead,
  SandboxFileError,
  UsageError,
  abortError,
} from '../../src/errors.js';
import { CappedOutput } from '../../src/sandbox/output.js';
import {
  DEFAULT_EXEC_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  WORKSPACE,
  type AttachRequest,
  type ChangeScan,
  type ChangeScanLimits,
  type EntryType,
  type ExecOptions,
  type ExecResult,
  type ExportLimits,
  type ExportResult,
  type FileEntry,
  type PathChange,
  type Sandbox,
  type SandboxBackend,
  type SandboxProcess,
  type SandboxSpec,
  type SpawnOptions,
  type SandboxState,
  type TreeEntry,
  type WorkspaceTree,
  type WriteFile,
} from '../../src/sandbox/types.js';
import { sha256 } from '../../src/changes/hash.js';

type Owner = 'sandbox' | 'root';

/** One entry of the fake filesystem. Files share `data` when hard-linked. */
export type MemoryNode =
  | { type: 'file'; data: { content: Buffer }; mode: number; owner: Owner }
  | { type: 'directory'; mode: number; owner: Owner }
  | { type: 'symlink'; target: string }
  | { type: 'fifo'; mode: number };

/** How a test describes an entry: text or bytes is a plain file. */
export type MemoryEntry =
  | string
  | Buffer
  | { type: 'file'; content: string | Buffer; mode?: number; owner?: Owner }
  | { type: 'directory'; owner?: Owner; mode?: number }
  | { type: 'symlink'; target: string }
  | { type: 'fifo' };

/**
 * Answers `spawn`: the test decides what the "process" is (a local child process running a
 * script, a scripted stream). The fake kills what it spawned when its processes die.
 */
export type SpawnHandler = (
  argv: readonly string[],
  options: SpawnOptions,
  sandbox: MemorySandbox,
) => SandboxProcess | Promise<SandboxProcess>;

export type ExecHandler = (
  command: string,
  options: ExecOptions,
  sandbox: MemorySandbox,
) => Partial<ExecResult> | Promise<Partial<ExecResult>>;

function fileNode(content: string | Buffer, mode = 0o644, owner: Owner = 'sandbox'): MemoryNode {
  return { type: 'file', data: { content: Buffer.from(content) }, mode, owner };
}

function toNode(entry: MemoryEntry): MemoryNode {
  if (typeof entry === 'string' || Buffer.isBuffer(entry)) return fileNode(entry);
  switch (entry.type) {
    case 'file':
      return fileNode(entry.content, entry.mode ?? 0o644, entry.owner ?? 'sandbox');
    case 'directory':
      return { type: 'directory', mode: entry.mode ?? 0o755, owner: entry.owner ?? 'sandbox' };
    case 'symlink':
      return { type: 'symlink', target: entry.target };
    case 'fifo':
      return { type: 'fifo', mode: 0o644 };
  }
}

function typeOf(node: MemoryNode): EntryType {
  return node.type === 'fifo' ? 'other' : node.type;
}

const byPath = <T extends { path: string }>(a: T, b: T) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

function relative(path: string): string {
  if (path === WORKSPACE || path === `${WORKSPACE}/` || path === '.' || path === '') return '';
  const rel = path.startsWith(`${WORKSPACE}/`) ? path.slice(WORKSPACE.length + 1) : path;
  if (
    rel.startsWith('/') ||
    rel.includes('\0') ||
    rel.split('/').some((s) => s === '' || s === '.' || s === '..')
  ) {
    throw new SandboxFileError(`${path}: not a plain path inside ${WORKSPACE}`, 'invalid-path');
  }
  return rel;
}

export class MemorySandbox implements Sandbox {
  readonly id: string;
  readonly image = 'memory:test';
  readonly labels: Record<string, string> = {};
  /** Workspace-relative path -> entry; folders are entries too. */
  readonly nodes = new Map<string, MemoryNode>();
  readonly commands: string[] = [];
  private readonly initial = new Map<string, MemoryNode>();
  /** Paths written since creation: a rewrite with the same bytes still changes the inode (ctime). */
  private readonly touched = new Set<string>();
  private alive = true;
  private diskExceeded: DiskBudgetExceeded | undefined;
  frozen = false;
  disposed: { keep: boolean } | undefined;
  /** What `spawn` runs; without one, `spawn` says the backend cannot. */
  onSpawn: SpawnHandler | undefined;
  /** The argv of every process spawned, in order. */
  readonly spawnedArgv: (readonly string[])[] = [];
  private readonly processes: SandboxProcess[] = [];

  constructor(
    initialFiles: Record<string, MemoryEntry> = {},
    private readonly onExec: ExecHandler = () => ({ exitCode: 0 }),
    id = randomBytes(32).toString('hex'),
    hidden: readonly string[] = [],
  ) {
    this.id = id;
    for (const [path, entry] of Object.entries(initialFiles)) {
      this.ensureFolders(path);
      this.nodes.set(path, toNode(entry));
    }
    for (const [path, node] of this.nodes) {
      // Hard links share `data`, so the snapshot keeps its own copy of the bytes.
      this.initial.set(
        path,
        node.type === 'file' ? { ...node, data: { content: Buffer.from(node.data.content) } } : { ...node },
      );
    }
    // Hidden before anything runs: as if they were never there.
    for (const path of hidden) {
      this.remove(path);
      for (const key of [...this.initial.keys()])
        if (key === path || key.startsWith(`${path}/`)) this.initial.delete(key);
    }
  }

  private ensureFolders(path: string): void {
    let folder = posix.dirname(path);
    const missing: string[] = [];
    while (folder !== '.' && !this.nodes.has(folder)) {
      missing.push(folder);
      folder = posix.dirname(folder);
    }
    for (const f of missing) this.nodes.set(f, { type: 'directory', mode: 0o755, owner: 'sandbox' });
  }

  private remove(path: string): void {
    for (const key of [...this.nodes.keys()])
      if (key === path || key.startsWith(`${path}/`)) this.nodes.delete(key);
  }

  // ---- what tests use to arrange a state ------------------------------------------------

  /** Text of a file (undefined when it is not a file). */
  text(path: string): string | undefined {
    const node = this.nodes.get(path);
    return node?.type === 'file' ? node.data.content.toString() : undefined;
  }

  /** Paths of the regular files, sorted. */
  filePaths(): string[] {
    return [...this.nodes.entries()]
      .filter(([, n]) => n.type === 'file')
      .map(([p]) => p)
      .sort();
  }

  set(path: string, entry: MemoryEntry): void {
    this.ensureFolders(path);
    this.remove(path);
    this.nodes.set(path, toNode(entry));
    this.touched.add(path);
  }

  /** A hard link: `path` shares the data of the file at `existing`. */
  link(existing: string, path: string): void {
    const node = this.nodes.get(existing);
    if (node?.type !== 'file') throw new Error(`${existing} is not a file`);
    this.ensureFolders(path);
    this.nodes.set(path, node);
  }

  delete(path: string): void {
    this.remove(path);
  }

  /** Every process dies (the agent ran `kill -1`); files stay. */
  kill(): void {
    this.alive = false;
    this.killProcesses();
  }

  private killProcesses(): void {
    for (const process of this.processes.splice(0)) void process.kill();
  }

  /** The watchdog's verdict: over the disk budget, stopped. */
  exceedDisk(used: number, budget: number): void {
    this.diskExceeded = new DiskBudgetExceeded(used, budget);
    this.alive = false;
  }

  private ensureAlive(): void {
    if (this.diskExceeded) throw this.diskExceeded;
    if (!this.alive) throw new SandboxDead(`sandbox ${this.id.slice(0, 12)} is not running`);
  }

  /** The entry a path names, refusing a symlink or a non-folder on the way (and at the end). */
  private walk(path: string, what: string): { node: MemoryNode | undefined; missingFolder?: string } {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const folder = parts.slice(0, i).join('/');
      const node = this.nodes.get(folder);
      if (!node) return { node: undefined, missingFolder: folder };
      if (node.type === 'symlink') {
        throw new SandboxFileError(
          `${what}: ${folder} is a symbolic link; files are never read or written through a link`,
          'through-link',
        );
      }
      if (node.type !== 'directory')
        throw new SandboxFileError(`${what}: ${folder} is not a folder or does not exist`, 'missing');
    }
    const node = this.nodes.get(path);
    if (node?.type === 'symlink') {
      throw new SandboxFileError(
        `${what}: ${path} is a symbolic link; files are never read or written through a link`,
        'through-link',
      );
    }
    return { node };
  }

  // ---- the contract -------------------------------------------------------------------

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.ensureAlive();
    if (options.signal?.aborted) throw abortError(options.signal);
    this.commands.push(command);
    const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      Promise.resolve(this.onExec(command, options, this)).then((result) => ({ result })),
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), timeoutMs);
      }),
      new Promise<'aborted'>((resolve) => {
        options.signal?.addEventListener('abort', () => resolve('aborted'), { once: true });
      }),
    ]);
    clearTimeout(timer);
    if (outcome === 'aborted') throw abortError(options.signal!);
    this.ensureAlive();
    const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const stdout = new CappedOutput(max);
    const stderr = new CappedOutput(max);
    const result = outcome === 'timeout' ? { exitCode: 124, timedOut: true } : outcome.result;
    stdout.write(Buffer.from(result.stdout ?? ''));
    stderr.write(Buffer.from(result.stderr ?? ''));
    return {
      exitCode: result.exitCode ?? 0,
      stdout: stdout.text(),
      stderr: stderr.text(),
      timedOut: result.timedOut ?? false,
      truncated: stdout.truncated || stderr.truncated,
      durationMs: Date.now() - started,
    };
  }

  async readFile(path: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    this.ensureAlive();
    const rel = relative(path);
    const { node } = this.walk(rel, path);
    if (!node) throw new SandboxFileError(`${path}: no such file`, 'missing');
    if (node.type === 'directory')
      throw new SandboxFileError(`${path}: is a directory, not a file`, 'is-a-directory');
    if (node.type !== 'file') throw new SandboxFileError(`${path}: not a regular file`, 'not-a-file');
    const max = options.maxBytes ?? 10 * 1024 * 1024;
    if (node.data.content.length > max) {
      throw new SandboxFileError(
        `${path}: ${node.data.content.length} bytes is over the read limit`,
        'too-large',
      );
    }
    return Buffer.from(node.data.content);
  }

  async writeFiles(files: readonly WriteFile[]): Promise<void> {
    this.ensureAlive();
    for (const file of files) {
      const rel = relative(file.path);
      const parts = rel.split('/');
      for (let i = 1; i < parts.length; i++) {
        const folder = parts.slice(0, i).join('/');
        const node = this.nodes.get(folder);
        if (node?.type === 'symlink') {
          throw new SandboxFileError(
            `${file.path}: ${folder} is a symbolic link; files are never read or written through a link`,
            'through-link',
          );
        }
        if (node && node.type !== 'directory')
          throw new SandboxFileError(`${file.path}: ${folder} is not a folder`, 'missing');
        if (!node) {
          const parent = this.nodes.get(posix.dirname(folder));
          if (parent?.type === 'directory' && parent.owner === 'root') {
            throw new SandboxFileError(
              `${file.path}: permission denied (${posix.dirname(folder)})`,
              'permission',
            );
          }
          this.nodes.set(folder, { type: 'directory', mode: 0o755, owner: 'sandbox' });
        }
      }
      const existing = this.nodes.get(rel);
      if (existing?.type === 'symlink') {
        throw new SandboxFileError(
          `${file.path}: ${rel} is a symbolic link; files are never read or written through a link`,
          'through-link',
        );
      }
      if (existing?.type === 'directory')
        throw new SandboxFileError(`${file.path}: is a directory, not a file`, 'is-a-directory');
      const parent = parts.length > 1 ? this.nodes.get(posix.dirname(rel)) : undefined;
      if (parent?.type === 'directory' && parent.owner === 'root') {
        throw new SandboxFileError(`${file.path}: permission denied`, 'permission');
      }
      // A new node: the rename breaks any hard link, as on a real filesystem. Without a mode
      // an existing file keeps its own permission bits; never a setuid, setgid or sticky bit.
      const mode = file.mode ?? (existing?.type === 'file' ? existing.mode : 0o644);
      this.nodes.set(rel, fileNode(file.content, mode & 0o777));
      this.touched.add(rel);
    }
  }

  async listFiles(path = '.', options: { maxEntries?: number } = {}): Promise<FileEntry[]> {
    this.ensureAlive();
    const rel = relative(path);
    if (rel !== '') {
      const { node } = this.walk(rel, path);
      if (!node) throw new SandboxFileError(`${path}: no such file`, 'missing');
      if (node.type !== 'directory')
        throw new SandboxFileError(`${path}: ${rel} is not a folder or does not exist`, 'missing');
    }
    const pruned = (p: string) =>
      p
        .split('/')
        .slice(0, -1)
        .some((s) => s === '.git' || s === 'node_modules');
    const entries = [...this.nodes.entries()]
      .filter(
        ([p]) => (rel === '' || p.startsWith(`${rel}/`)) && !pruned(p.slice(rel === '' ? 0 : rel.length + 1)),
      )
      .filter(([p]) => !['.git', 'node_modules'].includes(posix.basename(p)))
      .map(([p, node]) => ({
        path: p,
        type: typeOf(node),
        size:
          node.type === 'file'
            ? node.data.content.length
            : node.type === 'symlink'
              ? node.target.length
              : node.type === 'directory'
                ? 4096
                : 0,
      }))
      .sort(byPath);
    return entries.slice(0, options.maxEntries ?? 5000);
  }

  async changes(limits: ChangeScanLimits = {}): Promise<ChangeScan> {
    this.ensureAlive();
    const out: PathChange[] = [];
    for (const [path, node] of this.nodes) {
      const before = this.initial.get(path);
      const now = {
        type: typeOf(node),
        mode: node.type === 'symlink' ? 0o777 : node.mode,
        ...(node.type === 'file' ? { size: node.data.content.length, links: this.linkCount(node) } : {}),
      };
      if (!before) out.push({ path, kind: 'added', ...now });
      else if (typeOf(before) !== now.type) out.push({ path, kind: 'modified', ...now });
      else if (node.type === 'file' && before.type === 'file') {
        const rewritten = this.touched.has(path);
        if (
          rewritten ||
          !before.data.content.equals(node.data.content) ||
          before.mode !== node.mode ||
          now.links !== 1
        ) {
          out.push({ path, kind: 'modified', ...now });
        }
      } else if (node.type === 'directory' && before.type === 'directory' && before.mode !== node.mode) {
        out.push({ path, kind: 'modified', ...now });
      } else if (node.type === 'symlink' && before.type === 'symlink' && before.target !== node.target) {
        out.push({ path, kind: 'modified', ...now });
      }
    }
    for (const path of this.initial.keys()) if (!this.nodes.has(path)) out.push({ path, kind: 'deleted' });
    out.sort(byPath);
    const max = limits.maxEntries ?? 100_000;
    return { changes: out.slice(0, max), complete: out.length <= max };
  }

  private linkCount(node: MemoryNode): number {
    if (node.type !== 'file') return 1;
    return [...this.nodes.values()].filter((n) => n.type === 'file' && n.data === node.data).length;
  }

  async exportFiles(paths: readonly string[], limits: ExportLimits = {}): Promise<ExportResult> {
    this.ensureAlive();
    const result: ExportResult = { files: [], refused: [] };
    const maxFile = limits.maxFileBytes ?? 5 * 1024 * 1024;
    const maxTotal = limits.maxTotalBytes ?? 50 * 1024 * 1024;
    let total = 0;
    for (const path of paths) {
      let rel: string;
      try {
        rel = relative(path);
      } catch {
        result.refused.push({ path, kind: 'invalid-path', reason: 'not a plain path inside the workspace' });
        continue;
      }
      const node = this.nodes.get(rel);
      if (!node) result.refused.push({ path: rel, kind: 'missing', reason: 'no longer exists' });
      else if (node.type === 'symlink')
        result.refused.push({
          path: rel,
          kind: 'symlink',
          reason: `a symbolic link (pointing to ${node.target}) is not a regular file`,
        });
      else if (node.type === 'fifo')
        result.refused.push({
          path: rel,
          kind: 'special-file',
          reason: 'a named pipe (fifo) is not a regular file',
        });
      else if (node.type === 'directory')
        result.refused.push({ path: rel, kind: 'directory', reason: 'a folder, not a file' });
      else if (this.linkCount(node) > 1)
        result.refused.push({
          path: rel,
          kind: 'hard-link',
          reason: 'a hard link (it shares its data with another file)',
        });
      else if (node.data.content.length > maxFile) {
        result.refused.push({
          path: rel,
          kind: 'too-large',
          reason: `${node.data.content.length} bytes is over the ${maxFile}-byte per-file cap`,
        });
      } else if (total + node.data.content.length > maxTotal) {
        result.refused.push({
          path: rel,
          kind: 'over-total',
          reason: `reading it would pass the ${maxTotal}-byte total cap`,
        });
      } else {
        total += node.data.content.length;
        result.files.push({ path: rel, content: Buffer.from(node.data.content), mode: node.mode });
      }
    }
    return result;
  }

  async spawn(argv: readonly string[], options: SpawnOptions): Promise<SandboxProcess> {
    this.ensureAlive();
    if (!this.onSpawn) throw new UsageError('this memory sandbox has no spawn handler');
    this.spawnedArgv.push([...argv]);
    const process = await this.onSpawn(argv, options, this);
    this.processes.push(process);
    return process;
  }

  async freeze(): Promise<void> {
    if (this.diskExceeded) throw this.diskExceeded;
    this.killProcesses();
    // Like a restart: whatever killed its processes, the frozen sandbox serves reads again.
    this.alive = true;
    this.frozen = true;
  }

  async isAlive(): Promise<boolean> {
    return this.alive && !this.diskExceeded;
  }

  async dispose(options: { keep?: boolean } = {}): Promise<void> {
    if (this.disposed) return;
    this.disposed = { keep: options.keep ?? false };
    this.alive = false;
    this.killProcesses();
  }

  /** The pristine tree, as a backend's `workspaceTree` would give it. */
  pristineTree(): WorkspaceTree {
    const tree = new Map<string, TreeEntry>();
    for (const [path, node] of this.initial) {
      if (node.type === 'file')
        tree.set(path, {
          type: 'file',
          mode: node.mode,
          size: node.data.content.length,
          sha256: sha256(node.data.content),
        });
      else if (node.type === 'directory') tree.set(path, { type: 'directory', mode: node.mode, size: 0 });
      else if (node.type === 'symlink')
        tree.set(path, { type: 'symlink', mode: 0o777, size: node.target.length, linkTarget: node.target });
      else tree.set(path, { type: 'other', mode: node.mode, size: 0 });
    }
    return tree;
  }
}

/** A backend of `MemorySandbox`es made from one set of files (the "image"). */
export class MemoryBackend implements SandboxBackend {
  readonly name = 'memory';
  readonly engine = 'memory';
  readonly created: { spec: SandboxSpec; sandbox: MemorySandbox }[] = [];
  private readonly template: MemorySandbox;

  constructor(
    private readonly files: Record<string, MemoryEntry>,
    private readonly onExec: ExecHandler = () => ({ exitCode: 0 }),
    /** Runs on every new sandbox before it is handed out (e.g. to make one fail). */
    private readonly onCreate?: (sandbox: MemorySandbox, spec: SandboxSpec) => void,
  ) {
    this.template = new MemorySandbox(files);
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    const sandbox = new MemorySandbox(this.files, this.onExec, undefined, spec.hidden ?? []);
    Object.assign(sandbox.labels, { run: spec.runId ?? 'adhoc', role: spec.role ?? 'sandbox' });
    this.onCreate?.(sandbox, spec);
    this.created.push({ spec, sandbox });
    return sandbox;
  }

  async workspaceTree(): Promise<WorkspaceTree> {
    return this.template.pristineTree();
  }

  private find(request: AttachRequest): MemorySandbox | undefined {
    const found = this.created.find((c) => c.sandbox.id === request.id);
    if (found && found.spec.runId !== request.runId) {
      throw new UsageError(
        `container ${request.id.slice(0, 12)} is not a sandbox of run ${request.runId}; refusing to use it`,
      );
    }
    return found?.sandbox;
  }

  async attach(request: AttachRequest): Promise<Sandbox> {
    const sandbox = this.find(request);
    if (!sandbox) throw new SandboxDead(`container ${request.id.slice(0, 12)} no longer exists`);
    return sandbox;
  }

  async release(): Promise<void> {}

  async state(request: AttachRequest): Promise<SandboxState> {
    const sandbox = this.find(request);
    return sandbox
      ? { exists: true, running: await sandbox.isAlive(), status: 'memory' }
      : { exists: false, running: false, status: 'removed' };
  }

  async interactiveShell(): Promise<number> {
    throw new Interrupted('the in-memory backend has no shell');
  }
}
