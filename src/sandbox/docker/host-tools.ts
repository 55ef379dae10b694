/**
 * Programs of the engine's host that the backend runs itself (mmdebstrap, apt-get): found on
 * PATH, run in their own process group so an interrupt stops the whole tree, output streamed
 * line by line. Never on a repo's data.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { createInterface } from 'node:readline';
import { ImageError, Interrupted } from '../../errors.js';

export async function findOnPath(command: string): Promise<string | undefined> {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const dir of [...dirs, '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    const candidate = join(dir, command);
    try {
      await access(candidate, constants.X_OK);
      if ((await stat(candidate)).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export async function isDebianRoot(): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  try {
    await access('/etc/debian_version');
    return true;
  } catch {
    return false;
  }
}

export interface RunOptions {
  onLine: (line: string) => void;
  env?: NodeJS.ProcessEnv | undefined;
  signal?: AbortSignal | undefined;
}

/** Runs a host command, streaming its output line by line; resolves with its exit code. */
export function runStreaming(command: string, args: string[], options: RunOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(new Interrupted(`${command} not started: interrupted`));
      return;
    }
    // Own process group, so an interrupt stops the whole tree (mmdebstrap forks apt, dpkg...).
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: options.env ?? process.env,
      detached: true,
    });
    const onAbort = () => {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGTERM');
        } catch {
          // already gone
        }
      }
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => options.onLine(line));
    }
    child.once('error', (error) => {
      options.signal?.removeEventListener('abort', onAbort);
      reject(new ImageError(`cannot run ${command}: ${error.message}`, { cause: error }));
    });
    child.once('close', (code, signal) => {
      options.signal?.removeEventListener('abort', onAbort);
      if (options.signal?.aborted) reject(new Interrupted(`${command} stopped: interrupted`));
      else resolve(code ?? (signal ? 128 : 1));
    });
  });
}
