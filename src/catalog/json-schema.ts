/**
 * The JSON Schema editors use to complete and check catalogs, generated from the zod
 * schema so the two cannot disagree. `catalog/schema.json` is the committed output; a unit
 * test regenerates it and fails when it drifts.
 */
import { z } from 'zod';
import { catalogSchema } from './schema.js';

export const CATALOG_SCHEMA_FILE = 'catalog/schema.json';

export function catalogJsonSchema(): Record<string, unknown> {
  // `input`: editors check what people write, where defaulted fields are optional.
  // draft-7: the dialect yaml-language-server and most editors understand fully.
  return z.toJSONSchema(catalogSchema, { io: 'input', target: 'draft-7' }) as Record<string, unknown>;
}

/** The exact text of `catalog/schema.json` (2-space JSON, trailing newline). */
export function catalogJsonSchemaText(): string {
  return `${JSON.stringify(catalogJsonSchema(), null, 2)}\n`;
}
