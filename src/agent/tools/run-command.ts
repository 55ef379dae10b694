import { z } from 'zod';
import type { ExecResult } from '../../sandbox/types.js';
import { WORKSPACE } from '../../sandbox/types.js';
import type { EgressLogEntry } from '../../sandbox/egress/proxy.js';
import { capText } from './result-text.js';
import { defineTool } from './types.js';

export function formatCommandResult(result: ExecResult, maxChars: number, timeoutSec: number): string {
  const half = Math.floor(maxChars / 2);
  const parts = [
    `exit code: ${result.exitCode}`,
    `timed out: ${result.timedOut ? `yes, killed after ${timeoutSec}s` : 'no'}`,
    `truncated: ${result.truncated ? 'yes, the sandbox kept only the head and tail of the output' : 'no'}`,
    'stdout:',
    result.stdout === '' ? '(empty)' : capText(result.stdout, half, 'stdout'),
    'stderr:',
    result.stderr === '' ? '(empty)' : capText(result.stderr, half, 'stderr'),
  ];
  return parts.join('\n');
}

const MAX_DENIALS_SHOWN = 10;

/**
 * What the sandbox's egress proxy refused while the command ran: the command's own output
 * often says only "403" or "connection refused", and the model should learn the rule.
 */
export function egressDenials(log: readonly EgressLogEntry[] | undefined, since: string): string {
  const denied = (log ?? []).filter((e) => !e.allowed && e.time >= since);
  if (denied.length === 0) return '';
  const lines = denied
    .slice(0, MAX_DENIALS_SHOWN)
    .map((e) => `  ${e.method} ${e.host}${e.port ? `:${e.port}` : ''}: ${e.reason ?? e.rule}`);
  if (denied.length > MAX_DENIALS_SHOWN) lines.push(`  ... and ${denied.length - MAX_DENIALS_SHOWN} more`);
  return `\negress denied (the sandbox reaches only the hosts its catalog allows, through its proxy):\n${lines.join('\n')}`;
}

export const runCommandTool = defineTool({
  name: 'run_command',
  description:
    'Run a shell command (sh -c) in /workspace inside the sandbox: no network, no credentials. Returns exit code, stdout and stderr (long output is cut in the middle). `timeoutSec` defaults to 120.',
  input: z.object({
    command: z.string().min(1).describe('Shell command, run with sh -c in /workspace'),
    timeoutSec: z
      .number()
      .positive()
      .optional()
      .describe('Seconds before the command is killed; default 120'),
  }),
  async run({ command, timeoutSec }, { sandbox, signal, limits }) {
    const seconds = Math.min(timeoutSec ?? limits.defaultCommandTimeoutSec, limits.maxCommandTimeoutSec);
    // The command is the model's request to the sandbox; exec runs it with `sh -c` under limits.
    // The result is the agent's own information, so the sandbox's fast command channel may run it.
    const started = new Date().toISOString();
    const result = await sandbox.exec(command, {
      fast: true,
      cwd: WORKSPACE,
      timeoutMs: Math.round(seconds * 1000),
      maxOutputBytes: limits.maxCommandOutputBytes,
      ...(signal ? { signal } : {}),
    });
    let content = formatCommandResult(result, limits.maxOutputChars, seconds);
    content += egressDenials(sandbox.egressLog?.(), started);
    if (timeoutSec !== undefined && timeoutSec > limits.maxCommandTimeoutSec) {
      content += `\n(note: timeoutSec was lowered to the ${limits.maxCommandTimeoutSec}s maximum)`;
    }
    return { content, isError: result.timedOut, exitCode: result.exitCode };
  },
});
