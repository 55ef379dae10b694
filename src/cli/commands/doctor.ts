/**
 * `sandbox-harness doctor`: is the Docker engine fit to run sandboxes, and what fixes it.
 * With `--engines FILE` and/or `--engine NAME|URL` (repeatable): every engine of that fleet,
 * in parallel, each with the same checks (API >= 1.41 there) and the capacity an eval
 * would give it; `--prepare` first ships the base image from the local engine to those
 * that lack it.
 *
 * Exit code: 0 when every check passes, 3 when the engine (any engine of the fleet) is
 * unusable (unreachable, too old, or a hardened `--network none` container does not start),
 * 1 for other problems (for example no base image yet, or low disk).
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
 *                 | "sandbox-container" | "sandbox-names" | "disk-budget" | "disk" | "base-images" | "offline-bootstrap"
 *                 | "warm-pools" | "agent <kind>",
 *           "ok": boolean,
 *           "detail": string,   // what was found, one line
 *           "fix"?: string,     // when ok is false: the command that fixes it; with warning: how to get what is missing
 *           "warning"?: true,   // ok, but something optional is missing (shown with "!", not "✓")
 *           "fatal"?: true      // this problem alone makes sandboxes impossible
 *         }
 *       ],
 *       "engine"?: {            // what the engine said about itself (absent if it did not answer)
 *         "name", "serverVersion", "apiVersion", "cpus", "memoryBytes", "dockerRootDir",
 *         "freeBytes"?, "totalBytes"?,   // file system under the data root, via df in a container
 *         "usage"?: { "layersBytes"?, "images", "containers", "containersBytes", "volumes", "buildCacheBytes" }
 *                                  // layersBytes absent: the engine did not say (Podman)
 *       }
 *     }
 *
 * With `--engines`/`--engine` instead:
 *
 *     {
 *       "ok": boolean, "usable": boolean, "exitCode": 0 | 1 | 3,
 *       "engines": [
 *         {
 *           "name": string, "origin": string,   // "engines.yaml:4:5" or "--engine NAME"
 *           "endpoint": string,                 // "tcp://10.0.0.5:2376 (TLS)", no secrets
 *           "capacity": number | null,          // trials at once an eval gives it (null: unknown)
 *           "capacityFrom": "engines file" | "cpus",
 *           "prepared"?: { "how": "present" | "shipped", "durationMs", "bytes"? } | { "error": string },
 *           "ok", "usable", "checks", "engine"?  // as above; no offline-bootstrap check
 *         }
 *       ]
 *     }
 *
 * When a daemon does not answer, its `checks` hold only the `daemon` check.
 */
import { Command } from '@commander-js/extra-typings';
import { errorMessage, UsageError } from '../../errors.js';
import { defaultCapacity } from '../../fleet/placement.js';
import { alignColumns, formatBytes, formatDuration } from '../../format.js';
import type {
  DoctorCheck,
  DoctorReport,
  EngineSpec,
  SandboxProvider,
} from '../../sandbox/backend-registry.js';
import { DEFAULT_RESOURCES } from '../../sandbox/types.js';
import { note, print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { EXIT_CODES } from '../exit-codes.js';
import { backendChoice, collect, withBackend } from '../shared-options.js';

function declaration() {
  return withBackend(new Command('doctor'))
    .description(
      'check the Docker engine: reachable, version, storage driver, network-less containers, free disk, base images',
    )
    .option('--engines <file>', 'check every engine of an engines file (YAML; see docs/clusters.md)')
    .option(
      '--engine <context-or-url>',
      'check this engine: a docker context name or tcp://, ssh://, unix:// URL (repeatable)',
      collect,
    )
    .option(
      '--prepare',
      'with --engines/--engine: first ship the base image from the local engine where it is missing',
    )
    .option('--json', 'JSON output');
}

export type DoctorCommandOptions = OptionsOf<typeof declaration>;

export interface DoctorResult extends DoctorReport {
  exitCode: number;
}

export function doctorExitCode(report: Pick<DoctorReport, 'ok' | 'usable'>): number {
  if (!report.usable) return EXIT_CODES.infrastructure;
  return report.ok ? EXIT_CODES.ok : EXIT_CODES.taskFailed;
}

export async function checkLocalEngine(): Promise<DoctorResult> {
  const { sandboxProvider } = await import('../../sandbox/backend-registry.js');
  const { agentChecks } = await import('../../agent-kinds/agent-doctor.js');
  const { poolCheck } = await import('../../sandbox/pool/pool-status.js');
  const report = await (await sandboxProvider()).doctor();
  // Which agents are ready, which warm pools run: notes only, so the engine's verdict (and
  // the exit code) stays its own.
  const checks = [...report.checks, await poolCheck(), ...(await agentChecks())];
  return { ...report, checks, exitCode: doctorExitCode(report) };
}

export function formatDoctor(result: DoctorResult, what?: string): string {
  const lines = [
    `${what ?? `${result.engine?.product ?? 'Docker'} engine at`} ${result.endpoint}`,
    ...formatChecks(result.checks, '  '),
  ];
  const problems = result.checks.filter((c) => !c.ok).length;
  const notes = result.checks.filter((c) => c.ok && c.warning).length;
  lines.push(
    result.ok
      ? `all checks passed${notes > 0 ? ` (${notes} with a note: ! marks something optional that is missing)` : ''}`
      : result.usable
        ? `${problems} problem(s); sandboxes can still run`
        : `${problems} problem(s); the engine cannot run sandboxes until they are fixed`,
  );
  return lines.join('\n');
}

export interface FleetEngineReport extends DoctorReport {
  name: string;
  origin: string;
  capacity: number | null;
  capacityFrom: 'engines file' | 'cpus';
  prepared?: { how: 'present' | 'shipped' | 'built'; durationMs: number; bytes?: number } | { error: string };
}

export interface FleetDoctorResult {
  ok: boolean;
  usable: boolean;
  exitCode: number;
  engines: FleetEngineReport[];
}

/** Every engine of the fleet, checked in parallel; a broken one does not hide the others. */
export async function doctorFleet(
  specs: EngineSpec[],
  options: {
    prepare?: boolean;
    prepareHint: string;
    source?: SandboxProvider;
    onLine?: (line: string) => void;
  },
): Promise<FleetDoctorResult> {
  const { connectEngine, sandboxProvider } = await import('../../sandbox/backend-registry.js');
  const engines = await Promise.all(
    specs.map(async (spec): Promise<FleetEngineReport> => {
      const provider = await sandboxProvider('docker', { engine: await connectEngine(spec) });
      let prepared: FleetEngineReport['prepared'];
      if (options.prepare) {
        try {
          const base = await provider.ensureBaseImage({
            ...(options.source ? { from: options.source } : {}),
            method: 'ship',
            ...(options.onLine
              ? { onLine: (line: string) => options.onLine?.(`${spec.name}: ${line}`) }
              : {}),
          });
          prepared = {
            how: base.how,
            durationMs: base.durationMs,
            ...(base.bytes === undefined ? {} : { bytes: base.bytes }),
          };
        } catch (error) {
          prepared = { error: errorMessage(error).split('\n')[0] ?? '' };
        }
      }
      const report = await provider.doctor({ fleet: { prepareHint: options.prepareHint } });
      const cpus = report.engine?.cpus;
      return {
        name: spec.name,
        origin: spec.origin,
        ...report,
        capacity: spec.capacity ?? (cpus ? defaultCapacity(cpus, DEFAULT_RESOURCES.cpus) : null),
        capacityFrom: spec.capacity === undefined ? 'cpus' : 'engines file',
        ...(prepared ? { prepared } : {}),
      };
    }),
  );
  const usable = engines.every((e) => e.usable);
  const ok = engines.every((e) => e.ok);
  return { ok, usable, exitCode: doctorExitCode({ ok, usable }), engines };
}

/** `✓` passed, `✗` a problem, `!` passed but something optional is missing (never a check mark for that). */
export function checkMark(check: Pick<DoctorCheck, 'ok' | 'warning'>): string {
  return !check.ok ? '✗' : check.warning ? '!' : '✓';
}

function formatChecks(checks: DoctorCheck[], indent: string): string[] {
  // What to do goes under the detail it is about, in the same column.
  const rows = checks.flatMap((check) => {
    const rows = [[`${checkMark(check)} ${check.name}`, check.detail]];
    if (!check.ok && check.fix) rows.push(['', `fix: ${check.fix}`]);
    else if (check.warning && check.fix) rows.push(['', `hint: ${check.fix}`]);
    return rows;
  });
  return alignColumns(rows).map((line) => `${indent}${line}`);
}

export function formatFleetDoctor(result: FleetDoctorResult): string {
  const lines: string[] = [];
  for (const e of result.engines) {
    lines.push(`${e.name}: ${e.endpoint}  (${e.origin})`);
    const facts = e.engine
      ? [
          `${e.engine.cpus} CPUs`,
          `${formatBytes(e.engine.memoryBytes)} memory`,
          e.capacity === null
            ? undefined
            : `capacity ${e.capacity} trial${e.capacity === 1 ? '' : 's'} at once (${e.capacityFrom === 'cpus' ? `${e.engine.cpus} CPUs / ${DEFAULT_RESOURCES.cpus} per trial` : 'engines file'})`,
        ].filter(Boolean)
      : [];
    if (facts.length) lines.push(`  ${facts.join(', ')}`);
    if (e.prepared) {
      lines.push(
        'error' in e.prepared
          ? `  ✗ prepare: shipping the base image failed: ${e.prepared.error}`
          : `  ${e.prepared.how === 'present' ? '✓ prepare: the base image was already there' : `✓ prepare: base image shipped${e.prepared.bytes ? ` (${formatBytes(e.prepared.bytes)})` : ''} in ${formatDuration(e.prepared.durationMs)}`}`,
      );
    }
    lines.push(...formatChecks(e.checks, '  '));
    lines.push('');
  }
  const broken = result.engines.filter((e) => !e.usable).map((e) => e.name);
  const imperfect = result.engines.filter((e) => e.usable && !e.ok).map((e) => e.name);
  const total = result.engines.length;
  if (result.ok) lines.push(`all ${total} engine${total === 1 ? '' : 's'} passed every check`);
  else {
    lines.push(
      [
        broken.length ? `cannot run sandboxes: ${broken.join(', ')}` : undefined,
        imperfect.length ? `usable with problems: ${imperfect.join(', ')}` : undefined,
      ]
        .filter(Boolean)
        .join('; '),
    );
  }
  return lines.join('\n');
}

/** How to run this same check again with --prepare, for the fix lines. */
function prepareHint(options: DoctorCommandOptions): string {
  const flags = [
    ...(options.engines ? [`--engines ${options.engines}`] : []),
    ...(options.engine ?? []).map((e) => `--engine ${e}`),
  ];
  return `\`sandbox-harness doctor ${flags.join(' ')} --prepare\` ships the base image from the local engine`;
}

export async function doctorCommand(ctx: CliContext, options: DoctorCommandOptions): Promise<number> {
  const { enginesNamed, resolveEngineFlags } = await import('../engine-flags.js');
  const chosen = backendChoice(options);
  if (chosen.name !== 'docker') {
    const { sandboxProvider } = await import('../../sandbox/backend-registry.js');
    const provider = await sandboxProvider(chosen.name, chosen.options);
    const report = await provider.doctor();
    const result = { ...report, exitCode: doctorExitCode(report) };
    if (options.json) printJson(ctx, result);
    else print(ctx, formatDoctor(result, `${chosen.name} at`));
    return result.exitCode;
  }
  if (enginesNamed(options)) {
    const specs = await resolveEngineFlags(ctx, options);
    const fleet = await doctorFleet(specs, {
      prepare: options.prepare === true,
      prepareHint: prepareHint(options),
      ...(options.json ? {} : { onLine: (line: string) => note(ctx, line) }),
    });
    if (options.json) printJson(ctx, fleet);
    else print(ctx, formatFleetDoctor(fleet));
    return fleet.exitCode;
  }
  if (options.prepare) {
    throw new UsageError(
      '--prepare ships the base image to other engines: name them with --engines or --engine',
    );
  }
  const result = await checkLocalEngine();
  if (options.json) printJson(ctx, result);
  else print(ctx, formatDoctor(result));
  return result.exitCode;
}

export const doctor = declareCommand(declaration, doctorCommand);
