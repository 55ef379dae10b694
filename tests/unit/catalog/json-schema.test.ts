import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  CATALOG_SCHEMA_FILE,
  catalogJsonSchema,
  catalogJsonSchemaText,
} from '../../../src/catalog/json-schema.js';

describe('catalog JSON Schema', () => {
  it('the committed catalog/schema.json equals a fresh generation (run `npm run schema` after changing the zod schema)', async () => {
    const committed = await readFile(CATALOG_SCHEMA_FILE, 'utf8');
    expect(committed).toBe(catalogJsonSchemaText());
  });

  it('describes what people write: defaulted fields optional, unknown keys refused', () => {
    const schema = catalogJsonSchema() as {
      required: string[];
      additionalProperties: boolean;
      properties: { agent: { required: string[]; additionalProperties: boolean } };
    };
    expect(schema.required).toEqual(['name', 'owner', 'repo', 'agent']);
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.agent.required).toEqual(['editableFiles', 'testCommand']);
    expect(schema.properties.agent.additionalProperties).toBe(false);
  });
});
