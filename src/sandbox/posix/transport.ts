/**
 * What a backend must give the POSIX sandbox: a way to start a process inside the sandbox
 * and learn how it ended. Docker does it with `exec`; a Kubernetes backend would do it with
 * the exec subresource. Everything else (commands under limits, files, the change scan,
 * freezing) is built on top of this, once, in this folder.
 */
import type { Writable } from 'node:stream';

export interface ProcessSpec {
  argv: string[];
  /** Absolute working directory inside the sandbox. */
  cwd: string;
  /** `NAME=value` pairs; the backend adds nothing of the host's. */
  env: string[];
  /**
   * Bytes fed to the process's stdin, then end of file; `stream` keeps stdin open for
   * `StartedProcess.input`; without it stdin is closed at once.
   */
  stdin?: Buffer | 'stream';
  /** `root` only for the harness's own set-up steps; it has no capabilities either way. */
  user?: 'sandbox' | 'root';
  stdout: Writable;
  stderr: Writable;
}

export interface StartedProcess {
  /** The process's stdin, for a process started with `stdin: 'stream'`. */
  input?: NodeJS.WritableStream;
  /** Resolves with the exit code once the process has ended (never, after `detach`). */
  exited: Promise<number>;
  /** Resolves when the output streams closed: every byte has been written to the sinks. */
  streamEnded: Promise<void>;
  /** Stops following the process; it keeps running unless killed separately. */
  detach(): void;
}

export interface Transport {
  /** Throws `SandboxDead` when the sandbox is gone or stopped. */
  start(spec: ProcessSpec): Promise<StartedProcess>;
}
