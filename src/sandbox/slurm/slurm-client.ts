/**
 * Slurm's own commands (sbatch, squeue, scancel, scontrol, srun), run from the submitting
 * host with an environment built here: never the host's whole environment, because sbatch
 * and srun copy it into the job (and sbatch stores it with the controller), and a Slurm client
 * without a configuration falls back to a DNS lookup of the cluster. A controller that does
 * not answer is `SandboxUnavailable` with what to do.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { abortError, errorMessage, SandboxUnavailable, UsageError } from '../../errors.js';

/** The system folders a job step on a node runs its programs from (the job gets no PATH of ours). */
export const NODE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Every job and step: none of the submitter's variables, only the node's own PATH. */
export const EXPORT_NONE = `--export=NONE,PATH=${NODE_PATH}`;

export interface SlurmSettings {
  /** The cluster's slurm.conf; absent: SLURM_CONF of the environment, else /etc/slurm/slurm.conf. */
  conf?: string | undefined;
  partition?: string | undefined;
  account?: string | undefined;
  qos?: string | undefined;
  constraint?: string | undefined;
  /** The container engine CLI on the nodes (default `docker`). */
  engineCli?: 'docker' | 'podman' | undefined;
  /** Where the Slurm programs are looked for (default: this process's PATH). */
  path?: string | undefined;
}

export interface SlurmRunOptions {
  input?: Buffer | string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface SlurmRunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Seconds a client call may take before the controller counts as not answering. */
const CLIENT_TIMEOUT_MS = 30_000;

export class SlurmClient {
  readonly conf: string;
  readonly env: NodeJS.ProcessEnv;

  constructor(readonly settings: SlurmSettings = {}) {
    const conf = settings.conf ?? process.env.SLURM_CONF ?? '/etc/slurm/slurm.conf';
    this.conf = conf;
    // Only what a Slurm client needs: its programs, its configuration, a locale.
    this.env = {
      PATH: settings.path ?? process.env.PATH ?? NODE_PATH,
      SLURM_CONF: conf,
      LC_ALL: 'C',
    };
  }

  /** Throws `UsageError` when there is no configuration to read (a client would ask DNS instead). */
  requireConf(): void {
    if (!existsSync(this.conf)) {
      throw new UsageError(`no Slurm configuration at ${this.conf}`, {
        hint: 'Name the cluster with SLURM_CONF=/path/to/slurm.conf (or install it at /etc/slurm/slurm.conf).',
      });
    }
  }

  /** A Slurm command; resolves with its exit code and output (never rejects for a non-zero exit). */
  run(command: string, args: readonly string[], options: SlurmRunOptions = {}): Promise<SlurmRunResult> {
    // Rejects, never throws: callers chain `.catch` on it.
    try {
      this.requireConf();
    } catch (error) {
      return Promise.reject(error as Error);
    }
    if (options.signal?.aborted) return Promise.reject(abortError(options.signal));
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, { env: this.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (d: Buffer) => out.push(d));
      child.stderr.on('data', (d: Buffer) => err.push(d));
      child.stdin.on('error', () => undefined);
      child.stdin.end(options.input ?? '');
      const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? CLIENT_TIMEOUT_MS);
      const onAbort = () => child.kill('SIGTERM');
      options.signal?.addEventListener('abort', onAbort, { once: true });
      let timedOut = false;
      timer.unref();
      child.on('error', (error) => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        reject(
          new SandboxUnavailable(`cannot run ${command}: ${errorMessage(error)}`, {
            hint: 'Install the Slurm client programs (Debian: apt-get install slurm-client) on this host.',
          }),
        );
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        if (options.signal?.aborted) return reject(abortError(options.signal));
        timedOut = signal === 'SIGKILL';
        const stderr = Buffer.concat(err).toString('utf8');
        if (timedOut) return reject(this.unavailable(`${command} did not answer within its time`, stderr));
        resolve({ code: code ?? 128, stdout: Buffer.concat(out).toString('utf8'), stderr });
      });
    });
  }

  /** Like `run`, but a non-zero exit is an error: `SandboxUnavailable` when the controller is the cause. */
  async ok(command: string, args: readonly string[], options: SlurmRunOptions = {}): Promise<string> {
    const result = await this.run(command, args, options);
    if (result.code !== 0) {
      throw this.unavailable(
        `${command} ${args.slice(0, 3).join(' ')} failed (exit ${result.code})`,
        result.stderr,
      );
    }
    return result.stdout;
  }

  /** The controller does not answer, or refused: infrastructure, with what to do. */
  unavailable(what: string, stderr: string): SandboxUnavailable {
    const said = stderr.trim().split('\n').slice(-3).join('; ');
    return new SandboxUnavailable(`Slurm: ${what}${said ? `: ${said}` : ''}`, {
      hint: `Check the controller with \`SLURM_CONF=${this.conf} scontrol ping\` and \`sinfo\`; then run \`sandbox-harness doctor --backend slurm\`.`,
    });
  }

  /** The options every job of this backend gets from the settings. */
  placementArgs(): string[] {
    const args: string[] = [];
    const { partition, account, qos, constraint } = this.settings;
    if (partition) args.push(`--partition=${partition}`);
    if (account) args.push(`--account=${account}`);
    if (qos) args.push(`--qos=${qos}`);
    if (constraint) args.push(`--constraint=${constraint}`);
    return args;
  }

  get engineCli(): 'docker' | 'podman' {
    return this.settings.engineCli ?? 'docker';
  }
}

/** A job as `squeue` shows it; undefined once the controller forgot it. */
export interface JobState {
  state: string;
  node: string;
  reason: string;
}

/** The state of one job (`squeue`, falling back to `scontrol` for a finished one). */
export async function jobState(
  client: SlurmClient,
  job: string,
  signal?: AbortSignal,
): Promise<JobState | undefined> {
  const result = await client.run('squeue', ['-h', '-j', job, '-o', '%T|%N|%r'], signal ? { signal } : {});
  if (result.code === 0 && result.stdout.trim()) {
    const [state = '', node = '', reason = ''] = result.stdout.trim().split('\n')[0]!.split('|');
    return { state, node, reason };
  }
  if (result.code !== 0 && !/Invalid job id/i.test(result.stderr)) {
    throw client.unavailable('squeue did not answer', result.stderr);
  }
  return undefined;
}
