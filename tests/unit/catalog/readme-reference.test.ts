import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { readmeWithReferences } from '../../../scripts/readme-reference.js';
import { catalogReferenceMarkdown, replaceMarkedBlock } from '../../../src/catalog/reference.js';
import { toolsReferenceMarkdown } from '../../../src/agent/tools/tools-reference.js';

describe('the README references generated from the zod schemas', () => {
  it('are up to date (run `npm run schema` after changing a catalog key or a tool input)', async () => {
    const readme = await readFile(new URL('../../../README.md', import.meta.url), 'utf8');
    expect(readmeWithReferences(readme) === readme, 'README.md is out of date: run `npm run schema`').toBe(
      true,
    );
  });

  it('list every catalog key, nested ones dotted, and every tool with its inputs', () => {
    const catalog = catalogReferenceMarkdown();
    for (const key of [
      '`agent.editableFiles`',
      '`agent.heldOutTests`',
      '`sandbox.timeouts.runSec`',
      '`agent.testCommand[].command`',
    ])
      expect(catalog).toContain(key);
    const tools = toolsReferenceMarkdown();
    for (const tool of [
      'read_file',
      'write_file',
      'edit_file',
      'list_files',
      'search',
      'run_command',
      'delegate',
    ])
      expect(tools).toContain(`#### \`${tool}\``);
    expect(tools).toMatch(/\| `command` \| string \| yes \|/);
  });

  it('refuses a README without the markers rather than appending somewhere', () => {
    expect(() => replaceMarkedBlock('no markers here', 'catalog-reference', 'x')).toThrow(/markers/);
  });
});
