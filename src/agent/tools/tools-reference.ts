/**
 * The tools' input reference for docs/tools.md, from the same JSON Schemas the model is sent
 * (generated from each tool's zod input). `npm run schema` writes it; a test checks it.
 */
import { referenceTable, schemaRows } from '../../catalog/reference.js';
import { createDefaultToolRegistry } from './tool-registry.js';

/** One section per tool, its heading at `level` (`###` by default). */
export function toolsReferenceMarkdown(level = 3): string {
  // `delegate` too: it is offered when the catalog sets agent.delegate.
  const tools = createDefaultToolRegistry({ delegate: true }).definitions();
  return tools
    .map((tool) =>
      [
        `${'#'.repeat(level)} \`${tool.name}\``,
        '',
        tool.description.replace(/\s+/g, ' ').trim(),
        '',
        referenceTable(schemaRows(tool.inputSchema as Record<string, unknown>)),
      ].join('\n'),
    )
    .join('\n\n');
}
