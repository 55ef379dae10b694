import { z } from 'zod';
import { WORKSPACE } from '../../sandbox/types.js';
import { ToolError } from '../tool-errors.js';
import { resolveWorkspacePath, shellQuote } from './workspace-path.js';
import { defineTool } from './types.js';

const MAX_LINE_CHARS = 300;

/** The grep command line; every model-supplied value is single-quoted. */
export function searchCommand(pattern: string, base: string): string {
  return `grep -rnIE --exclude-dir=.git --exclude-dir=node_modules -e ${shellQuote(pattern)} -- ${shellQuote(base)}`;
}

export const searchTool = defineTool({
  name: 'search',
  description:
    'Search file contents in the workspace with an extended regular expression (grep -rnE), skipping .git, node_modules and binary files. Shows file:line:text. `path` limits the search to a file or directory.',
  input: z.object({
    pattern: z.string().min(1).describe('Extended regular expression (grep -E)'),
    path: z.string().optional().describe('File or directory relative to /workspace; default the root'),
  }),
  async run({ pattern, path: raw }, { sandbox, signal, limits }) {
    if (pattern.includes('\0') || pattern.includes('\n'))
      throw new ToolError('pattern must be a single line');
    const base = resolveWorkspacePath(raw ?? '.');
    const result = await sandbox.exec(searchCommand(pattern, base), {
      fast: true,
      cwd: WORKSPACE,
      timeoutMs: 60_000,
      maxOutputBytes: limits.maxCommandOutputBytes,
      ...(signal ? { signal } : {}),
    });
    const lines = result.stdout.split('\n').filter((line) => line !== '');
    if (lines.length === 0) {
      if (result.exitCode === 1 || (result.exitCode === 0 && result.stderr.trim() === '')) {
        return { content: `no matches for ${pattern} in ${base}`, isError: false, exitCode: result.exitCode };
      }
      if (result.timedOut) throw new ToolError('search timed out after 60s', 'narrow the search with path');
      throw new ToolError(
        `grep failed (exit code ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`,
      );
    }
    const shown = lines
      .slice(0, limits.maxSearchLines)
      .map((line) => (line.startsWith('./') ? line.slice(2) : line))
      .map((line) =>
        line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}... [line cut]` : line,
      );
    const notes: string[] = [];
    if (lines.length > shown.length)
      notes.push(
        `[${lines.length - shown.length} more matching lines not shown; narrow the pattern or path]`,
      );
    if (result.truncated || result.timedOut)
      notes.push('[the search output was cut short; there may be more matches]');
    return { content: [...shown, ...notes].join('\n'), isError: false, exitCode: result.exitCode };
  },
});
