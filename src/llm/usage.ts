/**
 * What a model server says an answer used, checked before it is believed. Its token counts
 * price the call, feed the cost limit and end up in the record: a count that is negative, a
 * string, a fraction, NaN or past any context window is not a count, and an answer that
 * carries one is refused (a retryable `ModelError`, as for a garbled body: the next try may
 * be sound). The call happened all the same, so the refusal carries the harness's own count
 * of it (the request it sent, the content it got back), which the cost meter adds instead.
 * A count the server leaves out (or gives as 0 for something that is not empty) is likewise
 * replaced by that estimate: a server that does not count must not make a call free.
 */
import { ModelError } from '../errors.js';
import { NUMBER_CAPS, tokenCountProblem } from '../numbers.js';
import { estimateTokensForText } from './tokens.js';
import type { AssistantContent, CompletionRequest, Usage } from './types.js';

/** The harness's own count of a call: `inputTokens` as estimated for the request, and the content it got. */
export function estimatedUsage(inputTokens: number, content: readonly AssistantContent[]): Usage {
  return { inputTokens, outputTokens: estimateTokensForText(JSON.stringify(content)) };
}

/** The error for an answer whose counts cannot be; `estimate` is what the call is counted as. */
export function impossibleUsage(provider: string, problems: readonly string[], estimate: Usage): ModelError {
  return new ModelError(
    `${provider} reported token counts that cannot be (${problems.join('; ')}); the answer is refused`,
    true,
    {
      hint: "The model server miscounts its usage; the harness counts such calls with its own estimate. Report it to the server's maintainers.",
      details: { refusedUsage: estimate },
    },
  );
}

/**
 * Each count as reported (a missing one, `undefined` or `null`, stays undefined), or an
 * `impossibleUsage` error naming every count that is not a whole number from 0 to the cap.
 */
export function reportedCounts<K extends string>(
  provider: string,
  fields: Record<K, unknown>,
  estimate: Usage,
): Record<K, number | undefined> {
  const problems: string[] = [];
  const counts = {} as Record<K, number | undefined>;
  for (const name of Object.keys(fields) as K[]) {
    const value = fields[name];
    if (value === undefined || value === null) continue;
    const problem = tokenCountProblem(value);
    if (problem) problems.push(`${name}: ${problem}`);
    else counts[name] = value as number;
  }
  if (problems.length > 0) throw impossibleUsage(provider, problems, estimate);
  return counts;
}

/** A usage object as sent: an object, or absent; anything else cannot be usage. */
export function usageObject(provider: string, value: unknown, estimate: Usage): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value))
    throw impossibleUsage(
      provider,
      [`usage: expected an object, got ${Array.isArray(value) ? 'a list' : typeof value}`],
      estimate,
    );
  return value as Record<string, unknown>;
}

/** A count the server gave, or the estimate when it gave none, or 0 where the estimate says otherwise. */
export function countOrEstimate(reported: number | undefined, estimate: number): number {
  return reported !== undefined && reported > 0 ? reported : estimate;
}

/** A sum of reported counts, refused when it passes the cap though each part does not. */
export function summedCount(
  provider: string,
  name: string,
  parts: readonly number[],
  estimate: Usage,
): number {
  const sum = parts.reduce((a, b) => a + b, 0);
  if (sum > NUMBER_CAPS.tokensPerCall)
    throw impossibleUsage(
      provider,
      [`${name}: expected at most ${NUMBER_CAPS.tokensPerCall}, got ${sum}`],
      estimate,
    );
  return sum;
}

/** Why a neutral `Usage` (from any provider) cannot be, or undefined. */
export function usageProblem(usage: Usage): string | undefined {
  for (const [name, value] of Object.entries(usage)) {
    if (value === undefined) continue;
    const problem = tokenCountProblem(value);
    if (problem) return `${name}: ${problem}`;
  }
  return undefined;
}

/** The harness's count of an answer that was refused for its usage (see `impossibleUsage`), if `error` is one. */
export function refusedUsageOf(error: unknown): Usage | undefined {
  if (!(error instanceof ModelError)) return undefined;
  const usage = error.details?.['refusedUsage'];
  return usage && typeof usage === 'object' && usageProblem(usage as Usage) === undefined
    ? (usage as Usage)
    : undefined;
}

/** Tells the request of an answer refused for its counts (`error`), so the call is still counted; returns `error`. */
export function countRefused<E>(
  error: E,
  request: Pick<CompletionRequest, 'onRefusedUsage'>,
  model: string,
): E {
  const usage = refusedUsageOf(error);
  if (usage) request.onRefusedUsage?.(usage, model);
  return error;
}
