import { settleProgress } from './progress-line.js';
import { terminalSafe } from './terminal.js';

/** What every command receives: where to write, whether it is a terminal, and how to be interrupted. */
export interface CliContext {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  isTTY: boolean;
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Aborted on the first Ctrl-C; commands stop work and clean up. */
  signal: AbortSignal;
}

// Each helper first ends a live progress line, so its text is never drawn over.

/** Human output on stdout, with control characters shown as escapes (see `terminal.ts`). */
export function print(ctx: CliContext, text: string): void {
  settleProgress();
  const safe = terminalSafe(text);
  ctx.stdout.write(safe.endsWith('\n') ? safe : `${safe}\n`);
}

export function printJson(ctx: CliContext, value: unknown): void {
  settleProgress();
  ctx.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Progress and notes go to stderr so stdout stays clean for `--json` and pipes. */
export function note(ctx: CliContext, text: string): void {
  settleProgress();
  const safe = terminalSafe(text);
  ctx.stderr.write(safe.endsWith('\n') ? safe : `${safe}\n`);
}
