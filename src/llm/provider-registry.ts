/**
 * Providers by name. Only the chosen provider's SDK is loaded (dynamic `import()`), and
 * credentials come only from the `env` passed in, which defaults to the host process's
 * environment — never from files, never from the sandbox.
 */
import { resolve } from 'node:path';
import { ConfigError, UsageError } from '../errors.js';
import { CassetteRecorder } from './recording.js';
import type { CassettePlayer } from './replay.js';
import type { RetryInfo, RetryPolicy } from './retry.js';
import type { ModelProvider, ModelRole } from './types.js';

export const PROVIDER_NAMES = ['anthropic', 'openai', 'replay'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

/** Environment variables that choose a provider or model explicitly (below flags, above the catalog). */
export const PROVIDER_ENV_VAR = 'SANDBOX_HARNESS_PROVIDER';
export const MODEL_ENV_VAR = 'SANDBOX_HARNESS_MODEL';

export type Env = Readonly<Record<string, string | undefined>>;

export function isProviderName(value: string): value is ProviderName {
  return (PROVIDER_NAMES as readonly string[]).includes(value);
}

function envValue(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

const NAMES_TEXT = PROVIDER_NAMES.join(', ');

export interface ChooseProviderInput {
  flagProvider?: string | undefined;
  flagModel?: string | undefined;
  env: Env;
  catalogProvider?: string | undefined;
  catalogModel?: string | undefined;
}

export interface ProviderChoice {
  name: ProviderName;
  model?: string;
  /** Where the provider name came from, for `--verbose` output and run records. */
  source: 'flag' | 'env' | 'catalog' | 'default';
}

export const NO_PROVIDER_MESSAGE = [
  'no model provider chosen. Choose one in any of these three ways:',
  `  1. the --provider flag (${NAMES_TEXT}; replay also needs --cassette <file>), optionally with --model`,
  `  2. environment variables: ANTHROPIC_API_KEY (anthropic), OPENAI_API_KEY or OPENAI_BASE_URL (openai), or ${PROVIDER_ENV_VAR}=<name>`,
  '  3. the catalog: `provider: anthropic` (and optionally `model:`)',
].join('\n');

/**
 * Order: flags, then the environment, then the catalog; when none names a provider, the
 * one whose credentials are present (anthropic first). A model is taken from the flag, the
 * environment, or the catalog — the catalog's only when its provider is the chosen one.
 */
export function chooseProvider(input: ChooseProviderInput): ProviderChoice {
  const envProvider = envValue(input.env, PROVIDER_ENV_VAR);
  let name: ProviderName;
  let source: ProviderChoice['source'];
  if (input.flagProvider !== undefined && input.flagProvider !== '') {
    if (!isProviderName(input.flagProvider)) {
      throw new UsageError(`unknown provider "${input.flagProvider}" for --provider`, {
        hint: `use one of: ${NAMES_TEXT}`,
      });
    }
    name = input.flagProvider;
    source = 'flag';
  } else if (envProvider !== undefined) {
    if (!isProviderName(envProvider)) {
      throw new UsageError(`unknown provider "${envProvider}" in ${PROVIDER_ENV_VAR}`, {
        hint: `use one of: ${NAMES_TEXT}`,
      });
    }
    name = envProvider;
    source = 'env';
  } else if (input.catalogProvider !== undefined && input.catalogProvider !== '') {
    if (!isProviderName(input.catalogProvider)) {
      throw new ConfigError(`unknown provider "${input.catalogProvider}" in the catalog`, [
        `provider: expected one of ${NAMES_TEXT}`,
      ]);
    }
    name = input.catalogProvider;
    source = 'catalog';
  } else if (envValue(input.env, 'ANTHROPIC_API_KEY') !== undefined) {
    name = 'anthropic';
    source = 'default';
  } else if (
    envValue(input.env, 'OPENAI_API_KEY') !== undefined ||
    envValue(input.env, 'OPENAI_BASE_URL') !== undefined
  ) {
    name = 'openai';
    source = 'default';
  } else {
    throw new UsageError(NO_PROVIDER_MESSAGE, {
      hint: 'e.g. export ANTHROPIC_API_KEY=..., or --provider replay --cassette demo.json',
    });
  }
  const catalogModelApplies = input.catalogProvider === undefined || input.catalogProvider === name;
  const model =
    (input.flagModel !== undefined && input.flagModel !== '' ? input.flagModel : undefined) ??
    envValue(input.env, MODEL_ENV_VAR) ??
    (catalogModelApplies && input.catalogModel !== '' ? input.catalogModel : undefined);
  return model === undefined ? { name, source } : { name, model, source };
}

export interface ProviderSessionOptions {
  /** Record every role's answers (for `fix --record`); save them with `recorder.save(file)`. */
  record?: boolean;
}

/**
 * What the providers of one run share, whatever their role: the cassettes they replay (one
 * player per file, so each role takes its own queue of the same file) and the recorder they
 * all add to. One session per run: concurrent runs (eval trials) must not share positions.
 */
export class ProviderSession {
  private readonly players = new Map<string, Promise<CassettePlayer>>();
  readonly recorder: CassetteRecorder | undefined;

  constructor(options: ProviderSessionOptions = {}) {
    this.recorder = options.record ? new CassetteRecorder() : undefined;
  }

  /** The run's player of a cassette file, loaded once. */
  player(file: string): Promise<CassettePlayer> {
    const key = resolve(file);
    let player = this.players.get(key);
    if (!player) {
      player = import('./replay.js').then(({ CassettePlayer }) => CassettePlayer.fromFile(file));
      // A file that failed to load is tried again by the next role, and fails the same way.
      player.catch(() => this.players.delete(key));
      this.players.set(key, player);
    }
    return player;
  }
}

export interface CreateProviderOptions {
  name: string;
  model?: string;
  /**
   * Who will call this provider (default `main`). A replay plays this role's queue of the
   * cassette; a recording files this role's answers under it.
   */
  role?: ModelRole;
  /**
   * Shared by all providers of one run: one cassette position per role, one recording.
   * Without it the provider stands alone (its own player, nothing recorded).
   */
  session?: ProviderSession;
  /** Required for `replay`. */
  cassette?: string;
  /** Where credentials and base URLs are read from; the host's environment by default. */
  env?: Env;
  /** Overrides ANTHROPIC_BASE_URL / OPENAI_BASE_URL. */
  baseUrl?: string;
  retry?: Partial<RetryPolicy>;
  /** Per HTTP request; a request that takes longer is a (retryable) connection failure. */
  requestTimeoutMs?: number;
  onRetry?: (info: RetryInfo) => void;
}

/**
 * A provider for one role of a run. With a recording session, the provider is wrapped so
 * that its answers land in that role's queue of the run's cassette.
 */
export async function createProvider(options: CreateProviderOptions): Promise<ModelProvider> {
  const provider = await createBareProvider(options);
  const recorder = options.session?.recorder;
  return recorder ? recorder.wrap(provider, options.role ?? 'main') : provider;
}

async function createBareProvider(options: CreateProviderOptions): Promise<ModelProvider> {
  const env = options.env ?? process.env;
  const common = {
    ...(options.retry ? { retry: options.retry } : {}),
    requestTimeoutMs: options.requestTimeoutMs,
    ...(options.onRetry ? { onRetry: options.onRetry } : {}),
  };
  switch (options.name) {
    case 'anthropic': {
      const apiKey = envValue(env, 'ANTHROPIC_API_KEY');
      if (apiKey === undefined) {
        throw new UsageError('the anthropic provider needs ANTHROPIC_API_KEY in the environment', {
          hint: 'export ANTHROPIC_API_KEY=..., or choose another provider with --provider',
        });
      }
      const { createAnthropicProvider, DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_ANTHROPIC_MODEL } =
        await import('./anthropic/anthropic-provider.js');
      return createAnthropicProvider({
        apiKey,
        baseUrl: options.baseUrl ?? envValue(env, 'ANTHROPIC_BASE_URL') ?? DEFAULT_ANTHROPIC_BASE_URL,
        model: options.model ?? DEFAULT_ANTHROPIC_MODEL,
        ...common,
      });
    }
    case 'openai': {
      const apiKey = envValue(env, 'OPENAI_API_KEY');
      const baseUrl = options.baseUrl ?? envValue(env, 'OPENAI_BASE_URL');
      if (apiKey === undefined && baseUrl === undefined) {
        throw new UsageError(
          'the openai provider needs OPENAI_API_KEY, or OPENAI_BASE_URL for a local server',
          {
            hint: 'e.g. OPENAI_BASE_URL=http://127.0.0.1:11434/v1 for Ollama',
          },
        );
      }
      const { createOpenAIProvider, DEFAULT_OPENAI_BASE_URL, DEFAULT_OPENAI_MODEL } =
        await import('./openai/openai-provider.js');
      const organization = envValue(env, 'OPENAI_ORG_ID');
      const project = envValue(env, 'OPENAI_PROJECT_ID');
      return createOpenAIProvider({
        ...(apiKey === undefined ? {} : { apiKey }),
        baseUrl: baseUrl ?? DEFAULT_OPENAI_BASE_URL,
        model: options.model ?? DEFAULT_OPENAI_MODEL,
        ...(organization === undefined ? {} : { organization }),
        ...(project === undefined ? {} : { project }),
        ...common,
      });
    }
    case 'replay': {
      if (options.cassette === undefined || options.cassette === '') {
        throw new UsageError('the replay provider needs a cassette file', { hint: 'pass --cassette <file>' });
      }
      const { CassettePlayer, ReplayProvider } = await import('./replay.js');
      const player = options.session
        ? await options.session.player(options.cassette)
        : await CassettePlayer.fromFile(options.cassette);
      return new ReplayProvider(player, undefined, options.role ?? 'main');
    }
    default:
      throw new UsageError(`unknown provider "${options.name}"`, { hint: `use one of: ${NAMES_TEXT}` });
  }
}

/**
 * Context window to trim history against. A rough, conservative figure per provider; a
 * local model served through the OpenAI API often has far less, so it can be set with
 * SANDBOX_HARNESS_CONTEXT_WINDOW. Replays never trim: a cassette was recorded untrimmed.
 */
export function contextWindowTokens(providerName: string, env: Env): number | undefined {
  const configured = Number(env.SANDBOX_HARNESS_CONTEXT_WINDOW);
  if (Number.isInteger(configured) && configured > 0) return configured;
  if (providerName === 'anthropic') return 200_000;
  if (providerName === 'openai') return 128_000;
  return undefined;
}
