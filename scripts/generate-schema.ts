/**
 * Writes catalog/schema.json from the zod catalog schema, and the generated parts of the docs
 * (catalog keys, tool inputs, every command's --help) between their markers (`npm run schema`).
 * `--check` exits 1 instead of writing when any of them is out of date.
 */
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CATALOG_SCHEMA_FILE, catalogJsonSchemaText } from '../src/catalog/json-schema.js';
import { GENERATED_BLOCKS, withGeneratedBlocks } from './docs-reference.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outputs: Array<{ file: string; text: string }> = [
  { file: CATALOG_SCHEMA_FILE, text: catalogJsonSchemaText() },
];
for (const file of new Set(GENERATED_BLOCKS.map((b) => b.file)))
  outputs.push({ file, text: withGeneratedBlocks(file, await readFile(path.join(root, file), 'utf8')) });

if (process.argv.includes('--check')) {
  let stale = false;
  for (const { file, text } of outputs) {
    const current = await readFile(path.join(root, file), 'utf8').catch(() => '');
    if (current !== text) {
      console.error(`${file} is out of date; run: npm run schema`);
      stale = true;
    } else console.log(`${file} is up to date`);
  }
  if (stale) process.exit(1);
} else {
  for (const { file, text } of outputs) {
    const target = path.join(root, file);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, text);
    console.log(`wrote ${file}`);
  }
}
