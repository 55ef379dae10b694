/**
 * Writes catalog/schema.json from the zod catalog schema (`npm run schema`).
 * `--check` exits 1 instead of writing when the committed file is out of date.
 */
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CATALOG_SCHEMA_FILE, catalogJsonSchemaText } from '../src/catalog/json-schema.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const target = path.join(root, CATALOG_SCHEMA_FILE);
const text = catalogJsonSchemaText();

if (process.argv.includes('--check')) {
  const current = await readFile(target, 'utf8').catch(() => '');
  if (current !== text) {
    console.error(`${CATALOG_SCHEMA_FILE} is out of date; run: npm run schema`);
    process.exit(1);
  }
  console.log(`${CATALOG_SCHEMA_FILE} is up to date`);
} else {
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, text);
  console.log(`wrote ${CATALOG_SCHEMA_FILE}`);
}
