/**
 * `logs --verbose`: the whole conversation of a run as text, from its `transcript.json`:
 * per attempt (and checker round) the model's text, every tool call with its input, every
 * result, each cut to a cap with a note saying how much was left out. The transcript is
 * data from a run folder: anything not of the expected shape is skipped, never trusted.
 */

/** Characters shown of one item (a text, an input, a result) before it is cut. */
export const CONVERSATION_ITEM_CHARS = 2000;

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function capped(text: string, cap: number): string {
  if (text.length <= cap) return text;
  return `${text.slice(0, cap)}\n… (${text.length - cap} more characters cut; the whole text is in transcript.json)`;
}

function indent(text: string, prefix: string): string {
  return text
    .split('\n')
    .map((line) => `${prefix}${line}`)
    .join('\n');
}

function blockLines(block: unknown, cap: number, prefix: string): string[] {
  if (typeof block === 'string') return [`${prefix}text:`, indent(capped(block, cap), `${prefix}  `)];
  if (!isObject(block)) return [];
  switch (block.type) {
    case 'text':
      return typeof block.text === 'string'
        ? [`${prefix}model:`, indent(capped(block.text, cap), `${prefix}  `)]
        : [];
    case 'tool_use': {
      const input = JSON.stringify(block.input ?? {}, null, 2) ?? '{}';
      return [
        `${prefix}tool call ${typeof block.name === 'string' ? block.name : '?'} (${typeof block.id === 'string' ? block.id : '?'}):`,
        indent(capped(input, cap), `${prefix}  `),
      ];
    }
    case 'tool_result': {
      const content = typeof block.content === 'string' ? block.content : JSON.stringify(block.content ?? '');
      return [
        `${prefix}tool result${block.isError === true ? ' (error)' : ''} (${typeof block.toolUseId === 'string' ? block.toolUseId : '?'}):`,
        indent(capped(content, cap), `${prefix}  `),
      ];
    }
    default:
      return [];
  }
}

function messagesLines(messages: unknown, cap: number, prefix: string): string[] {
  if (!Array.isArray(messages)) return [];
  const lines: string[] = [];
  for (const message of messages) {
    if (!isObject(message)) continue;
    const content = typeof message.content === 'string' ? [message.content] : message.content;
    if (!Array.isArray(content)) continue;
    if (message.role === 'user' && content.every((b) => isObject(b) && b.type === 'text')) {
      for (const b of content as Json[])
        if (typeof b.text === 'string')
          lines.push(`${prefix}user:`, indent(capped(b.text, cap), `${prefix}  `));
      continue;
    }
    for (const block of content) lines.push(...blockLines(block, cap, prefix));
  }
  return lines;
}

export function formatConversation(transcript: unknown, cap = CONVERSATION_ITEM_CHARS): string[] {
  if (!Array.isArray(transcript))
    return ['(no conversation recorded: transcript.json is missing or not a list)'];
  const lines: string[] = [];
  for (const entry of transcript) {
    if (!isObject(entry)) continue;
    const attempt = typeof entry.attempt === 'number' ? `attempt ${entry.attempt}` : 'conversation';
    const role = typeof entry.role === 'string' ? ` (${entry.role})` : '';
    lines.push('', `=== ${attempt}${role}`);
    lines.push(...messagesLines(entry.messages, cap, '  '));
    if (Array.isArray(entry.delegations)) {
      for (const d of entry.delegations) {
        if (!isObject(d)) continue;
        lines.push(`  --- sub-agent of call ${typeof d.toolUseId === 'string' ? d.toolUseId : '?'}`);
        lines.push(...messagesLines(d.messages, cap, '    '));
      }
    }
  }
  if (lines.length === 0) return ['(no conversation recorded)'];
  return lines;
}
