/**
 * A backlog: the items `work` does one at a time (WIP = 1), in order, each a ticket for
 * `fix`, optionally its own catalog and verification command, and the items it depends on.
 * Validated like a catalog (every problem with file:line:col, all at once).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { parseYamlWithSchema } from '../yaml-validate.js';

const id = z.string({ error: 'expected an item id' }).regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
  error: 'expected a plain id (letters, digits, . _ -; 64 at most)',
});

const itemSchema = z.strictObject({
  id,
  ticket: z.string({ error: 'expected a ticket: a file, an id (tickets/<id>.md) or text' }).min(1),
  catalog: z
    .string()
    .min(1)
    .optional()
    .meta({ description: "This item's catalog (default: the backlog's)." }),
  verify: z.string().min(1).optional().meta({
    description:
      "The command that makes the item passing, run in a fresh sandbox of the repo with every applied item (default: the catalog's tests).",
  }),
  dependsOn: z
    .array(id)
    .default([])
    .meta({ description: 'Items that must be passing before this one starts.' }),
  cassette: z
    .string()
    .min(1)
    .optional()
    .meta({ description: 'A recorded conversation to replay for this item.' }),
});

const backlogSchema = z.strictObject({
  catalog: z.string().min(1).optional().meta({ description: 'The default catalog of every item.' }),
  items: z
    .array(itemSchema, { error: 'expected a list of items' })
    .min(1, { error: 'expected at least one item' }),
});

export type BacklogItem = z.infer<typeof itemSchema>;

export interface Backlog {
  file: string;
  dir: string;
  catalog?: string;
  items: BacklogItem[];
}

export async function loadBacklog(file: string, displayPath = file): Promise<Backlog> {
  const absolute = path.resolve(file);
  let text: string;
  try {
    text = await readFile(absolute, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read backlog ${displayPath}`, [], {
      cause: error,
      hint: 'pass a backlog YAML file',
    });
  }
  const raw = parseYamlWithSchema(absolute, text, backlogSchema, { displayPath });
  const problems: string[] = [];
  const ids = new Set<string>();
  for (const item of raw.items) {
    if (ids.has(item.id)) problems.push(`${displayPath}: item id "${item.id}" is used twice`);
    ids.add(item.id);
  }
  raw.items.forEach((item, index) => {
    for (const dep of item.dependsOn) {
      if (!ids.has(dep)) problems.push(`${displayPath}: items[${index}].dependsOn: no item "${dep}"`);
      // Order is the plan: an item may only depend on items before it, so no cycle can form.
      else if (raw.items.findIndex((i) => i.id === dep) >= index)
        problems.push(`${displayPath}: items[${index}].dependsOn: "${dep}" must come before "${item.id}"`);
    }
    if (!item.catalog && !raw.catalog)
      problems.push(`${displayPath}: items[${index}]: no catalog (set catalog: at the top or on the item)`);
  });
  if (problems.length > 0) throw new ConfigError(`invalid backlog ${displayPath}`, problems);
  return {
    file: absolute,
    dir: path.dirname(absolute),
    ...(raw.catalog ? { catalog: raw.catalog } : {}),
    items: raw.items,
  };
}
