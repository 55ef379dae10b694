import type Anthropic from '@anthropic-ai/sdk';
import { sdkErrorToHarness } from '../sdk-errors.js';
import { HarnessError, Interrupted, ModelError } from '../../errors.js';
import { withRetry, type RetryInfo, type RetryPolicy } from '../retry.js';
import { estimateRequestTokens } from '../tokens.js';
import { countRefused } from '../usage.js';
import { tokenCountProblem } from '../../numbers.js';
import type { Completion, CompletionRequest, ModelProvider } from '../types.js';
import {
  fromAnthropicResponse,
  toAnthropicMessages,
  toAnthropicRequest,
  toAnthropicTools,
} from './anthropic-mapping.js';

type AnthropicModule = typeof import('@anthropic-ai/sdk');

export const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com';
export const DEFAULT_ANTHROPIC_MODEL = 'claude-sonnet-4-5';

export interface AnthropicProviderOptions {
  apiKey: string;
  /** Always explicit: the SDK would otherwise read `process.env` behind our back. */
  baseUrl: string;
  model: string;
  retry?: Partial<RetryPolicy>;
  requestTimeoutMs?: number | undefined;
  onRetry?: (info: RetryInfo) => void;
}

export async function createAnthropicProvider(options: AnthropicProviderOptions): Promise<ModelProvider> {
  const sdk: AnthropicModule = await import('@anthropic-ai/sdk');
  const client = new sdk.Anthropic({
    apiKey: options.apiKey,
    baseURL: options.baseUrl,
    // Our retry loop is the only one (see retry.ts).
    maxRetries: 0,
    timeout: options.requestTimeoutMs ?? 600_000,
    // Explicit so the client reads no telemetry settings from the environment.
    openTelemetry: false,
  });
  return new AnthropicProvider(sdk, client, options);
}

class AnthropicProvider implements ModelProvider {
  readonly name = 'anthropic';
  readonly model: string;

  constructor(
    private readonly sdk: AnthropicModule,
    private readonly client: Anthropic,
    private readonly options: AnthropicProviderOptions,
  ) {
    this.model = options.model;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    const body = toAnthropicRequest(request, this.model);
    const estimatedInputTokens = estimateRequestTokens(request);
    // The answer is mapped (and its token counts checked) inside the retried call: an answer
    // refused for its counts is tried again like any other the server got wrong.
    return withRetry(
      async () => {
        const response = await this.client.messages.create(
          body,
          request.signal ? { signal: request.signal } : undefined,
        );
        if (!response || !Array.isArray((response as any).content)) {
          throw new ModelError('anthropic API answered with a body that is not a message (no content array)');
        }
        return fromAnthropicResponse(response, { estimatedInputTokens });
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
    try {
      const params: Anthropic.MessageCountTokensParams = {
        model: this.model,
        messages: toAnthropicMessages(request.messages),
      };
      if (request.system !== '') params.system = request.system;
      if (request.tools.length > 0) params.tools = toAnthropicTools(request.tools);
      const counted = await this.client.messages.countTokens(
        params,
        request.signal ? { signal: request.signal } : undefined,
      );
      // A server's count is a number like any other it sends: an impossible one is not used.
      const tokens: unknown = counted?.input_tokens;
      return tokenCountProblem(tokens) === undefined ? (tokens as number) : estimateRequestTokens(request);
    } catch (error) {
      const mapped = this.toError(error);
      if (mapped instanceof Interrupted) throw mapped;
      // Proxies and gateways often lack the counting endpoint; an estimate is good enough here.
      return estimateRequestTokens(request);
    }
  }

  private toError(error: unknown): HarnessError {
    return sdkErrorToHarness(error, this.sdk, 'anthropic');
  }
}
