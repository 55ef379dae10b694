/**
 * A process in a Slurm sandbox: a job step on the sandbox's node (`srun --overlap --jobid J
 * -w node`) running the node engine's `exec` into the container, stdin and stdout through
 * srun (`--unbuffered`: the command channel's frames have no newline, and srun would otherwise
 * hold a partial line back). srun reaches only the job's current node, so a sandbox is only
 * ever addressed through its job.
 *
 * The exit code travels in-band too: a step on a node that was lost ends with srun exiting 0
 * ("Node failure") once Slurm declares the node down, so a step that ended without its end
 * record is a lost sandbox, never a success. The record is the last bytes of stderr and is
 * taken off before the caller sees them.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { NodeFailure, SandboxDead } from '../../errors.js';
import { SANDBOX_GID, SANDBOX_UID } from '../types.js';
import type { ProcessSpec, StartedProcess, Transport } from '../posix/transport.js';
import { EXPORT_NONE, type SlurmClient } from './slurm-client.js';

/** Runs "$@" and then writes the end record (token and exit code) as the last bytes of stderr. */
const RECORD_WRAPPER = `t=$1; shift; "$@"; rc=$?; printf '\\036SHX %s %d\\036' "$t" "$rc" >&2; exit "$rc"`;
/**
 * Most bytes of stderr held back at once: what might still turn out to be the record, or
 * srun's own line about the exit (`srun: error: node1: task 0: Exited with exit code 3`).
 */
const RECORD_MAX = 4096;
/**
 * srun's own line about a task's non-zero exit: its word, not the command's output. It comes
 * on srun's stderr, which is not ordered with the task's: before or after the record.
 */
const SRUN_EXIT_LINE = /(^|\n)srun: error: [^\n]*: task \d+: (?:Exited with exit code \d+|Killed)\n?/;

/** Exit code of a step that ended without its record: the sandbox (or its node) is gone. */
export const LOST = -1;

const RECORD_START = '\x1eSHX ';
const SRUN_LINE_START = 'srun: ';

/** Where the part of `text` that might be the end (a record, srun's own line) starts; its length when none. */
function heldFrom(text: string): number {
  let from = text.length;
  const record = text.indexOf(RECORD_START);
  if (record >= 0) from = record;
  // srun's line starts a line of its own.
  const srun = text.startsWith(SRUN_LINE_START) ? 0 : text.indexOf(`\n${SRUN_LINE_START}`);
  if (srun >= 0) from = Math.min(from, srun);
  // A chunk may end partway into either.
  for (const start of [RECORD_START, `\n${SRUN_LINE_START}`]) {
    for (let k = Math.min(start.length - 1, text.length); k > 0; k--) {
      if (text.endsWith(start.slice(0, k))) {
        from = Math.min(from, text.length - k);
        break;
      }
    }
  }
  return from;
}

/**
 * Passes stderr on as it comes, holding back only what might be the end: from a record's
 * start (`\x1eSHX `, or a prefix of it at the very end) or a line of srun's own, whichever
 * comes first, at most `RECORD_MAX` bytes. Holding back a fixed tail instead starved a
 * long-lived step: the command channel's per-command end markers sat in the tail until the
 * host gave the command up (seen: an agent's first command on Slurm took 21 s, not 0.1 s).
 */
export class RecordFilter extends Writable {
  private held = Buffer.alloc(0);
  code: number | undefined;

  constructor(
    private readonly sink: Writable,
    private readonly token: string,
  ) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.held = Buffer.concat([this.held, chunk]);
    const keep = Math.max(heldFrom(this.held.toString('latin1')), this.held.length - RECORD_MAX);
    if (keep > 0) {
      const pass = this.held.subarray(0, keep);
      this.held = Buffer.from(this.held.subarray(keep));
      this.sink.write(pass);
    }
    callback();
  }

  /** Called once stderr has ended: the record found (and cut), the rest passed on. */
  finish(): void {
    const text = this.held.toString('latin1');
    const match = new RegExp(`\\x1eSHX ${this.token} (-?\\d+)\\x1e`).exec(text);
    let rest = this.held;
    if (match) {
      this.code = Number(match[1]);
      const cut = text.slice(0, match.index) + text.slice(match.index + match[0].length);
      rest = Buffer.from(cut.replace(SRUN_EXIT_LINE, '$1'), 'latin1');
    }
    if (rest.length) this.sink.write(rest);
    this.held = Buffer.alloc(0);
  }
}

export interface SandboxAddress {
  job: string;
  node: string;
  container: string;
}

/** A node name fit for a record's engine field; the cluster's word, checked before it is kept. */
const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** `node` when it is fit to be kept (a record's engine, an error's node), else undefined. */
export function nodeName(node: string): string | undefined {
  return NODE_NAME.test(node) ? node : undefined;
}

/** The srun arguments that put a step on the sandbox's node, inside its job. */
export function stepArgs(address: Pick<SandboxAddress, 'job' | 'node'>): string[] {
  return [
    '--overlap',
    '--unbuffered',
    '--quiet',
    `--jobid=${address.job}`,
    `--nodelist=${address.node}`,
    '--nodes=1',
    '--ntasks=1',
    EXPORT_NONE,
  ];
}

export class SrunTransport implements Transport {
  /** Slurm said the node was lost: from now on nothing is run or read in this sandbox. */
  private lost = false;
  /** Slurm's answer about the last step that ended without its record, while it is asked. */
  private verdict: Promise<boolean> | undefined;

  constructor(
    private readonly client: SlurmClient,
    private readonly address: SandboxAddress,
    /** Asked when a step ends without its end record: was the node lost? (Then the sandbox is.) */
    private readonly onLost?: (address: SandboxAddress) => Promise<boolean>,
  ) {}

  /** Whether Slurm said the sandbox's node was lost (asked when a step ended without its record). */
  async nodeLost(): Promise<boolean> {
    return this.lost || ((await this.verdict) ?? false);
  }

  /**
   * A lost node is the cluster failing, not the sandbox's processes dying: infrastructure, which
   * an eval retries elsewhere, and the lost copy is fenced, never read.
   */
  lostError(): NodeFailure {
    return new NodeFailure(
      nodeName(this.address.node),
      `the sandbox's node ${this.address.node} was lost (Slurm job ${this.address.job}); nothing more is run or read in it`,
      {
        hint: 'The node is left out until Slurm says it answers again and its containers of this tool are removed.',
      },
    );
  }

  async start(spec: ProcessSpec): Promise<StartedProcess> {
    if (this.lost) throw this.lostError();
    const token = randomBytes(6).toString('hex');
    const user = spec.user === 'root' ? '0:0' : `${SANDBOX_UID}:${SANDBOX_GID}`;
    const exec = [
      // The step's own PATH (--export) finds the engine CLI: srun resolves a bare name elsewhere.
      '/usr/bin/env',
      this.client.engineCli,
      'exec',
      ...(spec.stdin ? ['-i'] : []),
      '-u',
      user,
      '-w',
      spec.cwd,
      ...spec.env.flatMap((e) => ['-e', e]),
      this.address.container,
      '/bin/sh',
      '-c',
      RECORD_WRAPPER,
      'sandbox-step',
      token,
      ...spec.argv,
    ];
    this.client.requireConf();
    // Its own process group: a Ctrl-C at the terminal reaches the harness, which cancels the
    // run's jobs itself (one SIGINT alone only makes srun print its status).
    const child = spawn('srun', [...stepArgs(this.address), ...exec], {
      env: this.client.env,
      stdio: [spec.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const filter = new RecordFilter(spec.stderr, token);
    child.stdout?.on('data', (d: Buffer) => spec.stdout.write(d));
    child.stderr?.on('data', (d: Buffer) => filter.write(d));
    let spawnError: Error | undefined;
    const closed = new Promise<number | null>((resolve) => {
      child.on('error', (error) => {
        spawnError = error;
        resolve(null);
      });
      child.on('close', (code) => resolve(code));
    });
    if (child.stdin) {
      child.stdin.on('error', () => undefined);
      if (Buffer.isBuffer(spec.stdin)) child.stdin.end(spec.stdin);
    }
    let following = true;
    const streamEnded = closed.then(() => {
      filter.finish();
    });
    const exited = (async () => {
      const code = await closed;
      await streamEnded;
      if (!following) return new Promise<number>(() => undefined);
      if (spawnError) throw new SandboxDead(`cannot start srun: ${spawnError.message}`);
      // The daemon's word (srun passes docker exec's code through) once the step really ended.
      if (filter.code === undefined) {
        // Also what a step cut on purpose looks like (the channel closed, a freeze's restart):
        // the backend asks Slurm whether the node really failed before anything is fenced.
        if (this.onLost && !this.lost) {
          this.verdict = this.onLost(this.address).then(
            (lost) => (this.lost ||= lost),
            () => false,
          );
        }
        return LOST;
      }
      return code ?? LOST;
    })();
    exited.catch(() => undefined);
    return {
      exited,
      streamEnded,
      ...(spec.stdin === 'stream' && child.stdin ? { input: child.stdin } : {}),
      detach: () => {
        following = false;
        // Ends the step (the process inside lives on, as after a detached docker exec; the
        // exec wrapper's kill by token is what stops it).
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      },
    };
  }
}
