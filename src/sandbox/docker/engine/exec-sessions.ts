/**
 * Processes started in a running container (`docker exec`): streamed, or bound to the
 * caller's terminal for `shell`. The exec's own state says when it ended (see ExecTransport).
 */
import type Docker from 'dockerode';
import type { Readable, Writable } from 'node:stream';
import { containerInPath } from './api-paths.js';
import { containerFailure } from './daemon-errors.js';

export interface ExecStartOptions {
  cmd: string[];
  user: string;
  workingDir: string;
  env: string[];
  /**
   * Written to the process's stdin, then end of file; or `stream` to keep stdin open and
   * write to it through `RunningExec.input` (a long-lived process serving requests).
   */
  stdin?: Buffer | 'stream' | undefined;
  stdout: Writable;
  stderr: Writable;
}

export interface RunningExec {
  /** Resolves when the daemon closes the output stream. */
  streamEnded: Promise<void>;
  /** The process's stdin, when it was started with `stdin: 'stream'`. */
  input?: NodeJS.WritableStream;
  inspect(): Promise<{ running: boolean; exitCode: number | null }>;
  /** Stops reading output (the process keeps running unless killed separately). */
  detach(): void;
}

export class EngineExec {
  constructor(
    private readonly docker: Docker,
    private readonly where: string | undefined,
  ) {}

  async start(id: string, options: ExecStartOptions): Promise<RunningExec> {
    const container = this.docker.getContainer(containerInPath(id));
    let exec: Docker.Exec;
    let stream: NodeJS.ReadWriteStream;
    try {
      exec = await container.exec({
        Cmd: options.cmd,
        User: options.user,
        WorkingDir: options.workingDir,
        Env: options.env,
        AttachStdin: options.stdin !== undefined,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
      });
      stream = (await exec.start({
        hijack: true,
        stdin: options.stdin !== undefined,
      })) as NodeJS.ReadWriteStream;
    } catch (error) {
      throw containerFailure(error, id, 'running a command in', this.where);
    }
    // Half-closes the connection after the bytes: the process reads them, then end of file.
    if (Buffer.isBuffer(options.stdin)) stream.end(options.stdin);
    this.docker.modem.demuxStream(stream, options.stdout, options.stderr);
    const readable = stream as unknown as Readable;
    // A connection that drops ends the stream like any other end; the exec's state then says
    // what happened (and a call to a gone engine is SandboxUnavailable), never an unhandled error.
    const streamEnded = new Promise<void>((resolve) => {
      readable.once('end', () => resolve());
      readable.once('close', () => resolve());
      readable.on('error', () => resolve());
    });
    return {
      streamEnded,
      ...(options.stdin === 'stream' ? { input: stream } : {}),
      inspect: async () => {
        try {
          const data = await exec.inspect();
          return { running: data.Running, exitCode: data.ExitCode };
        } catch (error) {
          throw containerFailure(error, id, 'inspecting a command in', this.where);
        }
      },
      detach: () => {
        readable.destroy();
      },
    };
  }

  /** Interactive exec with a TTY bound to the caller's terminal (for `shell`). */
  async attachInteractive(
    id: string,
    options: { cmd: string[]; user: string; workingDir: string; env: string[] },
    io: { stdin: NodeJS.ReadStream; stdout: NodeJS.WriteStream },
  ): Promise<number> {
    const container = this.docker.getContainer(containerInPath(id));
    try {
      const exec = await container.exec({
        Cmd: options.cmd,
        User: options.user,
        WorkingDir: options.workingDir,
        Env: options.env,
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: true,
      });
      const stream = (await exec.start({ hijack: true, stdin: true, Tty: true })) as NodeJS.ReadWriteStream;
      const resize = async () => {
        if (io.stdout.columns && io.stdout.rows) {
          await exec.resize({ h: io.stdout.rows, w: io.stdout.columns }).catch(() => undefined);
        }
      };
      const wasRaw = io.stdin.isTTY ? io.stdin.isRaw : false;
      if (io.stdin.isTTY) io.stdin.setRawMode(true);
      io.stdin.resume();
      io.stdin.pipe(stream);
      stream.pipe(io.stdout);
      await resize();
      io.stdout.on('resize', resize);
      await new Promise<void>((resolve) => {
        stream.once('end', () => resolve());
        stream.once('close', () => resolve());
        // The engine went away mid-session: the session ends, the exec's state below says how.
        stream.on('error', () => resolve());
      });
      io.stdout.off('resize', resize);
      io.stdin.unpipe(stream);
      if (io.stdin.isTTY) io.stdin.setRawMode(wasRaw);
      io.stdin.pause();
      const result = await exec.inspect();
      return result.ExitCode ?? 0;
    } catch (error) {
      throw containerFailure(error, id, 'opening a shell in', this.where);
    }
  }
}
