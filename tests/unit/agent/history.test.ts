import { describe, expect, it } from 'vitest';
import { trimHistory } from '../../../src/agent/history.js';
import type { Message } from '../../../src/llm/types.js';

function conversation(exchanges: number, size = 400): Message[] {
  const messages: Message[] = [{ role: 'user', content: [{ type: 'text', text: 'TICKET' }] }];
  for (let i = 0; i < exchanges; i++) {
    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: `step ${i}` },
        { type: 'tool_use', id: `a${i}`, name: 'read_file', input: { path: `f${i}` } },
        { type: 'tool_use', id: `b${i}`, name: 'search', input: { pattern: 'x' } },
      ],
    });
    messages.push({
      role: 'user',
      content: [
        { type: 'tool_result', toolUseId: `a${i}`, content: 'x'.repeat(size), isError: false },
        { type: 'tool_result', toolUseId: `b${i}`, content: 'y'.repeat(size), isError: false },
      ],
    });
  }
  return messages;
}

/** Every tool_result's tool_use is in the message right before it. */
function pairsIntact(messages: Message[]): boolean {
  return messages.every((message, index) => {
    if (message.role !== 'user') return true;
    const previous = messages[index - 1];
    const asked = new Set(
      previous?.role === 'assistant'
        ? previous.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []))
        : [],
    );
    return message.content.every((block) => block.type !== 'tool_result' || asked.has(block.toolUseId));
  });
}

describe('trimHistory', () => {
  it('leaves a conversation under the budget untouched', () => {
    const messages = conversation(3);
    expect(trimHistory(messages, { maxTokens: 1_000_000 })).toEqual({ messages, droppedMessages: 0 });
  });

  it('keeps the first user turn, drops whole exchanges oldest first, and notes it', () => {
    const messages = conversation(10);
    const { messages: trimmed, droppedMessages } = trimHistory(messages, { maxTokens: 1_500 });
    expect(droppedMessages).toBeGreaterThan(0);
    expect(droppedMessages % 2).toBe(0);
    expect(trimmed.length).toBe(messages.length - droppedMessages);
    expect(trimmed[0]?.content[0]).toEqual({ type: 'text', text: 'TICKET' });
    expect(JSON.stringify(trimmed[0])).toMatch(
      new RegExp(`${droppedMessages} earlier messages were removed`),
    );
    expect(trimmed.slice(1).map((m) => m.role)).toEqual(
      trimmed.slice(1).map((_, i) => (i % 2 === 0 ? 'assistant' : 'user')),
    );
    expect(pairsIntact(trimmed)).toBe(true);
    expect(trimmed.at(-1)).toEqual(messages.at(-1));
  });

  it('keeps the newest exchange even when it alone is over the budget', () => {
    const messages = conversation(3, 50_000);
    const { messages: trimmed } = trimHistory(messages, { maxTokens: 100 });
    expect(trimmed).toHaveLength(3);
    expect(trimmed.slice(1)).toEqual(messages.slice(-2));
  });

  it('keeps a trailing assistant message (no tool results yet) with its exchange', () => {
    const messages = [
      ...conversation(6),
      { role: 'assistant', content: [{ type: 'text', text: 'final' }] } as Message,
    ];
    const { messages: trimmed } = trimHistory(messages, { maxTokens: 1_200 });
    expect(trimmed.at(-1)).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'final' }] });
    expect(pairsIntact(trimmed)).toBe(true);
  });

  it('does not modify its input', () => {
    const messages = conversation(10);
    const copy = structuredClone(messages);
    trimHistory(messages, { maxTokens: 1_000 });
    expect(messages).toEqual(copy);
  });
});
