/**
 * `sandbox-harness doctor`: is the Docker engine fit to run sandboxes, and what fixes it.
 *
 * Exit code: 0 when every check passes, 3 when the engine is unusable (unreachable, too
 * old, or a hardened `--network none` container does not start), 1 for other problems
 * (for example no base image yet).
 *
 * `--json` prints one object on stdout:
 *
 *     {
 *       "ok": boolean,          // every check passed
 *       "usable": boolean,      // sandboxes can run (false => exit 3)
 *       "endpoint": string,     // DOCKER_HOST, else "unix:///var/run/docker.sock"
 *       "exitCode": 0 | 1 | 3,
 *       "checks": [
 *         {
 *           "name": "daemon" | "server-version" | "storage-driver" | "cgroups" | "kernel-limits"
 *                 | "sandbox-container" | "base-images" | "offline-bootstrap",
 *           "ok": boolean,
 *           "detail": string,   // what was found, one line
 *           "fix"?: string,     // only when ok is false: the command that fixes it
 *           "fatal"?: true      // this problem alone makes sandboxes impossible
 *         }
 *       ]
 *     }
 *
 * When the daemon does not answer, `checks` holds only the `daemon` check.
 */
import { EXIT_CODES } from '../exit-codes.js';
import { runDoctor, type DoctorReport } from '../../sandbox/docker/doctor.js';
import { print, printJson, type CliContext } from '../context.js';

export interface DoctorCommandOptions {
  json?: boolean;
}

export interface DoctorResult extends DoctorReport {
  exitCode: number;
}

export function doctorExitCode(report: DoctorReport): number {
  if (!report.usable) return EXIT_CODES.infrastructure;
  return report.ok ? EXIT_CODES.ok : EXIT_CODES.taskFailed;
}

export async function doctor(): Promise<DoctorResult> {
  const report = await runDoctor();
  return { ...report, exitCode: doctorExitCode(report) };
}

export function formatDoctor(result: DoctorResult): string {
  const width = Math.max(...result.checks.map((c) => c.name.length));
  const lines = [`Docker engine at ${result.endpoint}`];
  for (const check of result.checks) {
    lines.push(`  ${check.ok ? '✓' : '✗'} ${check.name.padEnd(width)}  ${check.detail}`);
    if (!check.ok && check.fix) lines.push(`    ${' '.repeat(width)}  fix: ${check.fix}`);
  }
  const problems = result.checks.filter((c) => !c.ok).length;
  lines.push(
    result.ok
      ? 'all checks passed'
      : result.usable
        ? `${problems} problem(s); sandboxes can still run`
        : `${problems} problem(s); the engine cannot run sandboxes until they are fixed`,
  );
  return lines.join('\n');
}

export async function doctorCommand(ctx: CliContext, options: DoctorCommandOptions = {}): Promise<number> {
  const result = await doctor();
  if (options.json) printJson(ctx, result);
  else print(ctx, formatDoctor(result));
  return result.exitCode;
}
