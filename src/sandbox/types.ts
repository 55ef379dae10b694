/**
 * The sandbox contract. Everything above this folder (agent tools, the change path, the fix
 * loop, evals, the CLI) talks to a `Sandbox` and a `SandboxBackend`; only a backend folder
 * (`docker/`) knows what implements them, and a second backend implements exactly this.
 * Nothing here knows about tickets, catalogs or evals.
 *
 * Errors, for every method (each method names what else it throws):
 * - `SandboxDead`: the sandbox is gone or stopped answering (killed, OOM, engine restarted).
 * - `DiskBudgetExceeded`: the sandbox passed its disk budget and was stopped.
 * - `SandboxUnavailable`: the engine cannot be reached.
 * - `Interrupted` (or the signal's own reason, e.g. `RunTimeout`): the signal aborted.
 * A command's non-zero exit is data (`ExecResult.exitCode`), never an error.
 */
import type { Writable } from 'node:stream';
import type { EgressPolicy } from '../egress-policy.js';
import type { EgressLogEntry } from './egress/proxy.js';
import type { RepoImage, RepoImageRequest } from '../image-context/request.js';
import type { ImageLayer } from '../image-context/image-layer.js';

/** Where the target repo lives inside every sandbox. Tool paths are relative to it. */
export const WORKSPACE = '/workspace';
/** Uid/gid of the unprivileged user that owns the workspace and runs every command. */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
export const SANDBOX_USER = 'sandbox';
/** Root-owned folder for what the harness injects (catalog, start marker). */
export const HARNESS_DIR_IN_SANDBOX = '/etc/sandbox-harness';

export interface ExecOptions {
  /** Host-side deadline; the command also runs under an in-container `timeout -k`. */
  timeoutMs?: number;
  /** Cap on stdout + stderr kept in memory; head and tail are kept, the middle is cut. */
  maxOutputBytes?: number;
  /** Working directory; relative paths are resolved against the workspace. */
  cwd?: string;
  /** Extra variables for this command only. Never copied from the host environment. */
  env?: Record<string, string>;
  /** Cancels the command: the host stops waiting and the process tree is killed. */
  signal?: AbortSignal;
  /**
   * May run over the sandbox's long-lived command channel: a few milliseconds instead of an
   * exec round trip, but its output and exit code are then the command's own word (a process
   * in the sandbox could forge them). Only for results that are the agent's own information
   * (its tool calls); never for a verdict.
   */
  fast?: boolean;
}

/** Options of the file calls; `fast` as in `ExecOptions`: for the agent's own calls only. */
export interface FileCallOptions {
  signal?: AbortSignal;
  fast?: boolean;
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

export type EntryType = 'file' | 'directory' | 'symlink' | 'other';

export interface FileEntry {
  /** Relative to the workspace, posix separators. */
  path: string;
  type: EntryType;
  size: number;
}

export type ChangeKind = 'added' | 'modified' | 'deleted';

/**
 * One changed workspace path, as the sandbox reports it. A hint only: the host re-reads and
 * re-hashes every byte it uses, so a sandbox that lies can only lose its own change.
 */
export interface PathChange {
  /** Relative to the workspace, posix separators, never starting with `/`. */
  path: string;
  kind: ChangeKind;
  /** What is at the path now (absent for deletions). */
  type?: EntryType;
  /** Permission bits now (absent for deletions). */
  mode?: number;
  /** Bytes now, for regular files. */
  size?: number;
  /** Hard links to the same data, for regular files. */
  links?: number;
  /**
   * Set when the entry could not be named, decoded or looked up (a name that is not UTF-8, an
   * entry the walk could not stat): the change is refused for it, never skipped. `path` then
   * holds the raw name escaped.
   */
  unreadable?: string;
}

export interface ChangeScanLimits {
  /** Most changed paths to list; past it the scan stops and says so (`complete: false`). */
  maxEntries?: number;
  signal?: AbortSignal;
}

export interface ChangeScan {
  changes: PathChange[];
  /** False when the sandbox changed more paths than the scan would list. */
  complete: boolean;
}

export interface ExportedFile {
  path: string;
  content: Buffer;
  /** Permission bits as found in the archive (e.g. 0o644, 0o755, 0o4755). */
  mode: number;
}

/** Why an exported path was refused; stable words, so nobody parses messages. */
export type RefusalKind =
  | 'symlink'
  | 'hard-link'
  | 'special-file'
  | 'directory'
  | 'too-large'
  | 'over-total'
  | 'missing'
  | 'invalid-path';

export interface ExportRefusal {
  path: string;
  kind: RefusalKind;
  /** The same, in words a model or a person can act on. */
  reason: string;
}

export interface ExportResult {
  files: ExportedFile[];
  refused: ExportRefusal[];
}

export interface ExportLimits {
  maxFileBytes?: number;
  maxTotalBytes?: number;
  signal?: AbortSignal;
}

export interface WriteFile {
  /** Workspace-relative path. */
  path: string;
  content: Buffer | string;
  /**
   * Permission bits (only the 0o777 ones: a write never sets a setuid, setgid or sticky bit).
   * Without one, a file that exists keeps its own permission bits (a rewrite of a 0755 script
   * stays 0755, as with `sed -i`) and a new file gets 0o644.
   */
  mode?: number;
}

/**
 * A long-lived process in a sandbox whose stdin and stdout the host holds (the model bridge's
 * relay). Everything it writes is the sandbox's word: hostile data, parsed with caps.
 */
export interface SandboxProcess {
  /** The process's stdin; ending it is end of file for the process. */
  readonly input: NodeJS.WritableStream;
  /** Resolves with the exit code once the process has ended (the engine's word, never rejected). */
  readonly exited: Promise<number>;
  /** Kills the process and everything it started, and stops following it. Idempotent; never throws `SandboxDead`. */
  kill(): Promise<void>;
}

export interface SpawnOptions {
  /** Where its stdout goes, as it arrives (raw bytes). */
  stdout: Writable;
  /** Where its stderr goes, as it arrives. */
  stderr: Writable;
  /** Extra variables for this process only. Never copied from the host environment. */
  env?: Record<string, string>;
}

export interface Sandbox {
  readonly id: string;
  readonly image: string;
  readonly labels: Readonly<Record<string, string>>;
  /**
   * The machine it runs on when the backend picks one per sandbox (a Slurm node), for records
   * and reports where an engine is named; absent: the backend's engine.
   */
  readonly where?: string | undefined;

  /** Runs `sh -c command` as the sandbox user in the workspace, under limits. */
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;

  /**
   * Reads a workspace file as the sandbox user. Throws `SandboxFileError` (`missing`,
   * `not-a-file`, `is-a-directory`, `through-link` when any folder on the way or the file
   * itself is a symlink, `too-large`, `permission`, `invalid-path`).
   */
  readFile(path: string, options?: FileCallOptions & { maxBytes?: number }): Promise<Buffer>;

  /**
   * Writes workspace files as the sandbox user, creating folders, never following a symlink
   * in any component: a link on the way is `SandboxFileError` `through-link`, not a
   * redirect. Each file is replaced whole (temp file + rename). Also throws
   * `is-a-directory`, `permission`, `invalid-path`.
   */
  writeFiles(files: readonly WriteFile[], options?: FileCallOptions): Promise<void>;

  /** Entries below a workspace folder, without descending into `.git` or `node_modules`. */
  listFiles(path?: string, options?: FileCallOptions & { maxEntries?: number }): Promise<FileEntry[]>;

  /**
   * What changed under the workspace since the sandbox was created, by a scan whose cost
   * grows with the change, not the workspace: files, folders, links, deletions and type
   * changes. A hint (see `PathChange`).
   */
  changes(limits?: ChangeScanLimits): Promise<ChangeScan>;

  /** Reads workspace files back in one stream, refusing anything that is not plain data. */
  exportFiles(paths: readonly string[], limits?: ExportLimits): Promise<ExportResult>;

  /**
   * Stops every process the sandbox ran since it was created (background ones included), so
   * what is read afterwards comes from one frozen moment. The sandbox still serves the
   * harness's own reads and commands afterwards.
   */
  freeze(options?: { signal?: AbortSignal }): Promise<void>;

  /** Whether the sandbox still runs. Never throws `SandboxDead`. */
  isAlive(): Promise<boolean>;

  /**
   * Optional: starts a long-lived process as the sandbox user in the workspace with its stdin
   * kept open, for a helper the host talks to while the agent runs (the model bridge's relay).
   * It has no time limit of its own: it lives until `kill`, the freeze or `dispose`. Throws
   * `SandboxDead`, and `UsageError` when the backend cannot keep a process's stdin open.
   */
  spawn?(argv: readonly string[], options: SpawnOptions): Promise<SandboxProcess>;

  /** Every request the sandbox's egress proxy allowed or denied so far; absent without egress. */
  egressLog?(): EgressLogEntry[];

  /**
   * Optional: starts the command channel of `fast` calls now, so the first such call does not
   * pay its start-up, and with it root's look for the freeze (`watchFreeze`) unless
   * `freezeWatch` is false (a sandbox frozen later if at all: a verification's). Idempotent; a
   * channel that fails to start leaves calls to one exec each.
   */
  startChannel?(options?: { freezeWatch?: boolean }): void;

  /**
   * Optional: starts root's look for a freeze that comes soon, so the freeze does not wait for
   * its start. Idempotent. Without it, a freeze starts that look itself.
   */
  watchFreeze?(): void;

  /**
   * Stops the sandbox and removes it, or keeps it (stopped, marked kept) for `inspect`,
   * `shell` and `rerun-tests`. Idempotent; never throws `SandboxDead`.
   */
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
  /** Bytes the sandbox may add to its writable layer (workspace, home, ...). */
  diskBytes?: number;
}

export interface InjectedFile {
  /** Absolute path inside the sandbox, outside the workspace; root-owned and read-only. */
  path: string;
  content: Buffer | string;
}

/** What happens to a sandbox of a run that did not succeed. */
export type KeepPolicy = 'on-failure' | 'always' | 'never';

export interface SandboxSpec {
  image: string;
  /** The run this sandbox belongs to; `attach` only finds sandboxes by their run id. */
  runId?: string;
  /** What it is for, e.g. `attempt-2`, `verify-2`, `baseline`. */
  role?: string;
  /** Variables visible to every command. Built explicitly; never from `process.env`. */
  env?: Record<string, string>;
  resources?: SandboxResources;
  /** Root-owned, read-only files placed before anything runs (e.g. the service catalog). */
  files?: InjectedFile[];
  /** The run's keep policy, recorded on the sandbox so `gc` can tell kept ones apart. */
  keep?: KeepPolicy;
  /** Workspace paths removed before anything runs (held-out tests); the scan treats them as never there. */
  hidden?: readonly string[];
  /**
   * The image whose pristine tree the change scan compares with (default `image`): for a
   * `workspaceGitImage`, the image it was made from (its `.git` is git's, never a change).
   */
  scanAgainst?: string;
  /**
   * The OCI runtime by the engine's name for it (`runc`, `runsc`, `crun`); absent: the engine's
   * default. A backend without runtimes refuses any name it does not know.
   */
  runtime?: string;
  /**
   * Egress by name through a proxy outside the sandbox (see `sandbox/egress/`); absent:
   * network none. A backend that cannot enforce it throws, never falls back to more network.
   */
  egress?: EgressPolicy;
  /**
   * An agent's tool calls come soon (`fast` calls): its command channel starts with it,
   * beside the removal of the held-out files, instead of on the first call. A backend
   * without a channel ignores it.
   */
  channel?: boolean;
}

/** What `SandboxBackend.workspaceGitImage` gave: an image with git, or why there is none. */
export type WorkspaceGit =
  | { state: 'created'; image: string; reused: boolean; durationMs: number }
  | { state: 'no-git' | 'exists' | 'failed'; note: string };

/** What `SandboxBackend.layerImage` gave: the image with the layer on top. */
export interface LayeredImage {
  image: string;
  /** Made by an earlier run (or another trial) and found by its tag. */
  reused: boolean;
  durationMs: number;
}

/** What `SandboxBackend.forkImage` made. */
export interface ForkedImage {
  /** The reference new sandboxes are made from. */
  image: string;
  imageId: string;
  durationMs: number;
}

/** A kept sandbox as the backend sees it now. */
export interface SandboxState {
  exists: boolean;
  running: boolean;
  /** The backend's word for it (`exited`, `running`, `removed`, ...). */
  status: string;
  name?: string;
}

export interface AttachRequest {
  id: string;
  /** The run the record says it belongs to; a sandbox of any other run is refused. */
  runId: string;
}

/** The pristine workspace of an image, as the engine (not the image's own programs) sees it. */
export interface TreeEntry {
  type: EntryType;
  mode: number;
  size: number;
  /** sha256 (hex) of a regular file's bytes. */
  sha256?: string;
  /** A symlink's target, as stored. */
  linkTarget?: string;
}

/** Workspace-relative path -> entry, for every path under the workspace (folders included). */
export type WorkspaceTree = ReadonlyMap<string, TreeEntry>;

export interface SandboxBackend {
  /** The backend's name (`docker`), and for a fleet the engine's, for records and reports. */
  readonly name: string;
  readonly engine: string;

  /** Throws `ImageError` for a missing image; never leaves a half-made sandbox behind. */
  create(spec: SandboxSpec): Promise<Sandbox>;

  /**
   * Optional: the id of the image a reference names now, or undefined when there is none. A
   * warm pool uses it to never hand out a sandbox of an image the reference no longer names.
   */
  imageId?(image: string): Promise<string | undefined>;

  /** Why `SandboxSpec.egress` cannot be enforced on this engine, or undefined; absent: never can. */
  egressProblem?(): Promise<string | undefined>;

  /**
   * The image's pristine workspace, read by the engine without running anything of the
   * image. Cached per image id. Throws `ImageError` when the image has no workspace folder.
   */
  workspaceTree(image: string, options?: { signal?: AbortSignal }): Promise<WorkspaceTree>;

  /**
   * Optional: `image` plus a git repository of its workspace (one commit of what it holds
   * without `hidden`, no history, no remote; `exclude` in `.git/info/exclude`), so
   * `git status`/`git diff` work in its sandboxes. The objects never hold a `hidden` path.
   * Made once per inputs and cached; an image without git gives `no-git`, not an error.
   */
  workspaceGitImage?(
    image: string,
    options: { hidden: readonly string[]; exclude: readonly string[]; signal?: AbortSignal },
  ): Promise<WorkspaceGit>;

  /**
   * Optional: `image` plus `layer` (see `image-context/image-layer.ts`: root-owned files in
   * folders the layer owns), made without running anything of the image and with no
   * network, once per image and layer key, then reused. Throws `ImageError` when the image
   * already has a folder the layer owns, or a parent of one that is not a folder (a link).
   */
  layerImage?(image: string, layer: ImageLayer, options?: { signal?: AbortSignal }): Promise<LayeredImage>;

  /**
   * Re-attaches to a kept sandbox, starting it if it was stopped. Refuses (`UsageError`)
   * anything that does not carry this tool's marks and the given run id.
   */
  attach(request: AttachRequest): Promise<Sandbox>;

  /**
   * Optional: a sandbox's state (its workspace and the rest of its writable layer) as a new
   * image that new sandboxes start from (`sandbox/fork/`). Labelled as this tool's and as the
   * `owner` run's, so `gc` removes it with that run or once its process is gone. A running
   * sandbox is paused while it is read, never restarted. Refuses (`UsageError`) what does not
   * carry this tool's marks and the run id, and a sandbox with egress (its settings would go
   * with the image). Absent: the backend cannot fork, and `sandbox/fork/` says so.
   */
  forkImage?(request: AttachRequest, options: { owner: string; signal?: AbortSignal }): Promise<ForkedImage>;

  /** Removes an image `forkImage` made; false while a sandbox still uses it (gc removes it later). */
  removeForkImage?(image: string): Promise<boolean>;

  /** Stops a kept sandbox again after `attach`. */
  release(request: AttachRequest): Promise<void>;

  /** State of a kept sandbox; `exists: false` when it is gone. Checks the marks like `attach`. */
  state(request: AttachRequest): Promise<SandboxState>;

  /** An interactive shell as the sandbox user in a kept sandbox; resolves with its exit code. */
  interactiveShell(
    request: AttachRequest,
    io: { stdin: NodeJS.ReadStream; stdout: NodeJS.WriteStream },
  ): Promise<number>;
}

export const DEFAULT_RESOURCES: Required<SandboxResources> = {
  memoryBytes: 1024 * 1024 * 1024,
  cpus: 1,
  pids: 256,
  maxFileBytes: 64 * 1024 * 1024,
  tmpfsBytes: 256 * 1024 * 1024,
  diskBytes: 1024 * 1024 * 1024,
};

export const DEFAULT_EXEC_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024;

// ---- the provider: every operation of a backend the CLI, fix and evals need ---------------
// (here rather than in backend-registry.ts, so a backend's provider imports types, not the registry
// that loads it)

/** One check of `doctor`. */
export interface DoctorCheck {
  /** Stable identifier: `daemon`, `server-version`, `storage-driver`, `cgroups`, `kernel-limits`, `sandbox-container`, `sandbox-names`, `disk-budget`, `disk`, `base-images`, `offline-bootstrap`. */
  name: string;
  ok: boolean;
  /** What was found, one line. */
  detail: string;
  /** The command (or step) that fixes it: when `ok` is false, or with `warning` how to get what is missing. */
  fix?: string;
  /**
   * Passed, but something optional is missing (the Python base image, the offline
   * bootstrap's tool while a base exists): shown with `!`, never with a check mark.
   */
  warning?: true;
  /** True when this problem alone makes sandboxes impossible. */
  fatal?: boolean;
}

/** What an engine stores, as it reports it. */
export interface EngineStorageUsage {
  /** Absent when the engine does not say (Podman answers 0 for any number of images). */
  layersBytes?: number;
  images: number;
  containers: number;
  /** Writable layers of all containers. */
  containersBytes: number;
  volumes: number;
  buildCacheBytes: number;
}

export interface EngineFacts {
  name: string;
  /** The program that answers (`Docker`, `Podman`), for people; its version is `serverVersion`. */
  product?: string;
  serverVersion: string;
  apiVersion: string;
  cpus: number;
  memoryBytes: number;
  dockerRootDir: string;
  /** Free and total bytes of the file system under the data root, seen from inside a sandbox. */
  freeBytes?: number;
  totalBytes?: number;
  usage?: EngineStorageUsage;
}

export interface DoctorReport {
  /** Every check passed. */
  ok: boolean;
  /** Sandboxes can run (no fatal problem). */
  usable: boolean;
  /** Where the engine was looked for, without secrets. */
  endpoint: string;
  checks: DoctorCheck[];
  /** What the engine said about itself; absent when it did not answer. */
  engine?: EngineFacts;
}

export interface ProviderDoctorOptions {
  /** An engine of a fleet: a missing base image is fixed by shipping it, which `prepareHint` says how. */
  fleet?: { prepareHint: string };
}

/** What `gc` removes: each field narrows it. */
export interface GcScope {
  /** Only what was created longer ago than this. */
  olderThanMs?: number | undefined;
  /** Also kept sandboxes (of failed runs) and repo images. */
  all?: boolean;
  /** Only sandboxes of this run (kept ones included). */
  runId?: string | undefined;
  dryRun?: boolean;
}

export interface GcReport {
  containers: { id: string; name: string; run: string; kept: boolean }[];
  images: { id: string; tags: string[] }[];
  /** Egress networks whose sandbox is gone. */
  networks?: { id: string; name: string; run: string }[];
}

export type PresenceMethod = 'ship' | 'build';

export interface ImagePresence {
  tag: string;
  imageId: string;
  /** `present`: nothing was done; `shipped`/`built`: it is there now. */
  how: 'present' | 'shipped' | 'built';
  durationMs: number;
  /** Bytes streamed from the source engine (ship only). */
  bytes?: number;
}

export interface BaseImagePresenceOptions {
  /** The provider whose engine has (or can make) the image, to ship from. Default: the local engine. */
  from?: SandboxProvider;
  /** Default: the harness's node base image. */
  image?: string;
  method?: PresenceMethod;
  signal?: AbortSignal;
  onLine?: (line: string) => void;
}

/**
 * One engine of several (an eval's fleet, `--engine`): the name records and reports use for
 * it, and the connection made to it. Only the backend that made the connection understands it.
 */
export interface EngineHandle {
  readonly name: string;
  readonly connection: unknown;
  /** Where it is, for messages; no secrets. */
  readonly endpoint?: string;
}

/** Where a cluster backend (`slurm`) puts its sandboxes: the cluster's own words, passed through. */
export interface ClusterPlacement {
  /** The cluster's configuration file (Slurm: slurm.conf); absent: the environment's, else the system's. */
  conf?: string;
  partition?: string;
  account?: string;
  qos?: string;
  constraint?: string;
}

/** A cluster backend's sandbox waiting in the cluster's queue, or leaving it. */
export interface QueueEvent {
  /** The cluster's id of the sandbox's job. */
  job: string;
  /** The cluster's word: `PENDING` while it waits; `RUNNING` once it runs; anything else: it ended unrun. */
  state: string;
  /** Why it waits, in the cluster's words (`Resources`, `Priority`, `ReqNodeNotAvail, ...`). */
  reason: string;
}

export interface ProviderOptions {
  /** The engine to bind to; absent: the local engine, named `local`. */
  engine?: EngineHandle;
  /** For a cluster backend: where its jobs go. */
  cluster?: ClusterPlacement;
  /** For a cluster backend: each change of a sandbox's wait in the queue. */
  onQueued?: ((event: QueueEvent) => void) | undefined;
  /** For a cluster backend: notes for a person (a node excluded, fenced, back in use). */
  onNote?: ((line: string) => void) | undefined;
}

export interface SandboxProvider {
  readonly backend: SandboxBackend;
  /** Where its engine is (`unix:///var/run/docker.sock`, `tcp://10.0.0.5:2376 (TLS)`); no secrets. */
  readonly endpoint: string;
  /** The sandbox image of a repo: reused by content hash, or built. */
  repoImage(request: RepoImageRequest): Promise<RepoImage>;
  /** Throws `SandboxUnavailable` (with what to do) when the engine does not answer or is nearly full. */
  preflight(): Promise<void>;
  /**
   * The runtime a sandbox of this backend gets when `asked` (or nothing) is asked for, by name;
   * `ConfigError` when the engine has no such runtime. Absent: the backend has no runtimes.
   */
  runtime?(asked?: string): Promise<string>;
  /** Every check of the engine (never throws for an engine that does not answer: that is a check). */
  doctor(options?: ProviderDoctorOptions): Promise<DoctorReport>;
  /** Removes this tool's sandboxes, images and networks within `scope` (orphans only when empty). */
  collectGarbage(scope: GcScope): Promise<GcReport>;
  /** A base image present on this engine: there already, shipped from `from`, or built here. */
  ensureBaseImage(options?: BaseImagePresenceOptions): Promise<ImagePresence>;
}
