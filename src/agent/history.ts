/**
 * History trimming for long conversations. The first user message (ticket, rules,
 * feedback) is always kept; after it, whole exchanges — an assistant message and the user
 * message carrying its tool results — are dropped oldest first, so a tool_result never
 * loses its tool_use and roles keep alternating.
 */
import { estimateTokensForMessages } from '../llm/tokens.js';
import type { Message, UserMessage } from '../llm/types.js';

export interface TrimOptions {
  /** Budget for the messages alone (system prompt, tools and the reply are reserved elsewhere). */
  maxTokens: number;
  estimate?: (messages: readonly Message[]) => number;
}

export interface TrimResult {
  messages: Message[];
  /** How many messages were left out. */
  droppedMessages: number;
}

export function trimNote(droppedMessages: number): string {
  return `[${droppedMessages} earlier messages were removed to fit the context window. Re-read files if you need their current content.]`;
}

export function trimHistory(messages: readonly Message[], options: TrimOptions): TrimResult {
  const estimate = options.estimate ?? estimateTokensForMessages;
  const first = messages[0];
  if (!first || messages.length <= 2 || estimate(messages) <= options.maxTokens) {
    return { messages: [...messages], droppedMessages: 0 };
  }
  const groups: Message[][] = [];
  for (const message of messages.slice(1)) {
    const current = groups[groups.length - 1];
    if (message.role === 'assistant' || !current) groups.push([message]);
    else current.push(message);
  }
  const firstTokens =
    estimate([first]) + estimate([{ role: 'user', content: [{ type: 'text', text: trimNote(999_999) }] }]);
  const groupTokens = groups.map((group) => estimate(group));
  let total = firstTokens + groupTokens.reduce((sum, tokens) => sum + tokens, 0);
  let start = 0;
  let dropped = 0;
  // The newest exchange always stays: without it the model loses what it just did.
  while (total > options.maxTokens && start < groups.length - 1) {
    total -= groupTokens[start] ?? 0;
    dropped += groups[start]?.length ?? 0;
    start++;
  }
  if (dropped === 0) return { messages: [...messages], droppedMessages: 0 };
  const annotatedFirst: Message =
    first.role === 'user'
      ? ({
          role: 'user',
          content: [...first.content, { type: 'text', text: trimNote(dropped) }],
        } satisfies UserMessage)
      : first;
  return { messages: [annotatedFirst, ...groups.slice(start).flat()], droppedMessages: dropped };
}
