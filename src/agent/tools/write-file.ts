import { z } from 'zod';
import { ToolError } from '../tool-errors.js';
import { assertEditable, resolveFilePath } from './workspace-path.js';
import { defineTool } from './types.js';

export const writeFileTool = defineTool({
  name: 'write_file',
  description:
    'Create or overwrite a file in the workspace with the given content. `path` is relative to /workspace. Only editable paths may be written. Prefer edit_file for small changes to existing files.',
  input: z.object({
    path: z.string().describe('File path relative to /workspace'),
    content: z.string().describe('The complete new content of the file'),
  }),
  async run({ path: raw, content }, { sandbox, editable, limits, signal }) {
    const path = resolveFilePath(raw);
    assertEditable(path, editable);
    const bytes = Buffer.byteLength(content, 'utf8');
    if (bytes > limits.maxWriteBytes) {
      throw new ToolError(
        `content is ${bytes} bytes, over the ${limits.maxWriteBytes}-byte limit for write_file`,
      );
    }
    // Written by the agent into its own sandbox; every change is gated and verified afterwards.
    await sandbox.writeFiles([{ path, content }], { fast: true, ...(signal ? { signal } : {}) });
    return { content: `wrote ${bytes} bytes to ${path}`, isError: false };
  },
});
