import { z } from 'zod';
import { SandboxFileError } from '../../errors.js';
import { ToolError } from '../tool-errors.js';
import { capText } from './result-text.js';
import { resolveFilePath } from './workspace-path.js';
import { defineTool } from './types.js';

export const readFileTool = defineTool({
  name: 'read_file',
  description:
    "Read a text file from the workspace. `path` is relative to /workspace. Very long files are shown with the middle cut out; read a range with run_command (e.g. sed -n '100,200p' FILE).",
  input: z.object({ path: z.string().describe('File path relative to /workspace') }),
  async run({ path: raw }, { sandbox, limits }) {
    const path = resolveFilePath(raw);
    let content: Buffer;
    try {
      // Its content is the agent's own information: the fast channel may carry it (see run_command).
      content = await sandbox.readFile(path, { maxBytes: limits.maxReadBytes, fast: true });
    } catch (error) {
      if (error instanceof SandboxFileError) {
        throw new ToolError(
          error.message,
          `check the path with list_files; for a file over ${limits.maxReadBytes} bytes read a range with run_command`,
        );
      }
      throw error;
    }
    if (content.includes(0)) {
      return {
        content: `${path} is a binary file (${content.length} bytes); its content is not shown`,
        isError: false,
      };
    }
    if (content.length === 0) return { content: `${path} is empty`, isError: false };
    return { content: capText(content.toString('utf8'), limits.maxOutputChars, path), isError: false };
  },
});
