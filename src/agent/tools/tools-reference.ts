/**
 * The tools' input reference for the README, from the same JSON Schemas the model is sent
 * (generated from each tool's zod input). `npm run schema` writes it; a test checks it.
 */
import { referenceTable, schemaRows } from '../../catalog/reference.js';
import { createDefaultToolRegistry } from './tool-registry.js';

export function toolsReferenceMarkdown(): string {
  // `delegate` too: it is offered when the catalog sets agent.delegate.
  const tools = createDefaultToolRegistry({ delegate: true }).definitions();
  return tools
    .map((tool) =>
      [
        `#### \`${tool.name}\``,
        '',
        tool.description.replace(/\s+/g, ' ').trim(),
        '',
        referenceTable(schemaRows(tool.inputSchema as Record<string, unknown>)),
      ].join('\n'),
    )
    .join('\n\n');
}
