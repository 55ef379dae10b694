/**
 * The sandbox contract. Everything above this folder (agent tools, the change gate, the
 * fix loop, evals) talks to a `Sandbox`; only `sandbox/docker/` knows what implements it.
 * Nothing here knows about tickets, catalogs or evals.
 */

/** Where the target repo lives inside every sandbox. Tool paths are relative to it. */
export const WORKSPACE = '/workspace';
/** Uid/gid of the unprivileged user that owns the workspace and runs every command. */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
export const SANDBOX_USER = 'sandbox';

export interface ExecOptions {
  /** Host-side deadline; the command also runs under an in-container `timeout -k`. */
  timeoutMs?: number;
  /** Cap on stdout + stderr kept in memory; head and tail are kept, the middle is cut. */
  maxOutputBytes?: number;
  /** Working directory; relative paths are resolved against the workspace. */
  cwd?: string;
  /** Extra variables for this command only. Never copied from the host environment. */
  env?: Record<string, string>;
  /** Cancels the command (Ctrl-C): the host stops waiting and the process tree is killed. */
  signal?: AbortSignal;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** True when output was cut to `maxOutputBytes` (a marker says where). */
  truncated: boolean;
  durationMs: number;
}

export interface FileEntry {
  /** Relative to the workspace, posix separators. */
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
}

export type ChangeKind = 'added' | 'modified' | 'deleted';

export interface PathChange {
  /** Relative to the workspace, posix separators, never starting with `/`. */
  path: string;
  kind: ChangeKind;
}

export interface ExportedFile {
  path: string;
  content: Buffer;
  /** Permission bits as found in the archive (e.g. 0o644, 0o755, 0o4755). */
  mode: number;
}

export interface ExportRefusal {
  path: string;
  reason: string;
}

export interface ExportResult {
  files: ExportedFile[];
  directories: string[];
  refused: ExportRefusal[];
}

export interface ExportLimits {
  maxFileBytes?: number;
  maxTotalBytes?: number;
}

export interface WriteOptions {
  /** Permission bits; default 0o644. */
  mode?: number;
  /** Owner of the written file; default the sandbox user. `root` makes it read-only to commands. */
  owner?: 'sandbox' | 'root';
}

export type KeepPolicy = boolean;

export interface Sandbox {
  readonly id: string;
  readonly image: string;
  readonly labels: Readonly<Record<string, string>>;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  /** Reads a file (workspace-relative or absolute); refuses directories, links and files over `maxBytes`. */
  readFile(path: string, options?: { maxBytes?: number }): Promise<Buffer>;
  writeFile(path: string, content: Buffer | string, options?: WriteOptions): Promise<void>;
  /** Files below a workspace folder, recursively, without descending into `.git` or `node_modules`. */
  listFiles(path?: string, options?: { maxEntries?: number }): Promise<FileEntry[]>;
  /** What changed under the workspace since the sandbox was created, as the daemon sees it. */
  changes(): Promise<PathChange[]>;
  /** Reads workspace files back through the archive API, refusing anything that is not plain data. */
  exportFiles(paths: string[], limits?: ExportLimits): Promise<ExportResult>;
  /** Whether the container still runs. */
  isAlive(): Promise<boolean>;
  /** Stops the sandbox; removes it unless `keep` is true (then it is labelled as kept). */
  dispose(options?: { keep?: boolean }): Promise<void>;
}

export interface SandboxResources {
  /** Bytes of memory (and memory + swap: no swap). */
  memoryBytes?: number;
  cpus?: number;
  pids?: number;
  /** Largest single file a command may write, bytes. */
  maxFileBytes?: number;
  tmpfsBytes?: number;
}

export interface InjectedFile {
  /** Absolute path inside the sandbox. */
  path: string;
  content: Buffer | string;
  mode?: number;
  owner?: 'sandbox' | 'root';
}

export interface SandboxSpec {
  image: string;
  /** Run id, session and role end up as labels so `gc`, `inspect` and `shell` can find containers. */
  runId?: string;
  role?: string;
  /** Variables visible to every command. Built explicitly; never from `process.env`. */
  env?: Record<string, string>;
  resources?: SandboxResources;
  /** Files placed before the container starts (e.g. the read-only service catalog). */
  files?: InjectedFile[];
  extraLabels?: Record<string, string>;
}

export interface SandboxBackend {
  readonly name: string;
  create(spec: SandboxSpec): Promise<Sandbox>;
}

export const DEFAULT_RESOURCES: Required<SandboxResources> = {
  memoryBytes: 1024 * 1024 * 1024,
  cpus: 1,
  pids: 256,
  maxFileBytes: 64 * 1024 * 1024,
  tmpfsBytes: 256 * 1024 * 1024,
};

export const DEFAULT_EXEC_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024;
