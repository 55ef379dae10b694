/**
 * A sandbox made from a fork image answers `changes()` against the pristine tree, as every
 * sandbox does: what its parent had changed when it was forked (the parent's own scan, kept
 * with the fork) merged with what changed since in this one. Without the merge the parent's
 * files would sit in the image under this sandbox's writable layer, where its scan never
 * looks, and be lost to the change set (never to verification's harm: it is only the
 * agent's own change that would go missing).
 *
 * The merged list is a hint like any scan (`PathChange`): every byte is exported, re-hashed
 * and gated on the host, and verification is pristine plus exactly that change.
 */
import { shellQuote } from '../shell.js';
import type {
  ChangeScan,
  ChangeScanLimits,
  ExecOptions,
  ExecResult,
  ExportLimits,
  ExportResult,
  FileCallOptions,
  FileEntry,
  PathChange,
  Sandbox,
  SandboxProcess,
  SpawnOptions,
  WriteFile,
} from '../types.js';
import type { EgressLogEntry } from '../egress/proxy.js';

/**
 * Paths checked per command when looking which inherited paths are still there, and their
 * bytes: the command is one argument of `sh -c`, which the kernel caps at 128 KiB.
 */
const CHECK_BATCH = 500;
const CHECK_BATCH_BYTES = 64 * 1024;

function* batches(paths: readonly string[]): Generator<string[]> {
  let batch: string[] = [];
  let bytes = 0;
  for (const path of paths) {
    const size = Buffer.byteLength(path) + 3;
    if (batch.length > 0 && (batch.length >= CHECK_BATCH || bytes + size > CHECK_BATCH_BYTES)) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(path);
    bytes += size;
  }
  if (batch.length > 0) yield batch;
}

export class ForkedSandbox implements Sandbox {
  readonly spawn?: (argv: readonly string[], options: SpawnOptions) => Promise<SandboxProcess>;
  readonly egressLog?: () => EgressLogEntry[];
  readonly startChannel?: (options?: { freezeWatch?: boolean }) => void;
  readonly watchFreeze?: () => void;

  constructor(
    private readonly inner: Sandbox,
    /** The parent's changes against the pristine tree, when it was forked. */
    private readonly inherited: readonly PathChange[],
  ) {
    if (inner.spawn) this.spawn = (argv, options) => inner.spawn!(argv, options);
    if (inner.egressLog) this.egressLog = () => inner.egressLog!();
    if (inner.startChannel) this.startChannel = (options) => inner.startChannel!(options);
    if (inner.watchFreeze) this.watchFreeze = () => inner.watchFreeze!();
  }

  get id(): string {
    return this.inner.id;
  }
  get image(): string {
    return this.inner.image;
  }
  get labels(): Readonly<Record<string, string>> {
    return this.inner.labels;
  }

  exec(command: string, options?: ExecOptions): Promise<ExecResult> {
    return this.inner.exec(command, options);
  }
  readFile(path: string, options?: FileCallOptions & { maxBytes?: number }): Promise<Buffer> {
    return this.inner.readFile(path, options);
  }
  writeFiles(files: readonly WriteFile[], options?: FileCallOptions): Promise<void> {
    return this.inner.writeFiles(files, options);
  }
  listFiles(path?: string, options?: FileCallOptions & { maxEntries?: number }): Promise<FileEntry[]> {
    return this.inner.listFiles(path, options);
  }
  exportFiles(paths: readonly string[], limits?: ExportLimits): Promise<ExportResult> {
    return this.inner.exportFiles(paths, limits);
  }
  freeze(options?: { signal?: AbortSignal }): Promise<void> {
    return this.inner.freeze(options);
  }
  isAlive(): Promise<boolean> {
    return this.inner.isAlive();
  }
  dispose(options?: { keep?: boolean }): Promise<void> {
    return this.inner.dispose(options);
  }

  async changes(limits: ChangeScanLimits = {}): Promise<ChangeScan> {
    const own = await this.inner.changes(limits);
    const merged = new Map(this.inherited.map((c) => [c.path, c]));
    // What changed here since the fork is the truth about those paths.
    for (const change of own.changes) merged.set(change.path, change);
    const ownPaths = new Set(own.changes.map((c) => c.path));
    // An inherited path this sandbox removed again leaves no trace in its own scan when the
    // pristine tree never had it: look whether it is still there.
    const unsure = this.inherited.filter((c) => c.kind !== 'deleted' && !ownPaths.has(c.path));
    for (const gone of await this.missing(
      unsure.map((c) => c.path),
      limits.signal,
    ))
      merged.delete(gone);
    const changes = [...merged.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const max = limits.maxEntries;
    const complete = own.complete && (max === undefined || changes.length <= max);
    return { changes: max === undefined ? changes : changes.slice(0, max), complete };
  }

  /** Which of `paths` no longer exist (nothing at the name, not even a link). */
  private async missing(paths: readonly string[], signal?: AbortSignal): Promise<string[]> {
    const gone: string[] = [];
    for (const batch of batches(paths)) {
      const result = await this.inner.exec(
        `for p in ${batch.map(shellQuote).join(' ')}; do [ -e "$p" ] || [ -h "$p" ] || printf '%s\\0' "$p"; done`,
        { timeoutMs: 60_000, maxOutputBytes: 4 * 1024 * 1024, ...(signal ? { signal } : {}) },
      );
      // A check that did not run says nothing: every path stays (an export then says what is missing).
      if (result.exitCode !== 0 || result.truncated) continue;
      const asked = new Set(batch);
      for (const name of result.stdout.split('\0')) if (asked.has(name)) gone.push(name);
    }
    return gone;
  }
}
