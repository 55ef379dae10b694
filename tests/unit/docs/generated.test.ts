import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { GENERATED_BLOCKS, withGeneratedBlocks } from '../../../scripts/docs-reference.js';
import { catalogReferenceMarkdown, replaceMarkedBlock } from '../../../src/catalog/reference.js';
import { toolsReferenceMarkdown } from '../../../src/agent/tools/tools-reference.js';
import { createDefaultToolRegistry } from '../../../src/agent/tools/tool-registry.js';
import { cliReferenceMarkdown } from '../../../src/cli/help-reference.js';
import { outcomesReferenceMarkdown } from '../../../src/cli/outcome-reference.js';
import { COMMANDS } from '../../../src/cli/index.js';
import { RUN_OUTCOMES } from '../../../src/outcomes.js';
import { ROOT } from '../../helpers/cli.js';

const run = promisify(execFile);

describe('the generated parts of the docs', () => {
  it('are up to date: `npm run schema -- --check` passes (run `npm run schema` after changing a catalog key, a tool input, a command or an outcome)', async () => {
    const { stdout } = await run(
      join(ROOT, 'node_modules', '.bin', 'tsx'),
      ['scripts/generate-schema.ts', '--check'],
      {
        cwd: ROOT,
      },
    ).catch((error: { stdout?: string; stderr?: string }) => {
      throw new Error(`npm run schema -- --check failed:\n${error.stderr ?? ''}${error.stdout ?? ''}`);
    });
    for (const file of new Set(GENERATED_BLOCKS.map((b) => b.file)))
      expect(stdout).toContain(`${file} is up to date`);
  }, 60_000);

  it('a stale page is seen as stale (so the check above can fail)', async () => {
    const page = await readFile(join(ROOT, 'docs', 'catalog.md'), 'utf8');
    expect(withGeneratedBlocks('docs/catalog.md', page)).toBe(page);
    const stale = page.replace('`agent.editableFiles`', '`agent.editableFile`');
    expect(withGeneratedBlocks('docs/catalog.md', stale)).not.toBe(stale);
  });

  it('list every catalog key, nested ones dotted, every tool with its inputs, every command and every outcome', () => {
    const catalog = catalogReferenceMarkdown();
    for (const key of [
      '`agent.editableFiles`',
      '`agent.heldOutTests`',
      '`sandbox.timeouts.runSec`',
      '`agent.testCommand[].command`',
    ])
      expect(catalog).toContain(key);
    const tools = toolsReferenceMarkdown();
    // Every tool the registry offers (delegate included), by the name the model is sent.
    const names = createDefaultToolRegistry({ delegate: true })
      .definitions()
      .map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['read_file', 'run_command', 'delegate']));
    for (const tool of names) expect(tools).toContain(`### \`${tool}\``);
    expect(tools).toMatch(/\| `command` \| string \| yes \|/);
    const cli = cliReferenceMarkdown();
    expect(COMMANDS.length).toBeGreaterThan(10);
    for (const name of ['fix', 'eval', 'inspect', 'gc', 'catalog validate', 'images ensure'])
      expect(cli).toContain(`\`sandbox-harness ${name}\``);
    expect(cli).toContain('--cassette <file>');
    const outcomes = outcomesReferenceMarkdown();
    for (const outcome of RUN_OUTCOMES) expect(outcomes).toContain(`| \`${outcome}\` |`);
    expect(outcomes).toContain('| `not-applied` | 4 | pass |');
  });

  it('refuses a page without the markers rather than appending somewhere', () => {
    expect(() => replaceMarkedBlock('no markers here', 'catalog-reference', 'x')).toThrow(/markers/);
  });
});
