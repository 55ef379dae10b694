/**
 * The Docker implementation of `Sandbox`: one hardened container per sandbox, the repo
 * baked into its image at /workspace, every command a `docker exec` as the sandbox user.
 */
import { posix } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Interrupted, SandboxDead, SandboxFileError } from '../../errors.js';
import { CappedOutput } from '../output.js';
import { shellJoin, shellQuote } from '../shell.js';
import {
  DEFAULT_EXEC_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_RESOURCES,
  SANDBOX_GID,
  SANDBOX_UID,
  WORKSPACE,
  type ExecOptions,
  type ExecResult,
  type ExportLimits,
  type ExportResult,
  type FileEntry,
  type PathChange,
  type Sandbox,
  type SandboxBackend,
  type SandboxSpec,
  type WriteOptions,
} from '../types.js';
import { packTar, readTarSafely, type TarInput } from './archive.js';
import { dockerEngine, type DockerEngine } from './engine.js';
import { KEPT_NAME_PREFIX, containerLabels, containerName } from './labels.js';
import { reapOrphans } from './gc.js';

const USER = `${SANDBOX_UID}:${SANDBOX_GID}`;
/** Seconds between the in-container TERM and KILL. */
const KILL_GRACE_SEC = 2;
/** How long past its own timeout the host waits before it kills the process tree itself. */
const HOST_GRACE_MS = 5_000;
const BASE_ENV = ['HOME=/home/sandbox', 'LANG=C.UTF-8', 'SANDBOX_HARNESS=1'];

/**
 * Runs `$3` under `timeout` with its output relayed through fifos. `timeout` makes itself
 * a process-group leader, so its pid (saved in the exec's folder) names the whole tree,
 * background children included, for the host's kill on deadline or Ctrl-C. The relay is
 * there because a background child that keeps the exec's own stdout open makes the daemon
 * stall the container's next exec for seconds; with fifos, once the command has exited
 * the relays drain what is left and are stopped, so the exec's streams always close.
 */
const EXEC_WRAPPER = [
  'd="/tmp/.sandbox-harness-exec-$1"',
  'mkdir -m 700 "$d" && mkfifo "$d/out" "$d/err" || { echo "sandbox-harness: cannot create $d (is /tmp full?)" >&2; exit 125; }',
  'cat "$d/out" & o=$!',
  'cat "$d/err" >&2 & e=$!',
  `timeout -k ${KILL_GRACE_SEC} "$2" /bin/sh -c "$3" >"$d/out" 2>"$d/err" </dev/null & t=$!`,
  'echo "$t" > "$d/pid"',
  'wait "$t"; rc=$?',
  '( sleep 0.3; kill "$o" "$e" ) >/dev/null 2>&1 & k=$!',
  'wait "$o" "$e" 2>/dev/null',
  'kill "$k" 2>/dev/null',
  'rm -rf "$d"',
  'exit "$rc"',
].join('\n');

export function toWorkspacePath(path: string): string {
  const absolute = posix.isAbsolute(path) ? posix.normalize(path) : posix.join(WORKSPACE, path);
  return absolute.length > 1 ? absolute.replace(/\/+$/, '') : absolute;
}

function relativeToWorkspace(absolute: string): string | undefined {
  if (!absolute.startsWith(`${WORKSPACE}/`)) return undefined;
  return absolute.slice(WORKSPACE.length + 1);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function envList(env: Record<string, string> | undefined): string[] {
  return Object.entries(env ?? {}).map(([k, v]) => `${k}=${v}`);
}

export class DockerSandbox implements Sandbox {
  private disposed = false;

  constructor(
    private readonly engine: DockerEngine,
    readonly id: string,
    readonly image: string,
    readonly labels: Readonly<Record<string, string>>,
    private readonly env: string[],
  ) {}

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    if (options.signal?.aborted) throw new Interrupted('command not started: interrupted');
    const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
    const maxOutput = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const token = randomBytes(6).toString('hex');
    const timeoutSec = Math.max(1, Math.ceil(timeoutMs / 1000));
    const stdout = new CappedOutput(maxOutput);
    const stderr = new CappedOutput(maxOutput);
    const started = Date.now();
    const running = await this.engine.startExec(this.id, {
      cmd: ['/bin/sh', '-c', EXEC_WRAPPER, 'sandbox-exec', token, String(timeoutSec), command],
      user: USER,
      workingDir: options.cwd ? toWorkspacePath(options.cwd) : WORKSPACE,
      env: [...this.env, ...envList(options.env)],
      stdout,
      stderr,
    });

    const exit: { code: number | null } = { code: null };
    let hostTimedOut = false;
    let aborted = false;
    let finished = false;
    const abortPromise = new Promise<'aborted'>((resolve) => {
      if (!options.signal) return;
      options.signal.addEventListener('abort', () => resolve('aborted'), { once: true });
    });
    const deadline = started + timeoutSec * 1000 + KILL_GRACE_SEC * 1000 + HOST_GRACE_MS;

    // The stream alone cannot tell us the command ended: a background child holding
    // stdout keeps it open. So the daemon's exec state decides, polled gently.
    let streamDone = false;
    void running.streamEnded.then(() => {
      streamDone = true;
    });
    const waitForExit = async (): Promise<'exited' | 'deadline'> => {
      let interval = 20;
      while (!finished) {
        const state = await running.inspect();
        // Right after the start, under load, the daemon can report an exec as not running
        // with no exit code: it has not started yet. Only an exit code means it ended.
        if (!state.running && state.exitCode !== null) {
          exit.code = state.exitCode;
          return 'exited';
        }
        if (Date.now() >= deadline) return 'deadline';
        await (streamDone ? sleep(interval) : Promise.race([sleep(interval), running.streamEnded]));
        interval = Math.min(interval * 2, 250);
      }
      return 'exited';
    };

    try {
      const first = await Promise.race([waitForExit(), abortPromise]);
      if (first === 'aborted') {
        aborted = true;
      } else if (first === 'deadline') {
        hostTimedOut = true;
      } else {
        // Give the daemon a moment to flush what the command wrote before it exited.
        await Promise.race([running.streamEnded, sleep(300)]);
      }
    } finally {
      finished = true;
      running.detach();
    }
    if (aborted || hostTimedOut) {
      await this.killExecTree(token);
      if (aborted) throw new Interrupted('command interrupted');
    }
    const durationMs = Date.now() - started;
    const code = exit.code ?? 137;
    // GNU timeout exits 124 after TERM, 137 when it had to KILL.
    const timedOut = hostTimedOut || ((code === 124 || code === 137) && durationMs >= timeoutSec * 1000 - 50);
    return {
      exitCode: code,
      stdout: stdout.text(),
      stderr: stderr.text(),
      timedOut,
      truncated: stdout.truncated || stderr.truncated,
      durationMs,
    };
  }

  private async killExecTree(token: string): Promise<void> {
    const pidFile = `/tmp/.sandbox-harness-exec-${token}/pid`;
    // dash's kill takes no `--`; a negative pid right after the signal names the group.
    const script = `p=$(cat ${pidFile} 2>/dev/null); if [ -n "$p" ]; then kill -KILL -"$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; fi; true`;
    try {
      const killer = await this.engine.startExec(this.id, {
        cmd: ['/bin/sh', '-c', script],
        user: USER,
        workingDir: '/',
        env: [],
        stdout: new CappedOutput(1024),
        stderr: new CappedOutput(1024),
      });
      await Promise.race([killer.streamEnded, sleep(5000)]);
      killer.detach();
    } catch (error) {
      if (!(error instanceof SandboxDead)) throw error;
    }
  }

  async readFile(path: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const absolute = toWorkspacePath(path);
    const maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    const stream = await this.engine.getArchive(this.id, absolute);
    if (!stream) throw new SandboxFileError(`${path}: no such file`);
    const { entries, refused } = await readTarSafely(stream, {
      maxFileBytes: maxBytes,
      maxTotalBytes: maxBytes,
    });
    const base = posix.basename(absolute);
    const own = refused.find((r) => r.name === base);
    if (own) throw new SandboxFileError(`${path}: ${own.reason}`);
    const entry = entries.find((e) => e.name === base);
    if (!entry) throw new SandboxFileError(`${path}: no such file`);
    if (entry.type === 'directory') throw new SandboxFileError(`${path}: is a directory, not a file`);
    return entry.content ?? Buffer.alloc(0);
  }

  async writeFile(path: string, content: Buffer | string, options: WriteOptions = {}): Promise<void> {
    const absolute = toWorkspacePath(path);
    if (absolute === WORKSPACE || absolute === '/') throw new SandboxFileError(`${path}: not a file path`);
    const parent = posix.dirname(absolute);
    const tar = await packTar([
      {
        name: posix.basename(absolute),
        type: 'file',
        content: Buffer.from(content),
        mode: options.mode ?? 0o644,
        owner: options.owner ?? 'sandbox',
      },
    ]);
    if (await this.engine.putArchive(this.id, parent, tar)) return;
    // The parent folder is missing: create it as the sandbox user, so ownership is right.
    const made = await this.exec(`mkdir -p -- ${shellQuote(parent)}`, { timeoutMs: 10_000 });
    if (made.exitCode !== 0) {
      throw new SandboxFileError(`${path}: cannot create folder ${parent}: ${made.stderr.trim()}`);
    }
    if (!(await this.engine.putArchive(this.id, parent, tar))) {
      throw new SandboxFileError(`${path}: folder ${parent} could not be created`);
    }
  }

  async listFiles(path = '.', options: { maxEntries?: number } = {}): Promise<FileEntry[]> {
    const max = options.maxEntries ?? 5000;
    const absolute = toWorkspacePath(path);
    const command =
      `find ${shellQuote(absolute)} \\( -name .git -o -name node_modules \\) -prune -o ` +
      `-mindepth 1 -printf '%y\\t%s\\t%p\\n' 2>/dev/null | head -n ${max}`;
    const result = await this.exec(command, { timeoutMs: 30_000, maxOutputBytes: 4 * 1024 * 1024 });
    const entries: FileEntry[] = [];
    for (const line of result.stdout.split('\n')) {
      const [kind, size, full] = line.split('\t');
      if (!kind || size === undefined || !full) continue;
      const rel = relativeToWorkspace(full);
      if (rel === undefined) continue;
      const type = kind === 'f' ? 'file' : kind === 'd' ? 'directory' : kind === 'l' ? 'symlink' : 'other';
      entries.push({ path: rel, type, size: Number(size) });
    }
    return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  async changes(): Promise<PathChange[]> {
    const raw = await this.engine.containerChanges(this.id);
    const under = raw
      .map((c) => ({ path: relativeToWorkspace(c.path), kind: c.kind }))
      .filter((c): c is PathChange => c.path !== undefined && c.path !== '');
    const paths = under.map((c) => c.path);
    // The daemon also reports the folders that contain a change; those are not changes.
    const isAncestor = (p: string) => paths.some((other) => other.startsWith(`${p}/`));
    return under
      .filter((c) => c.kind === 'deleted' || !isAncestor(c.path))
      .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  async exportFiles(paths: string[], limits: ExportLimits = {}): Promise<ExportResult> {
    const caps = {
      maxFileBytes: limits.maxFileBytes ?? 5 * 1024 * 1024,
      maxTotalBytes: limits.maxTotalBytes ?? 50 * 1024 * 1024,
    };
    const result: ExportResult = { files: [], directories: [], refused: [] };
    let total = 0;
    for (const path of paths) {
      const absolute = toWorkspacePath(path);
      const rel = relativeToWorkspace(absolute);
      if (rel === undefined) {
        result.refused.push({ path, reason: 'outside the workspace' });
        continue;
      }
      const stream = await this.engine.getArchive(this.id, absolute);
      if (!stream) {
        result.refused.push({ path: rel, reason: 'no longer exists' });
        continue;
      }
      const read = await readTarSafely(stream, {
        maxFileBytes: caps.maxFileBytes,
        maxTotalBytes: Math.max(0, caps.maxTotalBytes - total),
      });
      const parent = posix.dirname(rel);
      const toRel = (name: string) => (parent === '.' ? name : posix.join(parent, name));
      for (const refusal of read.refused)
        result.refused.push({ path: toRel(refusal.name), reason: refusal.reason });
      for (const entry of read.entries) {
        if (entry.type === 'directory') {
          result.directories.push(toRel(entry.name));
        } else {
          total += entry.content?.length ?? 0;
          result.files.push({
            path: toRel(entry.name),
            content: entry.content ?? Buffer.alloc(0),
            mode: entry.mode,
          });
        }
      }
    }
    await this.refuseHardLinks(result);
    return result;
  }

  /**
   * A single-path archive shows a hard link as a regular file, so the link count is asked
   * of the container. Lying can only make us refuse more, never accept a link.
   */
  private async refuseHardLinks(result: ExportResult): Promise<void> {
    if (result.files.length === 0) return;
    const absolute = result.files.map((f) => toWorkspacePath(f.path));
    const check = await this.exec(
      `find ${shellJoin(absolute)} -maxdepth 0 -type f -links +1 -print 2>/dev/null; true`,
      {
        timeoutMs: 30_000,
        maxOutputBytes: 1024 * 1024,
      },
    );
    const linked = new Set(
      check.stdout
        .split('\n')
        .filter(Boolean)
        .map((p) => relativeToWorkspace(p)),
    );
    if (linked.size === 0) return;
    result.files = result.files.filter((file) => {
      if (!linked.has(file.path)) return true;
      result.refused.push({ path: file.path, reason: 'a hard link (it shares its data with another file)' });
      return false;
    });
  }

  async isAlive(): Promise<boolean> {
    const details = await this.engine.inspectContainer(this.id);
    return details?.running ?? false;
  }

  async dispose(options: { keep?: boolean } = {}): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    if (!options.keep) {
      await this.engine.removeContainer(this.id);
      return;
    }
    // Kept for `inspect` and `shell`: stopped to free its memory and pids, renamed so the
    // orphan reaper leaves it alone (labels cannot change after creation).
    await this.engine.stopContainer(this.id);
    const details = await this.engine.inspectContainer(this.id);
    if (details && !details.name.startsWith(KEPT_NAME_PREFIX)) {
      await this.engine.renameContainer(
        this.id,
        `${KEPT_NAME_PREFIX}${details.name.replace(/^sandbox-harness-/, '')}`,
      );
    }
  }
}

function injectedTar(spec: SandboxSpec): Promise<Buffer> {
  const entries: TarInput[] = [];
  const seenDirs = new Set<string>();
  for (const file of spec.files ?? []) {
    const absolute = posix.normalize(file.path);
    if (!posix.isAbsolute(absolute))
      throw new SandboxFileError(`injected file ${file.path}: path must be absolute`);
    const owner = file.owner ?? 'root';
    if (!absolute.startsWith(`${WORKSPACE}/`)) {
      // Folders outside the workspace are created root-owned, so the sandbox user cannot
      // replace what is injected there.
      const parts = posix.dirname(absolute).split('/').filter(Boolean);
      for (let i = 1; i <= parts.length; i++) {
        const dir = parts.slice(0, i).join('/');
        if (seenDirs.has(dir) || ['etc', 'usr', 'opt', 'var'].includes(dir)) continue;
        seenDirs.add(dir);
        entries.push({ name: `${dir}/`, type: 'directory', mode: 0o755, owner: 'root' });
      }
    }
    entries.push({
      name: absolute.slice(1),
      type: 'file',
      content: Buffer.from(file.content),
      mode: file.mode ?? (owner === 'root' ? 0o444 : 0o644),
      owner,
    });
  }
  return packTar(entries);
}

export class DockerBackend implements SandboxBackend {
  readonly name = 'docker';
  private reaped = false;

  constructor(private readonly engine: DockerEngine = dockerEngine()) {}

  async create(spec: SandboxSpec): Promise<Sandbox> {
    if (!this.reaped) {
      this.reaped = true;
      await reapOrphans(this.engine);
    }
    const resources = { ...DEFAULT_RESOURCES, ...spec.resources };
    const env = [...BASE_ENV, ...envList(spec.env)];
    const labels = containerLabels({
      runId: spec.runId,
      role: spec.role,
      keep: spec.extraLabels?.['sandbox-harness.keep'],
      extra: spec.extraLabels,
    });
    const id = await this.engine.createContainer({
      name: containerName(spec.runId, spec.role),
      image: spec.image,
      cmd: ['sleep', 'infinity'],
      user: `${SANDBOX_UID}:${SANDBOX_GID}`,
      workingDir: WORKSPACE,
      env,
      labels,
      memoryBytes: resources.memoryBytes,
      nanoCpus: Math.round(resources.cpus * 1e9),
      pids: resources.pids,
      maxFileBytes: resources.maxFileBytes,
      tmpfsBytes: resources.tmpfsBytes,
      nofile: 4096,
    });
    try {
      if (spec.files && spec.files.length > 0) {
        await this.engine.putArchive(id, '/', await injectedTar(spec));
      }
      await this.engine.startContainer(id);
    } catch (error) {
      // Never leave a half-made container behind.
      await this.engine.removeContainer(id).catch(() => undefined);
      throw error;
    }
    return new DockerSandbox(this.engine, id, spec.image, labels, env);
  }

  /** Re-attaches to an existing (e.g. kept) container, starting it if it was stopped. */
  async attach(containerId: string): Promise<DockerSandbox> {
    const details = await this.engine.inspectContainer(containerId);
    if (!details) throw new SandboxDead(`container ${containerId.slice(0, 12)} no longer exists`);
    if (!details.running) await this.engine.startContainer(containerId);
    const env = details.env.filter((e) => !e.startsWith('PATH='));
    return new DockerSandbox(this.engine, details.id, details.image, details.labels, env);
  }

  /** Stops a kept container again after `inspect`, `shell` or `rerun-tests` used it. */
  async release(containerId: string): Promise<void> {
    await this.engine.stopContainer(containerId);
  }

  /** State of a container for `inspect`: running, exited, or gone. */
  async state(
    containerId: string,
  ): Promise<{ exists: boolean; running: boolean; status: string; name?: string }> {
    const details = await this.engine.inspectContainer(containerId);
    if (!details) return { exists: false, running: false, status: 'removed' };
    return { exists: true, running: details.running, status: details.status, name: details.name };
  }

  /** An interactive shell in a kept container, as the sandbox user, still without network. */
  async interactiveShell(
    containerId: string,
    io: { stdin: NodeJS.ReadStream; stdout: NodeJS.WriteStream },
    command: string[] = ['/bin/bash', '-l'],
  ): Promise<number> {
    const sandbox = await this.attach(containerId);
    const shell =
      (await sandbox.exec('command -v bash', { timeoutMs: 10_000 })).exitCode === 0 ? command : ['/bin/sh'];
    return this.engine.attachInteractive(
      sandbox.id,
      {
        cmd: shell,
        user: `${SANDBOX_UID}:${SANDBOX_GID}`,
        workingDir: WORKSPACE,
        env: ['TERM=xterm-256color'],
      },
      io,
    );
  }
}

let backend: DockerBackend | undefined;

export function dockerBackend(): DockerBackend {
  backend ??= new DockerBackend();
  return backend;
}
