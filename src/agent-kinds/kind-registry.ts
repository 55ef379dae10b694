/**
 * Agent kinds by name: the one list the catalog, a suite task and `--agent` choose from, and
 * the one place a name becomes a kind. Unknown names and names that cannot run yet are
 * refused here, with the list or the reason.
 */
import { ConfigError } from '../errors.js';
import type { AgentKind, CliKind, LoopKind, WireFamily } from './agent-kind.js';
import { CLAUDE_CODE, CODEX, commandKind, GEMINI, OPENCODE } from './cli-kinds.js';

export const BUILTIN: LoopKind = {
  name: 'builtin',
  description: "the harness's own agent loop and tools (the default)",
  runs: 'loop',
};

export const AGENT_KIND_NAMES = ['builtin', 'claude-code', 'codex', 'command', 'gemini', 'opencode'] as const;
export type AgentKindName = (typeof AGENT_KIND_NAMES)[number];

/** Every kind as `doctor` lists it (`command` with the family it takes from the provider). */
export function allAgentKinds(): AgentKind[] {
  return [BUILTIN, CLAUDE_CODE, CODEX, commandKind('anthropic'), GEMINI, OPENCODE];
}

export function isAgentKindName(name: string): name is AgentKindName {
  return (AGENT_KIND_NAMES as readonly string[]).includes(name);
}

/**
 * The kind a run uses. `family` is the API its provider answers (the `command` kind speaks
 * whichever that is; the others must match it); `command` is the catalog's `agent.command`.
 * `where` names who chose it, for the message (`--agent`, `catalog.yaml: agent.kind`).
 */
export function resolveAgentKind(
  name: string,
  options: { family: WireFamily | undefined; command?: string | undefined; where: string },
): AgentKind {
  if (!isAgentKindName(name)) {
    throw new ConfigError(`${options.where}: unknown agent "${name}"`, [
      `expected one of ${AGENT_KIND_NAMES.join(', ')}`,
    ]);
  }
  if (name === 'builtin') return BUILTIN;
  const kind = name === 'command' ? undefined : allAgentKinds().find((k) => k.name === name)!;
  if (kind?.runs === 'unavailable') {
    throw new ConfigError(`${options.where}: the ${name} agent cannot run yet: ${kind.why}`);
  }
  if (name === 'command' && !options.command) {
    throw new ConfigError(`${options.where}: the command agent needs the catalog's agent.command`, [
      'agent.command: expected the command line of a program in the sandbox image',
    ]);
  }
  if (!options.family) {
    throw new ConfigError(
      `${options.where}: the ${name} agent reaches its model through the model bridge, which cannot replay the built-in agent's cassettes`,
      [],
      { hint: 'Use --provider anthropic or openai, or --cassette with a bridge recording (a .jsonl file).' },
    );
  }
  if (name === 'command') return commandKind(options.family);
  const cli = kind as CliKind;
  if (cli.family !== options.family) {
    throw new ConfigError(
      `${options.where}: the ${name} agent speaks the ${cli.family === 'anthropic' ? 'Anthropic Messages' : 'OpenAI Responses'} API, but the run's provider is ${options.family}: use --provider ${cli.family}`,
    );
  }
  return cli;
}
