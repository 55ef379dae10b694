import picomatch from 'picomatch';
import { z } from 'zod';
import { ToolError } from '../tool-errors.js';
import { resolveWorkspacePath } from './workspace-path.js';
import { defineTool } from './types.js';

export const listFilesTool = defineTool({
  name: 'list_files',
  description:
    'List files below a workspace directory, recursively (skipping .git and node_modules). `path` defaults to the workspace root; `pattern` is an optional glob (e.g. "*.ts" or "src/**/*.test.ts").',
  input: z.object({
    path: z.string().optional().describe('Directory relative to /workspace; default the root'),
    pattern: z.string().optional().describe('Glob filter; without a slash it matches file names'),
  }),
  async run({ path: raw, pattern }, { sandbox, limits }) {
    const base = resolveWorkspacePath(raw ?? '.');
    let matches: ((path: string) => boolean) | undefined;
    if (pattern !== undefined && pattern !== '') {
      try {
        matches = picomatch(pattern, { dot: true, basename: !pattern.includes('/') });
      } catch {
        throw new ToolError(`invalid glob pattern: ${pattern}`);
      }
    }
    const scanLimit = limits.maxListEntries * 10;
    const entries = await sandbox.listFiles(base, { maxEntries: scanLimit, fast: true });
    const shown: string[] = [];
    let matched = 0;
    for (const entry of entries) {
      const relativeToBase = base === '.' ? entry.path : entry.path.slice(base.length + 1);
      if (matches && !matches(entry.path) && !matches(relativeToBase)) continue;
      matched++;
      if (shown.length < limits.maxListEntries) {
        shown.push(
          entry.type === 'directory'
            ? `${entry.path}/`
            : entry.type === 'symlink'
              ? `${entry.path} (symlink)`
              : entry.path,
        );
      }
    }
    const scanCut = entries.length >= scanLimit;
    if (matched === 0 && !scanCut) {
      return { content: `no files${pattern ? ` matching ${pattern}` : ''} under ${base}`, isError: false };
    }
    if (matched > shown.length) {
      shown.push(
        `[${matched - shown.length} more entries not shown; narrow the listing with path or pattern]`,
      );
    }
    if (scanCut) shown.push(`[the listing stopped after ${scanLimit} entries; narrow it with path]`);
    return { content: shown.join('\n'), isError: false };
  },
});
