import { z } from 'zod';
import { capText } from './result-text.js';
import { defineTool } from './types.js';

/** A conclusion is a summary; more than this is noise the main agent delegated to avoid. */
export const MAX_CONCLUSION_CHARS = 8_000;

/** The sub-agent's first (and only) user message: the task, and what its answer is for. */
export function subAgentMessage(task: string): string {
  return [
    '# Delegated task',
    '',
    'The main agent working in this sandbox handed you one task. You start without its conversation: everything you have is the task below, the system prompt and the workspace.',
    '',
    task.trim(),
    '',
    '## Your answer',
    '- Do this task only; do not set out to fix the whole ticket unless the task says so.',
    '- Files you change stay changed: they are part of the main agent’s attempt.',
    '- Your last reply, without any tool call, is all the main agent will see of your work: give your conclusion and the facts it needs (paths, line numbers, names, values), briefly.',
  ].join('\n');
}

export const delegateTool = defineTool({
  name: 'delegate',
  description:
    'Hand a self-contained sub-task to a sub-agent: it starts with an empty conversation, works in the same sandbox with the same tools (but cannot delegate), and only its final answer comes back to you. Use it for noisy work whose details you do not need to keep, e.g. "read the files under src/ and tell me which one computes the shipping cost, with the line". State exactly what it should report. Its turns and tokens count against your own limits.',
  input: z.object({
    task: z
      .string()
      .trim()
      .min(1)
      .describe('The sub-task and what to report back, self-contained: the sub-agent sees nothing else'),
  }),
  async run({ task }, { delegate, limits }) {
    if (!delegate) {
      return {
        content: 'delegate is not available here: do the task yourself with the other tools',
        isError: true,
      };
    }
    const outcome = await delegate(subAgentMessage(task));
    const cap = Math.min(MAX_CONCLUSION_CHARS, limits.maxOutputChars);
    const answer = outcome.finalText === '' ? '' : capText(outcome.finalText, cap, "the sub-agent's answer");
    if (outcome.status === 'completed') {
      return {
        content: answer === '' ? '(the sub-agent finished without an answer)' : answer,
        isError: false,
      };
    }
    const stopped = `the sub-agent stopped before it finished (${outcome.status}) after ${outcome.turns} turns`;
    return { content: answer === '' ? stopped : `${stopped}; its last words:\n${answer}`, isError: true };
  },
});
