/**
 * Reference tables generated from JSON Schemas (themselves generated from the zod schemas):
 * every catalog key and every tool input, with type, default and description, as Markdown
 * for docs/catalog.md and docs/tools.md. `npm run schema` rewrites their marked blocks; a unit test fails
 * when they drift, so the reference cannot disagree with what is validated.
 */
import { catalogJsonSchema } from './json-schema.js';

type Schema = Record<string, unknown>;

export interface ReferenceRow {
  key: string;
  type: string;
  required: boolean;
  default?: string;
  description: string;
}

const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

function typeOf(node: Schema): string {
  if (Array.isArray(node.enum)) return node.enum.map((v) => JSON.stringify(v)).join(' | ');
  if ('const' in node) return JSON.stringify(node.const);
  const alternatives = (node.anyOf ?? node.oneOf) as unknown;
  if (Array.isArray(alternatives)) return [...new Set(alternatives.filter(isObject).map(typeOf))].join(' | ');
  if (node.type === 'array') return `${isObject(node.items) ? typeOf(node.items) : 'any'}[]`;
  if (typeof node.type === 'string')
    return node.type === 'object' && !isObject(node.properties) ? 'map' : node.type;
  if (Array.isArray(node.type)) return node.type.join(' | ');
  return 'any';
}

function oneLine(text: unknown): string {
  return typeof text === 'string' ? text.replace(/\s+/g, ' ').trim() : '';
}

/** Rows for every property, depth first; nested objects (and objects in arrays) as dotted keys. */
export function schemaRows(schema: Schema, prefix = ''): ReferenceRow[] {
  const rows: ReferenceRow[] = [];
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  for (const [name, value] of Object.entries(properties)) {
    if (!isObject(value) || name === '$schema') continue;
    const key = `${prefix}${name}`;
    rows.push({
      key,
      type: typeOf(value),
      required: required.has(name),
      ...(value.default !== undefined ? { default: JSON.stringify(value.default) } : {}),
      description: oneLine(value.description),
    });
    if (isObject(value.properties)) rows.push(...schemaRows(value, `${key}.`));
    if (value.type === 'array' && isObject(value.items) && isObject(value.items.properties))
      rows.push(...schemaRows(value.items, `${key}[].`));
    for (const alternative of ((value.anyOf ?? value.oneOf) as unknown[] | undefined) ?? []) {
      if (
        isObject(alternative) &&
        alternative.type === 'array' &&
        isObject(alternative.items) &&
        isObject(alternative.items.properties)
      )
        rows.push(...schemaRows(alternative.items, `${key}[].`));
    }
  }
  return rows;
}

const cell = (text: string): string => text.replace(/\|/g, '\\|');

export function referenceTable(rows: readonly ReferenceRow[]): string {
  const lines = ['| key | type | required | default | description |', '| --- | --- | --- | --- | --- |'];
  for (const r of rows) {
    lines.push(
      `| \`${r.key}\` | ${cell(r.type)} | ${r.required ? 'yes' : ''} | ${r.default !== undefined ? `\`${cell(r.default)}\`` : ''} | ${cell(r.description)} |`,
    );
  }
  return lines.join('\n');
}

/** The catalog key reference: every key a catalog may have. */
export function catalogReferenceMarkdown(): string {
  return referenceTable(schemaRows(catalogJsonSchema()));
}

/** Replaces the text between `<!-- name:start -->` and `<!-- name:end -->`; throws when the markers are missing. */
export function replaceMarkedBlock(text: string, name: string, content: string): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`the markers ${start} ... ${end} are missing`);
  return `${text.slice(0, from + start.length)}\n${content}\n${text.slice(to)}`;
}
