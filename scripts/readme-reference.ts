/**
 * The README's generated blocks: `<!-- catalog-reference:start -->` (every catalog key) and
 * `<!-- tools-reference:start -->` (every tool's input), each up to its `:end` marker.
 */
import { toolsReferenceMarkdown } from '../src/agent/tools/tools-reference.js';
import { catalogReferenceMarkdown, replaceMarkedBlock } from '../src/catalog/reference.js';

export function readmeWithReferences(readme: string): string {
  return replaceMarkedBlock(
    replaceMarkedBlock(readme, 'catalog-reference', catalogReferenceMarkdown()),
    'tools-reference',
    toolsReferenceMarkdown(),
  );
}
