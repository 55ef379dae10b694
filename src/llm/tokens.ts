import type { CompletionRequest, Message } from './types.js';

/**
 * Rough token estimate: about four characters per token for English and code. Used where
 * an API has no counting endpoint and for history trimming, which only needs to be in the
 * right neighbourhood (the trimming thresholds leave a margin for the error).
 */
export function estimateTokensForText(text: string): number {
  return Math.ceil(text.length / 4);
}

export function estimateTokensForMessages(messages: readonly Message[]): number {
  let total = 0;
  for (const message of messages) total += estimateTokensForText(JSON.stringify(message.content)) + 4;
  return total;
}

export function estimateRequestTokens(
  request: Pick<CompletionRequest, 'system' | 'messages' | 'tools'>,
): number {
  return (
    estimateTokensForText(request.system) +
    estimateTokensForText(JSON.stringify(request.tools)) +
    estimateTokensForMessages(request.messages)
  );
}
