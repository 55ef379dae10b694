/**
 * An in-memory `Sandbox` for fast unit tests. Files live in a map keyed by
 * workspace-relative path; `exec` is answered by a handler the test supplies, so tests
 * never pretend to run a shell. `changes()` is computed against the files it started with,
 * the way the daemon's container diff is.
 */
import type {
  ExecOptions,
  ExecResult,
  ExportLimits,
  ExportResult,
  FileEntry,
  PathChange,
  Sandbox,
  WriteOptions,
} from '../../src/sandbox/types.js';
import { SandboxDead, SandboxFileError } from '../../src/errors.js';

export interface MemoryFile {
  content: Buffer;
  mode: number;
  /** Marks an entry that is not plain data, so `exportFiles` refuses it like the real backend. */
  kind?: 'file' | 'symlink' | 'fifo';
}

export type ExecHandler = (
  command: string,
  options: ExecOptions,
  sandbox: MemorySandbox,
) => Partial<ExecResult> | Promise<Partial<ExecResult>>;

export class MemorySandbox implements Sandbox {
  readonly id: string;
  readonly image = 'memory:test';
  readonly labels: Record<string, string> = {};
  readonly files = new Map<string, MemoryFile>();
  readonly commands: string[] = [];
  private readonly initial = new Map<string, MemoryFile>();
  private alive = true;
  disposed: { keep: boolean } | undefined;

  constructor(
    initialFiles: Record<string, string | Buffer> = {},
    private readonly onExec: ExecHandler = () => ({ exitCode: 0 }),
    id = 'memory-sandbox',
  ) {
    this.id = id;
    for (const [path, content] of Object.entries(initialFiles)) {
      const file = { content: Buffer.from(content), mode: 0o644 };
      this.files.set(path, file);
      this.initial.set(path, { ...file });
    }
  }

  kill(): void {
    this.alive = false;
  }

  private ensureAlive(): void {
    if (!this.alive) throw new SandboxDead(`sandbox ${this.id} is not running`);
  }

  private normalise(path: string): string {
    return path
      .replace(/^\/workspace\/?/, '')
      .replace(/^\.\//, '')
      .replace(/\/+$/, '');
  }

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.ensureAlive();
    this.commands.push(command);
    const result = await this.onExec(command, options, this);
    return {
      exitCode: 0,
      stdout: '',
      stderr: '',
      timedOut: false,
      truncated: false,
      durationMs: 1,
      ...result,
    };
  }

  async readFile(path: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    this.ensureAlive();
    const file = this.files.get(this.normalise(path));
    if (!file) throw new SandboxFileError(`${path}: no such file`);
    if (options.maxBytes !== undefined && file.content.length > options.maxBytes) {
      throw new SandboxFileError(
        `${path}: ${file.content.length} bytes is over the ${options.maxBytes}-byte limit`,
      );
    }
    return Buffer.from(file.content);
  }

  async writeFile(path: string, content: Buffer | string, options: WriteOptions = {}): Promise<void> {
    this.ensureAlive();
    this.files.set(this.normalise(path), { content: Buffer.from(content), mode: options.mode ?? 0o644 });
  }

  async listFiles(path = '.'): Promise<FileEntry[]> {
    this.ensureAlive();
    const prefix = this.normalise(path);
    return [...this.files.entries()]
      .filter(([p]) => prefix === '' || prefix === '.' || p === prefix || p.startsWith(`${prefix}/`))
      .map(([p, f]) => ({ path: p, type: 'file' as const, size: f.content.length }))
      .sort((a, b) => a.path.localeCompare(b.path));
  }

  async changes(): Promise<PathChange[]> {
    this.ensureAlive();
    const out: PathChange[] = [];
    for (const [path, file] of this.files) {
      const before = this.initial.get(path);
      if (!before) out.push({ path, kind: 'added' });
      else if (!before.content.equals(file.content) || before.mode !== file.mode || file.kind) {
        out.push({ path, kind: 'modified' });
      }
    }
    for (const path of this.initial.keys()) {
      if (!this.files.has(path)) out.push({ path, kind: 'deleted' });
    }
    return out.sort((a, b) => a.path.localeCompare(b.path));
  }

  async exportFiles(paths: string[], limits: ExportLimits = {}): Promise<ExportResult> {
    this.ensureAlive();
    const result: ExportResult = { files: [], directories: [], refused: [] };
    for (const path of paths) {
      const file = this.files.get(this.normalise(path));
      if (!file) {
        result.refused.push({ path, reason: 'missing' });
      } else if (file.kind === 'symlink' || file.kind === 'fifo') {
        result.refused.push({ path, reason: `a ${file.kind} is not a regular file` });
      } else if (limits.maxFileBytes !== undefined && file.content.length > limits.maxFileBytes) {
        result.refused.push({ path, reason: `over the ${limits.maxFileBytes}-byte file cap` });
      } else {
        result.files.push({
          path: this.normalise(path),
          content: Buffer.from(file.content),
          mode: file.mode,
        });
      }
    }
    return result;
  }

  async isAlive(): Promise<boolean> {
    return this.alive;
  }

  async dispose(options: { keep?: boolean } = {}): Promise<void> {
    this.disposed = { keep: options.keep ?? false };
    this.alive = false;
  }
}
