/**
 * Options that several commands declare the same way. Choices are checked against the
 * domain's own types (type imports only: nothing here loads the code behind them), so a
 * policy or provider added or dropped there is a type error here.
 */
import { Command, Option, type OptionValues } from '@commander-js/extra-typings';
import type { KeepPolicy } from '../fix/run-fix.js';
import type { ProviderName } from '../llm/provider-registry.js';
import type { AgentKindName } from '../agent-kinds/kind-registry.js';
import { integerOption } from './option-parsers.js';
import { UsageError } from '../errors.js';
import type { BackendName, ProviderOptions } from '../sandbox/backend-registry.js';

type Missing<T, Listed> = [Exclude<T, Listed>] extends [never] ? unknown : { missing: Exclude<T, Listed> };

/** Every value of the union `T` (a type error when one is missing). */
export function everyValueOf<T extends string>() {
  return <const Values extends readonly T[]>(values: Values & Missing<T, Values[number]>): Values => values;
}

export const KEEP_POLICIES = everyValueOf<KeepPolicy>()(['on-failure', 'always', 'never']);
export const PROVIDERS = everyValueOf<ProviderName>()(['anthropic', 'openai', 'replay']);

/** A repeatable option's values, in order. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function keepOption(description: string) {
  return new Option('--keep <policy>', description).choices(KEEP_POLICIES);
}

export function providerOption() {
  return new Option('--provider <name>', 'model provider').choices(PROVIDERS);
}

export const AGENT_KINDS = everyValueOf<AgentKindName>()([
  'builtin',
  'claude-code',
  'codex',
  'command',
  'gemini',
  'opencode',
]);

/** `--agent <kind>`: who works the ticket (default: the catalog's agent.kind, else builtin). */
export function agentOption(description: string) {
  return new Option('--agent <kind>', description).choices(AGENT_KINDS);
}

export function runtimeOption() {
  return new Option(
    '--runtime <name>',
    "OCI runtime of every sandbox, as the engine names it: runc, runsc (gVisor), ... (default: the catalog's sandbox.runtime, else the engine's default; see doctor)",
  );
}

/** `--attempt <n>`: an attempt's number, from 1. */
export function attemptOption(description: string) {
  return integerOption('--attempt <n>', description, { min: 1, expected: 'an attempt number (1, 2, ...)' });
}

/** Where a command reads run records: `--repo`, `--catalog`, `--runs-dir` (see `run-lookup.ts`). */
export function withRunsLocation<Args extends unknown[], Opts extends OptionValues>(
  command: Command<Args, Opts>,
) {
  return command
    .option('--repo <dir>', 'the repo whose runs to read (default: here)')
    .option('-c, --catalog <file>', "read the runs of this catalog's repo")
    .option('--runs-dir <dir>', 'read runs from this folder');
}

/**
 * A kept container of an eval on several engines is on one of them; the run record says
 * which and how to reach it, and these flags name the engines again when that no longer works.
 */
export function withEngineLookup<Args extends unknown[], Opts extends OptionValues>(
  command: Command<Args, Opts>,
  what: string,
) {
  return command
    .option(
      '--engines <file>',
      `${what} on the engines of this engines file (default: as the run record says)`,
    )
    .option('--engine <context-or-url>', `${what} on this engine (repeatable)`, collect);
}

/** `shell` and `rerun-tests`: a run's kept attempt sandbox, on the engine that holds it. */
export function keptSandboxCommand(name: string, description: string) {
  return withEngineLookup(
    withRunsLocation(new Command(name).description(description)),
    'find the kept container',
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .addOption(attemptOption('the kept sandbox of attempt n (default: the last attempt that kept one)'));
}

export const BACKENDS = everyValueOf<BackendName>()(['docker', 'slurm']);

/**
 * `--backend` and where a cluster backend puts its jobs (`--partition`, `--account`, `--qos`,
 * `--constraint`; Slurm's own words, passed through to every job).
 */
export function withBackend<Args extends unknown[], Opts extends OptionValues>(command: Command<Args, Opts>) {
  return command
    .addOption(
      new Option(
        '--backend <name>',
        'where sandboxes run (default docker): docker (this engine or a fleet) or slurm (jobs on a Slurm cluster; SLURM_CONF names it)',
      ).choices(BACKENDS),
    )
    .option('--partition <name>', 'with --backend slurm: the partition of every sandbox job')
    .option('--account <name>', 'with --backend slurm: the account every sandbox job is charged to')
    .option('--qos <name>', 'with --backend slurm: the quality of service of every sandbox job')
    .option('--constraint <features>', 'with --backend slurm: node features every sandbox job needs');
}

export interface BackendFlags {
  backend?: BackendName | undefined;
  partition?: string | undefined;
  account?: string | undefined;
  qos?: string | undefined;
  constraint?: string | undefined;
}

/** The backend name and provider options `--backend` and the cluster flags ask for. */
export function backendChoice(flags: BackendFlags): { name: BackendName; options: ProviderOptions } {
  const name = flags.backend ?? 'docker';
  const placement = Object.fromEntries(
    (['partition', 'account', 'qos', 'constraint'] as const).flatMap((k) =>
      flags[k] ? [[k, flags[k]]] : [],
    ),
  );
  if (name !== 'slurm' && Object.keys(placement).length > 0) {
    throw new UsageError(`--${Object.keys(placement)[0]} places Slurm jobs; it needs --backend slurm`);
  }
  return { name, options: name === 'slurm' ? { cluster: placement } : {} };
}
