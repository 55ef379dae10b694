import type OpenAI from 'openai';
import { sdkErrorToHarness } from '../sdk-errors.js';
import { HarnessError, ModelError } from '../../errors.js';
import { withRetry, type RetryInfo, type RetryPolicy } from '../retry.js';
import { estimateRequestTokens } from '../tokens.js';
import { countRefused } from '../usage.js';
import type { Completion, CompletionRequest, ModelProvider } from '../types.js';
import { fromOpenAIResponse, toOpenAIRequest } from './openai-mapping.js';

type OpenAIModule = typeof import('openai');

export const DEFAULT_OPENAI_BASE_URL = 'https://api.openai.com/v1';
export const DEFAULT_OPENAI_MODEL = 'gpt-4.1';
/**
 * Local servers (Ollama, vLLM) need no key, but the SDK refuses to start without one. This
 * placeholder is what gets sent instead; it is not a secret.
 */
export const PLACEHOLDER_API_KEY = 'sandbox-harness-no-key';

export interface OpenAIProviderOptions {
  apiKey?: string;
  /** Always explicit: the SDK would otherwise read `process.env` behind our back. */
  baseUrl: string;
  model: string;
  organization?: string;
  project?: string;
  retry?: Partial<RetryPolicy>;
  requestTimeoutMs?: number | undefined;
  onRetry?: (info: RetryInfo) => void;
}

export async function createOpenAIProvider(options: OpenAIProviderOptions): Promise<ModelProvider> {
  const sdk: OpenAIModule = await import('openai');
  const client = new sdk.OpenAI({
    apiKey: options.apiKey ?? PLACEHOLDER_API_KEY,
    baseURL: options.baseUrl,
    organization: options.organization ?? null,
    project: options.project ?? null,
    webhookSecret: null,
    // Our retry loop is the only one (see retry.ts).
    maxRetries: 0,
    timeout: options.requestTimeoutMs ?? 600_000,
  });
  return new OpenAIProvider(sdk, client, options);
}

function isOfficialOpenAI(baseUrl: string): boolean {
  try {
    return new URL(baseUrl).hostname === 'api.openai.com';
  } catch {
    return false;
  }
}

class OpenAIProvider implements ModelProvider {
  readonly name = 'openai';
  readonly model: string;
  private recoveredIds = 0;

  constructor(
    private readonly sdk: OpenAIModule,
    private readonly client: OpenAI,
    private readonly options: OpenAIProviderOptions,
  ) {
    this.model = options.model;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    const body = toOpenAIRequest(request, this.model, {
      useMaxCompletionTokens: isOfficialOpenAI(this.options.baseUrl),
    });
    const estimatedInputTokens = estimateRequestTokens(request);
    // The answer is mapped (and its token counts checked) inside the retried call: an answer
    // refused for its counts is tried again like any other the server got wrong.
    return withRetry(
      async () => {
        const response = await this.client.chat.completions.create(
          body,
          request.signal ? { signal: request.signal } : undefined,
        );
        if (!response || !Array.isArray((response as any).choices)) {
          throw new ModelError(
            'the OpenAI-compatible server answered with a body that is not a chat completion',
          );
        }
        return fromOpenAIResponse(response, {
          knownTools: new Set(request.tools.map((tool) => tool.name)),
          newId: () => `call_recovered_${++this.recoveredIds}`,
          fallbackModel: this.model,
          estimatedInputTokens,
        });
      },
      {
        toError: (error) => countRefused(this.toError(error), request, this.model),
        ...(request.signal ? { signal: request.signal } : {}),
        ...(this.options.retry ? { policy: this.options.retry } : {}),
        ...(this.options.onRetry ? { onRetry: this.options.onRetry } : {}),
      },
    );
  }

  async countTokens(request: CompletionRequest): Promise<number> {
    // Chat Completions has no counting endpoint.
    return estimateRequestTokens(request);
  }

  private toError(error: unknown): HarnessError {
    return sdkErrorToHarness(error, this.sdk, 'openai');
  }
}
