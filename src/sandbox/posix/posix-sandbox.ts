/**
 * The `Sandbox` contract built once on top of "start a process inside": commands, file
 * reads and writes that never follow a link, listings, the change scan, the one-stream
 * export and the freeze all run as the sandbox user through the harness's own scripts. A
 * backend extends this with its transport and its lifecycle (alive, dispose).
 */
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { abortError, HarnessError, SandboxDead, SandboxFileError, UsageError } from '../../errors.js';
import { packTar, readTarSafely } from '../tar.js';
import {
  WORKSPACE,
  type ChangeScan,
  type ChangeScanLimits,
  type ExecOptions,
  type ExecResult,
  type ExportLimits,
  type ExportResult,
  type FileCallOptions,
  type FileEntry,
  type Sandbox,
  type SandboxProcess,
  type SpawnOptions,
  type WorkspaceTree,
  type WriteFile,
} from '../types.js';
import { ChannelLost, CommandChannel } from './channel.js';
import {
  killTree,
  runCommand,
  runScript,
  SCRIPT_ENV,
  type ScriptOptions,
  type ScriptResult,
  type StandbyScript,
} from './exec.js';
import { shellJoin } from '../shell.js';
import { fileProblem } from './file-problems.js';
import { workspaceRelative } from './paths.js';
import { changesFromScan, parseScan, type ParsedScan } from './scan.js';
import {
  EXPORT_SCRIPT,
  FREEZE_SCRIPT,
  HIDE_SCRIPT,
  SURVIVORS_SCRIPT,
  LIST_SCRIPT,
  READ_SCRIPT,
  SCAN_SCRIPT,
  WRITE_SCRIPT,
} from './scripts.js';
import type { Transport } from './transport.js';
import { SURVIVOR_WATCH_TRIES, SURVIVORS_OPTIONS, survivorsVerdict, watchSurvivors } from './survivors.js';

export const DEFAULT_SCAN_ENTRIES = 100_000;
/** Files per write script: keeps every command line far below the kernel's argument limits. */
const WRITE_BATCH = 100;
const DEFAULT_EXPORT = { maxFileBytes: 5 * 1024 * 1024, maxTotalBytes: 50 * 1024 * 1024 };
/** Most bytes of arguments a script is given over the command channel (its line is one `sh -c` argument). */
const MAX_CHANNEL_ARGS_BYTES = 64 * 1024;
/** Most input a call hands over through the command channel (it passes through the sandbox's /tmp). */
const CHANNEL_INPUT_BYTES = 1024 * 1024;

export interface PosixSandboxOptions {
  id: string;
  image: string;
  labels: Readonly<Record<string, string>>;
  /** Variables every command sees (built by the backend from the spec, never from the host). */
  env: readonly string[];
  transport: Transport;
  /** The image's pristine workspace, for telling deletions and kinds apart. */
  tree: () => Promise<WorkspaceTree>;
  /** Workspace paths removed before anything ran (held-out files). */
  hidden?: readonly string[];
}

/**
 * Exit codes of a command that may have died with its sandbox: SIGKILL, SIGTERM, the engine's
 * "unknown" (-1/255), and the runtime failing to start it at all (125-127: a sandbox killed
 * while the exec was being set up answers 126, "OCI runtime exec failed ... broken pipe").
 * A live sandbox's own 126/127 (not executable, not found) costs one probe to tell apart.
 */
const KILLED_CODES: ReadonlySet<number> = new Set([125, 126, 127, 137, 143, 255, -1]);
/**
 * How long a sandbox may take to be seen stopped after its command was killed with it: the
 * engine marks it stopped only once it has handled its init's exit, seconds later on a loaded
 * host. A probe that runs in it ends the wait early, as proof that it lives.
 */
const KILL_SETTLE_MS = 15_000;
const PROBE_TIMEOUT_MS = 5000;
/** How long a spawned process's exit may take to be seen after its tree was killed. */
const KILL_EXIT_WAIT_MS = 5000;

function errorText(value: unknown): string {
  return value instanceof Error ? value.message : String(value);
}

export abstract class PosixSandbox implements Sandbox {
  readonly id: string;
  readonly image: string;
  readonly labels: Readonly<Record<string, string>>;
  protected readonly transport: Transport;
  private readonly env: readonly string[];
  private readonly tree: () => Promise<WorkspaceTree>;
  private readonly hidden: ReadonlySet<string>;
  /** The fast path for `fast` commands: opened on first use, given up for good when it fails. */
  private channel: Promise<CommandChannel | undefined> | undefined;
  /**
   * Root's look for the freeze, started ahead (`watchFreeze`: with an agent's channel, whose
   * sandbox ends in a freeze, or beside tests a freeze follows), so the freeze does not wait
   * for its exec round trip.
   */
  private freezeCheck: Promise<StandbyScript | undefined> | undefined;
  /** False once `startChannel({ freezeWatch: false })` opened the channel without that look. */
  private watchOnChannel = true;

  constructor(options: PosixSandboxOptions) {
    this.id = options.id;
    this.image = options.image;
    this.labels = options.labels;
    this.transport = options.transport;
    this.env = options.env;
    this.tree = options.tree;
    this.hidden = new Set(options.hidden ?? []);
  }

  abstract isAlive(): Promise<boolean>;
  abstract dispose(options?: { keep?: boolean }): Promise<void>;

  /** Hook for a backend that can tell a more precise cause of death (e.g. the disk budget). */
  protected async checkUsable(): Promise<void> {}

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    await this.checkUsable();
    const channelFits =
      options.fast === true &&
      (options.env === undefined || Object.keys(options.env).length === 0) &&
      (options.cwd === undefined || options.cwd === WORKSPACE || options.cwd === '.');
    if (channelFits) {
      const channel = await this.openChannel();
      if (channel?.usable) {
        try {
          return await this.guard(() =>
            channel.run(command, options, (token) => killTree(this.transport, token)),
          );
        } catch (error) {
          if (!(error instanceof ChannelLost)) throw error;
          // The command may or may not have run; running it again could do it twice.
          await this.throwIfStopped(options.signal, 'a command ran');
          return {
            exitCode: 125,
            stdout: '',
            stderr: `sandbox-harness: ${error.message} while the command ran (was it killed?); it may or may not have completed\n`,
            timedOut: false,
            truncated: false,
            durationMs: 0,
          };
        }
      }
    }
    const result = await this.guard(() => runCommand(this.transport, this.env, command, options));
    // A command killed with its whole sandbox exits like one killed alone (137, or the
    // engine's -1/255): only the sandbox's state tells them apart, and a dead sandbox is an
    // error, never a command's (or a test run's) result.
    // A command this side timed out was killed by us, its sandbox still there: no need to ask.
    if (KILLED_CODES.has(result.exitCode) && !result.timedOut) {
      await this.throwIfStopped(options.signal, 'a command ran');
    }
    return result;
  }

  /** Raises SandboxDead (or the backend's more precise cause) if the sandbox stopped while `doing`. */
  private async throwIfStopped(signal: AbortSignal | undefined, doing: string): Promise<void> {
    if (!(await this.diedWithCommand(signal))) return;
    await this.checkUsable();
    throw new SandboxDead(`sandbox ${this.id.slice(0, 12)} stopped while ${doing}`);
  }

  /**
   * Whether the sandbox stopped with a command that exited like a kill. The command's stream
   * ends the moment its processes die, before the engine marks the sandbox stopped (seen
   * here: the exec answered 137 while the engine still said running, for over a second under
   * load), so the engine's word "running" is not believed: a probe command must run in it
   * and answer. A sandbox whose processes all died cannot run one; the engine's "stopped"
   * arrives while the probes fail.
   */
  private async diedWithCommand(signal: AbortSignal | undefined): Promise<boolean> {
    const until = Date.now() + KILL_SETTLE_MS;
    let pause = 50;
    for (;;) {
      // Ctrl-C is honoured at once, not after the wait.
      if (signal?.aborted) throw abortError(signal);
      if (!(await this.isAlive())) return true;
      if (await this.answersProbe(signal)) return false;
      if (Date.now() >= until) return !(await this.isAlive());
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, pause);
        signal?.addEventListener('abort', done, { once: true });
      });
      pause = Math.min(pause * 2, 500);
    }
  }

  /** Whether a fresh command runs in the sandbox and says so (any failure: no proof). */
  private async answersProbe(signal: AbortSignal | undefined): Promise<boolean> {
    const word = randomBytes(6).toString('hex');
    try {
      const result = await runScript(this.transport, 'echo "$1"', [word], {
        maxStdoutBytes: 64,
        timeoutMs: PROBE_TIMEOUT_MS,
        ...(signal ? { signal } : {}),
      });
      return result.exitCode === 0 && result.stdout.toString().trim() === word;
    } catch {
      return false;
    }
  }

  /**
   * Starts the command channel now (an agent's calls come soon), and root's look for the
   * freeze unless `freezeWatch` is false; their outcomes show on use.
   */
  startChannel(options: { freezeWatch?: boolean } = {}): void {
    if (this.channel === undefined && options.freezeWatch === false) this.watchOnChannel = false;
    void this.openChannel();
  }

  /**
   * Starts root's look for the freeze now (one exec, as root, waiting for its word), so a
   * freeze does not wait for it. A sandbox that is never frozen (a verification whose tests
   * alone decide) never pays for it.
   */
  watchFreeze(): void {
    this.freezeCheck ??= watchSurvivors(this.transport);
  }

  /**
   * Removes the held-out files, as the sandbox user, before anything else runs in the
   * sandbox: the backend calls it right after the start. With `channel` over the command
   * channel (its first command, which it starts): nothing of the agent has run yet, so no
   * process could forge its answer, and the channel's start-up is paid once instead of
   * beside a separate exec. Throws when a file could not be removed.
   */
  async removeHidden(channel: boolean): Promise<void> {
    if (this.hidden.size === 0) return;
    const paths = [...this.hidden];
    const options = { maxStdoutBytes: 1024, timeoutMs: 60_000 };
    let result = await this.script(HIDE_SCRIPT, paths, { ...options, fast: channel });
    // `rm -rf` may run twice: a channel that failed it for its own reasons leaves the exec to try.
    if (channel && result.exitCode !== 0) result = await this.script(HIDE_SCRIPT, paths, options);
    if (result.exitCode !== 0) {
      throw new SandboxDead(`could not remove the held-out files from the sandbox: ${result.stderr.trim()}`);
    }
  }

  /**
   * The channel, started on first use (by `startChannel` or a `fast` call) with root's look
   * for the freeze beside it: a sandbox with a channel is an agent's, which ends in a freeze,
   * unless `startChannel` said otherwise.
   */
  private openChannel(): Promise<CommandChannel | undefined> {
    if (this.channel !== undefined) return this.channel;
    this.channel = CommandChannel.open(this.transport).catch(() => undefined);
    if (this.watchOnChannel) this.watchFreeze();
    return this.channel;
  }

  /**
   * Stops the command channel, if one runs, and root's look waiting for the freeze (after a
   * freeze, and when the sandbox goes).
   */
  protected async closeChannel(): Promise<void> {
    const [channel, check] = await Promise.all([this.channel, this.freezeCheck]);
    channel?.close();
    check?.cancel();
  }

  async spawn(argv: readonly string[], options: SpawnOptions): Promise<SandboxProcess> {
    await this.checkUsable();
    // The token names its tree for `kill`, as the exec wrapper's does for a command: even a
    // child that left its process group is found by it.
    const token = randomBytes(8).toString('hex');
    const extra = Object.entries(options.env ?? {}).map(([name, value]) => `${name}=${value}`);
    const started = await this.guard(() =>
      this.transport.start({
        argv: [...argv],
        cwd: WORKSPACE,
        env: [...this.env, ...extra, `SANDBOX_HARNESS_EXEC=${token}`],
        stdin: 'stream',
        stdout: options.stdout,
        stderr: options.stderr,
      }),
    );
    const input = started.input;
    if (!input) {
      started.detach();
      throw new UsageError(`the ${this.constructor.name} backend cannot keep a process's stdin open`);
    }
    // A write after the process ended fails on the stream; the caller learns it from `exited`.
    input.on('error', () => undefined);
    const exited = started.exited.catch(() => -1);
    let detached!: () => void;
    const gone = new Promise<number>((resolve) => (detached = () => resolve(-1)));
    let killed: Promise<void> | undefined;
    return {
      input,
      // A transport that stops following stops telling the end: a detached process has ended
      // as far as its caller can know (-1), never a promise that waits forever.
      exited: Promise.race([exited, gone]),
      kill: () =>
        (killed ??= killTree(this.transport, token)
          .catch(() => undefined)
          // The tree is killed; its exit is told before the transport lets go (bounded).
          .then(() => Promise.race([exited, delay(KILL_EXIT_WAIT_MS, undefined, { ref: false })]))
          .finally(() => {
            started.detach();
            detached();
          })
          .then(() => undefined)),
    };
  }

  async readFile(path: string, options: FileCallOptions & { maxBytes?: number } = {}): Promise<Buffer> {
    const rel = workspaceRelative(path);
    const maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    const result = await this.script(READ_SCRIPT, [rel, String(maxBytes)], {
      maxStdoutBytes: maxBytes,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.fast ? { fast: true } : {}),
    });
    this.throwFileProblem(result, path);
    if (result.stdoutOverflowed) throw new SandboxFileError(`${path}: grew past the read limit`, 'too-large');
    return result.stdout;
  }

  async writeFiles(files: readonly WriteFile[], options: FileCallOptions = {}): Promise<void> {
    for (let start = 0; start < files.length; start += WRITE_BATCH) {
      const batch = files.slice(start, start + WRITE_BATCH);
      const args: string[] = [randomBytes(6).toString('hex')];
      for (const file of batch) {
        const rel = workspaceRelative(file.path);
        // No mode: the file's own (see WRITE_SCRIPT). Never a setuid, setgid or sticky bit.
        args.push(file.mode === undefined ? 'keep' : (file.mode & 0o777).toString(8), rel);
      }
      const tar = await packTar(
        batch.map((file, index) => ({
          name: String(index),
          type: 'file' as const,
          content: Buffer.from(file.content),
          mode: 0o600,
          owner: 'sandbox' as const,
        })),
      );
      const result = await this.script(WRITE_SCRIPT, args, {
        maxStdoutBytes: 1024,
        stdin: tar,
        timeoutMs: 120_000,
        ...(options.signal ? { signal: options.signal } : {}),
        // The channel hands input over through the sandbox's /tmp: small writes only.
        ...(options.fast && tar.length <= CHANNEL_INPUT_BYTES ? { fast: true } : {}),
      });
      this.throwFileProblem(result, batch.length === 1 ? batch[0]!.path : 'writing files');
    }
  }

  async listFiles(path = '.', options: FileCallOptions & { maxEntries?: number } = {}): Promise<FileEntry[]> {
    const rel = path === '.' || path === '' || path === WORKSPACE ? '.' : workspaceRelative(path);
    const max = options.maxEntries ?? 5000;
    const result = await this.script(LIST_SCRIPT, [rel, String(max)], {
      maxStdoutBytes: 16 * 1024 * 1024,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.fast ? { fast: true } : {}),
    });
    this.throwFileProblem(result, path);
    const entries: FileEntry[] = [];
    for (const record of result.stdout.toString('utf8').split('\0')) {
      const [kind, size, ...rest] = record.split('\t');
      const name = rest.join('\t');
      if (!kind || size === undefined || name === '') continue;
      const type = kind === 'f' ? 'file' : kind === 'd' ? 'directory' : kind === 'l' ? 'symlink' : 'other';
      entries.push({ path: rel === '.' ? name : `${rel}/${name}`, type, size: Number(size) });
    }
    return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  /**
   * A backend's own way to list what changed without running anything in the sandbox (the
   * same records the scan script prints), or undefined to use the script.
   */
  protected async hostScan(_maxRecords: number): Promise<ParsedScan | undefined> {
    return undefined;
  }

  /**
   * A backend's own way to read changed files without running anything in the sandbox, with
   * the export's refusals and caps, or undefined to use the export script.
   */
  protected async hostExport(
    _paths: readonly string[],
    _caps: { maxFileBytes: number; maxTotalBytes: number },
  ): Promise<ExportResult | undefined> {
    return undefined;
  }

  async changes(limits: ChangeScanLimits = {}): Promise<ChangeScan> {
    const max = limits.maxEntries ?? DEFAULT_SCAN_ENTRIES;
    await this.checkUsable();
    if (limits.signal?.aborted) throw abortError(limits.signal);
    const [fastTree, fast] = await Promise.all([this.tree(), this.hostScan(max)]);
    if (fast) return changesFromScan(fast, fastTree, max, this.hidden);
    const [tree, result] = await Promise.all([
      this.tree(),
      this.script(SCAN_SCRIPT, [String(max + 1)], {
        // A record is a few dozen bytes plus its path; past this the scan is incomplete anyway.
        maxStdoutBytes: 64 * 1024 * 1024,
        maxStderrBytes: 64 * 1024 * 1024,
        timeoutMs: 120_000,
        ...(limits.signal ? { signal: limits.signal } : {}),
      }),
    ]);
    if (result.exitCode !== 0) {
      throw new HarnessError(
        'SANDBOX_SCAN',
        'internal',
        `the change scan failed in sandbox ${this.id.slice(0, 12)} (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`,
        { hint: 'The sandbox image needs GNU findutils, coreutils and tar.' },
      );
    }
    const scan = changesFromScan(
      parseScan(Buffer.concat([result.stdout, result.stderrBytes])),
      tree,
      max,
      this.hidden,
    );
    return result.stdoutOverflowed || result.stderrOverflowed ? { ...scan, complete: false } : scan;
  }

  async exportFiles(paths: readonly string[], limits: ExportLimits = {}): Promise<ExportResult> {
    const caps = {
      maxFileBytes: limits.maxFileBytes ?? DEFAULT_EXPORT.maxFileBytes,
      maxTotalBytes: limits.maxTotalBytes ?? DEFAULT_EXPORT.maxTotalBytes,
    };
    const result: ExportResult = { files: [], refused: [] };
    const wanted = new Set<string>();
    for (const path of paths) {
      try {
        wanted.add(workspaceRelative(path));
      } catch {
        result.refused.push({ path, kind: 'invalid-path', reason: 'not a plain path inside the workspace' });
      }
    }
    if (wanted.size === 0) return result;
    await this.checkUsable();
    if (limits.signal?.aborted) throw abortError(limits.signal);
    const fromHost = await this.hostExport([...wanted], caps);
    if (fromHost) {
      result.files.push(...fromHost.files);
      result.refused.push(...fromHost.refused);
      return result;
    }
    const stream = new PassThrough();
    // The archive is parsed as it arrives; a stream past every cap is cut, not buffered.
    const limit = caps.maxTotalBytes + caps.maxFileBytes + (wanted.size + 2) * 1536;
    let seen = 0;
    const guard = new PassThrough();
    guard.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > limit) guard.destroy(new Error('export stream over its cap'));
      else stream.write(chunk);
    });
    guard.on('end', () => stream.end());
    guard.on('error', () => stream.end());
    // A cut or broken archive refuses what it did not deliver; it is not an error of the run.
    const parsed = readTarSafely(stream, caps).catch(() => ({ entries: [], refused: [] }));
    const run = this.script(EXPORT_SCRIPT, [], {
      maxStdoutBytes: 0,
      stdout: guard,
      stdin: Buffer.from(`${[...wanted].join('\0')}\0`),
      timeoutMs: 120_000,
      ...(limits.signal ? { signal: limits.signal } : {}),
    });
    const [read] = await Promise.all([
      parsed,
      run.then(
        (result) => {
          guard.end();
          return result;
        },
        (error: unknown) => {
          guard.end();
          throw error;
        },
      ),
    ]);
    const answered = new Set<string>();
    for (const record of (await run).stderr.split('\0')) {
      if (!record.startsWith('H\t')) continue;
      const path = record.slice(2);
      if (!wanted.has(path) || answered.has(path)) continue;
      answered.add(path);
      result.refused.push({
        path,
        kind: 'hard-link',
        reason: 'a hard link (it shares its data with another file)',
      });
    }
    for (const refusal of read.refused) {
      if (!wanted.has(refusal.name)) continue;
      answered.add(refusal.name);
      result.refused.push({ path: refusal.name, kind: refusal.kind, reason: refusal.reason });
    }
    for (const entry of read.entries) {
      if (!wanted.has(entry.name) || answered.has(entry.name)) continue;
      answered.add(entry.name);
      if (entry.type === 'directory') {
        result.refused.push({ path: entry.name, kind: 'directory', reason: 'a folder, not a file' });
      } else {
        result.files.push({ path: entry.name, content: entry.content ?? Buffer.alloc(0), mode: entry.mode });
      }
    }
    if (seen > limit) {
      for (const file of result.files.splice(0)) answered.delete(file.path);
      for (const path of wanted) {
        if (!answered.has(path)) {
          answered.add(path);
          result.refused.push({ path, kind: 'over-total', reason: 'the export passed its total cap' });
        }
      }
    }
    for (const path of wanted) {
      if (!answered.has(path)) result.refused.push({ path, kind: 'missing', reason: 'no longer exists' });
    }
    return result;
  }

  async freeze(options: { signal?: AbortSignal } = {}): Promise<void> {
    // The freeze runs as the sandbox user (only it may signal that user's processes), so a
    // process of that user could fool it: root looks at what is left, which none of them
    // can trace or signal. It watches until nothing of that user runs (the freeze script
    // included). Started with the channel when there is one (else now, beside the freeze),
    // so the freeze does not wait for its exec.
    const watched = this.survivors(SURVIVOR_WATCH_TRIES, options.signal, await this.freezeCheck).catch(
      (error: unknown) => error,
    );
    let failed: string | undefined;
    try {
      failed = await this.stopProcesses(options.signal);
    } catch (error) {
      await watched;
      await this.closeChannel();
      throw error;
    }
    const left = await watched;
    // The freeze stops the channel's processes with every other; nothing more may use it.
    // Not before root's look: the freeze may still be on its way to the sandbox over it.
    await this.closeChannel();
    if (failed === undefined) {
      if (left === undefined) return;
      if (left instanceof Error && !(left instanceof SandboxDead)) throw left;
      failed = `processes of the sandbox user survived the freeze (${errorText(left)})`;
    }
    await this.hardFreeze(failed);
    await this.confirmFrozen(options.signal);
  }

  /**
   * Runs the freeze script as the sandbox user: undefined once it is under way or done, else
   * why the backend's hard freeze must do it. Its word is never the verdict (root's look is).
   */
  private async stopProcesses(signal: AbortSignal | undefined): Promise<string | undefined> {
    const channel = await this.channel;
    if (channel?.idle) {
      // An idle command channel runs it without an exec round trip. The script stops the
      // channel's own processes too, so no answer comes back, and none is awaited: if it does
      // not stop everything, root's look never clears and the hard freeze follows.
      void channel
        .script(
          this.channelCommand(FREEZE_SCRIPT, []),
          { maxStdoutBytes: 1024, timeoutMs: 30_000 },
          (token) => killTree(this.transport, token),
        )
        .catch(() => undefined);
      return undefined;
    }
    await this.closeChannel();
    let result: ScriptResult;
    try {
      result = await this.script(FREEZE_SCRIPT, [], {
        maxStdoutBytes: 1024,
        cwd: '/',
        timeoutMs: 30_000,
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      // Stopped already (its processes all died): starting it again gives the frozen state.
      if (!(error instanceof SandboxDead)) throw error;
      return 'the sandbox had stopped';
    }
    if (result.exitCode !== 0 || !/^frozen \d+$/m.test(result.stdout.toString('utf8'))) {
      return `the freeze script failed (exit ${result.exitCode}: ${result.stderr.trim()})`;
    }
    return undefined;
  }

  /** After a hard freeze: one more look as root; a sandbox that is still not clear is not read. */
  private async confirmFrozen(signal: AbortSignal | undefined): Promise<void> {
    const still = await this.survivors(1, signal);
    if (still !== undefined) {
      throw new SandboxDead(`the sandbox could not be frozen: ${still}; its change is not read`);
    }
  }

  /**
   * Undefined once no process of the sandbox user runs; else what runs, or why it cannot
   * tell. With `watch`, the check started with the channel, when it still waits.
   */
  private async survivors(
    tries: number,
    signal: AbortSignal | undefined,
    watch?: StandbyScript,
  ): Promise<string | undefined> {
    const check = watch?.waiting
      ? await watch.go(signal)
      : await this.script(SURVIVORS_SCRIPT, [String(tries)], {
          ...SURVIVORS_OPTIONS,
          ...(signal ? { signal } : {}),
        });
    return survivorsVerdict(check);
  }

  /**
   * The backend's own way to stop every process when the in-sandbox freeze could not (a
   * process fought it): Docker restarts the container. Must leave the files as they are.
   */
  protected abstract hardFreeze(reason: string): Promise<void>;

  /**
   * One of the harness's scripts: with `fast` (the agent's own file calls) over the command
   * channel when it runs, else one exec. A file call can safely run twice, so a channel lost
   * midway falls back to an exec.
   */
  private async script(
    script: string,
    args: readonly string[],
    options: ScriptOptions & { fast?: boolean },
  ): Promise<ScriptResult> {
    await this.checkUsable();
    const { fast, ...rest } = options;
    // The channel's command line is one argument of its shell (at most 128 KiB on Linux): long
    // arguments (many or long paths) go as an exec's own.
    const argsFit = args.reduce((sum, arg) => sum + Buffer.byteLength(arg) + 3, 0) <= MAX_CHANNEL_ARGS_BYTES;
    if (fast && argsFit && !rest.user && !rest.stdout && (rest.cwd === undefined || rest.cwd === WORKSPACE)) {
      const channel = await this.openChannel();
      if (channel?.usable) {
        try {
          return await this.guard(() =>
            channel.script(this.channelCommand(script, args), rest, (token) =>
              killTree(this.transport, token),
            ),
          );
        } catch (error) {
          if (!(error instanceof ChannelLost)) throw error;
        }
      }
    }
    const result = await this.guard(() => runScript(this.transport, script, args, rest));
    // The harness's own scripts (reads, writes, listings) meet a dying sandbox as commands do:
    // a read that "failed" with 126 or 137 there is the sandbox stopping, not a file problem.
    if (KILLED_CODES.has(result.exitCode))
      await this.throwIfStopped(options.signal, 'the harness worked in it');
    return result;
  }

  /** One of the harness's scripts as a command line for the channel, with the environment an exec gives it. */
  private channelCommand(script: string, args: readonly string[]): string {
    return `${SCRIPT_ENV.join(' ')} exec /bin/sh -c ${shellJoin([script, 'sandbox-harness', ...args])}`;
  }

  /** A backend error while the sandbox died for a reason the backend knows better (disk) becomes that reason. */
  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof SandboxDead) await this.checkUsable();
      throw error;
    }
  }

  private throwFileProblem(result: ScriptResult, path: string): void {
    if (result.exitCode !== 0) throw fileProblem(result, path);
  }
}
