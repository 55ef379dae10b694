import { z } from 'zod';
import type { Library } from '../library.js';
import { ToolError } from '../tool-errors.js';
import { capText } from './result-text.js';
import { defineTool, type AgentTool } from './types.js';

/**
 * `read_doc`: one of the topic documents the system prompt lists, as it is in the pristine
 * repository (never the sandbox's copy, which the agent may have changed).
 */
export function readDocTool(library: Library): AgentTool {
  return defineTool({
    name: 'read_doc',
    description:
      "Read one of the repository's topic documents listed in the system prompt under 'Topic documents', by its path (e.g. docs/architecture.md).",
    input: z.object({ path: z.string().describe('The document path as listed in the system prompt') }),
    async run({ path }, { limits }) {
      const wanted = path.replace(/^\.?\/+/, '').replace(/^workspace\//, '');
      const doc = library.docs.find((d) => d.path === wanted);
      if (!doc) {
        throw new ToolError(
          `no topic document ${JSON.stringify(path)}`,
          `the documents are: ${library.docs.map((d) => d.path).join(', ') || '(none)'}`,
        );
      }
      return { content: capText(doc.content, limits.maxOutputChars, doc.path), isError: false };
    },
  });
}
