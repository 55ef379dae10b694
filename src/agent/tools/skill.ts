import { z } from 'zod';
import type { Library } from '../library.js';
import { ToolError } from '../tool-errors.js';
import { capText } from './result-text.js';
import { defineTool, type AgentTool } from './types.js';

/** `skill`: loads the instructions of one skill the system prompt lists, by name. */
export function skillTool(library: Library): AgentTool {
  return defineTool({
    name: 'skill',
    description:
      "Load a skill's instructions (listed in the system prompt under 'Skills') when its description matches the task at hand.",
    input: z.object({ name: z.string().describe('The skill name as listed in the system prompt') }),
    async run({ name }, { limits }) {
      const skill = library.skills.find((s) => s.name === name);
      if (!skill) {
        throw new ToolError(
          `no skill named ${JSON.stringify(name)}`,
          `the skills are: ${library.skills.map((s) => s.name).join(', ') || '(none)'}`,
        );
      }
      const text = `# Skill: ${skill.name}\n(from ${skill.folder}/SKILL.md)\n\n${skill.body.trim()}\n`;
      return { content: capText(text, limits.maxOutputChars, `${skill.folder}/SKILL.md`), isError: false };
    },
  });
}
