/**
 * Which agent works a run's tickets, and for a CLI agent, where its model calls go: the kind
 * (`--agent`, else the catalog's `agent.kind`, else `builtin`), its model (the provider
 * choice's, else the kind's default), and the bridge's upstream, built on the host from the
 * provider's credentials (which never enter a sandbox) or, for a replay, from a recorded
 * bridge session.
 */
import { resolve } from 'node:path';
import type { AgentKind, CliKind, WireFamily } from '../agent-kinds/agent-kind.js';
import { resolveAgentKind } from '../agent-kinds/kind-registry.js';
import type { LoadedCatalog } from '../catalog/load.js';
import { UsageError } from '../errors.js';
import type { ProviderChoice } from '../llm/provider-registry.js';
import type { Completion, ModelProvider } from '../llm/types.js';
import { ReplayUpstream } from '../model-bridge/bridge-replay.js';
import { readTranscript } from '../model-bridge/transcript.js';
import { HttpUpstream, type Upstream } from '../model-bridge/upstream.js';

const ANTHROPIC_URL = 'https://api.anthropic.com';
const OPENAI_URL = 'https://api.openai.com/v1';

/** A CLI agent's side of a run: its kind, its model, and the bridge's upstream. */
export interface CliAgent {
  kind: CliKind;
  model: string;
  upstream: Upstream;
}

const envValue = (env: NodeJS.ProcessEnv, name: string) => {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
};

/** The family the provider's API speaks; undefined for a replay of the built-in loop's cassettes. */
function familyOf(
  choice: ProviderChoice,
  cassette: string | undefined,
): WireFamily | 'bridge-replay' | undefined {
  if (choice.name === 'anthropic' || choice.name === 'openai') return choice.name;
  return cassette?.endsWith('.jsonl') ? 'bridge-replay' : undefined;
}

/** The provider's real endpoint and key, read on the host. */
function httpUpstream(family: WireFamily, env: NodeJS.ProcessEnv): HttpUpstream {
  if (family === 'anthropic') {
    const apiKey = envValue(env, 'ANTHROPIC_API_KEY');
    if (!apiKey) throw new UsageError('the anthropic provider needs ANTHROPIC_API_KEY in the environment');
    return new HttpUpstream({
      anthropic: { baseUrl: envValue(env, 'ANTHROPIC_BASE_URL') ?? ANTHROPIC_URL, apiKey },
    });
  }
  return new HttpUpstream({
    openai: {
      baseUrl: envValue(env, 'OPENAI_BASE_URL') ?? OPENAI_URL,
      apiKey: envValue(env, 'OPENAI_API_KEY') ?? '',
    },
  });
}

/**
 * The run's agent kind; for a CLI kind also its model and upstream. `agent` is `--agent`
 * (or a suite task's), which wins over the catalog.
 */
export async function chooseAgent(input: {
  agent: string | undefined;
  catalog: LoadedCatalog;
  choice: ProviderChoice;
  cassette: string | undefined;
  env: NodeJS.ProcessEnv;
  cwd: string;
}): Promise<{ kind: AgentKind; cli?: CliAgent }> {
  const { catalog, choice } = input;
  const name = input.agent ?? catalog.catalog.agent.kind;
  const where = input.agent !== undefined ? '--agent' : `${catalog.displayPath}: agent.kind`;
  if (name === 'builtin') return { kind: resolveAgentKind(name, { family: undefined, where }) };
  const family = familyOf(choice, input.cassette);
  const recording =
    family === 'bridge-replay' ? await readTranscript(resolve(input.cwd, input.cassette!)) : undefined;
  const replay = recording ? new ReplayUpstream(recording) : undefined;
  const spoken = replay
    ? ([...replay.families][0] as WireFamily | undefined)
    : (family as WireFamily | undefined);
  const kind = resolveAgentKind(name, { family: spoken, command: catalog.catalog.agent.command, where });
  if (kind.runs !== 'cli') return { kind };
  const model =
    choice.model ?? recording?.find((exchange) => exchange.model !== undefined)?.model ?? kind.defaultModel;
  return { kind, cli: { kind, model, upstream: replay ?? httpUpstream(kind.family, input.env) } };
}

/**
 * The run's `provider` when a CLI agent makes the model calls: its name and model for the
 * record and the progress line; nothing calls it (the bridge does the calling).
 */
export function bridgedProvider(name: string, model: string): ModelProvider {
  const refuse = (): Promise<Completion> =>
    Promise.reject(new Error('a CLI agent calls its model through the model bridge, not the provider'));
  return { name, model, complete: refuse, countTokens: () => Promise.resolve(0) };
}
