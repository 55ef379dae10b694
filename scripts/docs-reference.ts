/**
 * The generated parts of the docs, each between `<!-- NAME:start -->` and `<!-- NAME:end -->`:
 * every catalog key (docs/catalog.md, from the zod schema), every tool's input (docs/tools.md,
 * from the tool registry's JSON Schemas), every command's --help (docs/cli.md, from the
 * program itself) and every outcome with its exit code (docs/outcomes.md, from the vocabulary).
 */
import { toolsReferenceMarkdown } from '../src/agent/tools/tools-reference.js';
import { catalogReferenceMarkdown, replaceMarkedBlock } from '../src/catalog/reference.js';
import { cliReferenceMarkdown } from '../src/cli/help-reference.js';
import { outcomesReferenceMarkdown } from '../src/cli/outcome-reference.js';

export interface GeneratedBlock {
  file: string;
  marker: string;
  content: () => string;
}

export const GENERATED_BLOCKS: readonly GeneratedBlock[] = [
  { file: 'docs/catalog.md', marker: 'catalog-reference', content: catalogReferenceMarkdown },
  { file: 'docs/tools.md', marker: 'tools-reference', content: () => toolsReferenceMarkdown(3) },
  { file: 'docs/cli.md', marker: 'cli-reference', content: cliReferenceMarkdown },
  { file: 'docs/outcomes.md', marker: 'outcomes-reference', content: outcomesReferenceMarkdown },
];

/** `text` (the current content of `file`) with every generated block of that file rewritten. */
export function withGeneratedBlocks(file: string, text: string): string {
  let out = text;
  for (const block of GENERATED_BLOCKS.filter((b) => b.file === file))
    out = replaceMarkedBlock(out, block.marker, block.content());
  return out;
}
