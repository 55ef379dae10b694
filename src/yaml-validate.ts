/**
 * YAML + zod with errors a person can act on: every problem carries `file:line:col`, the
 * YAML path, what was expected and what was found, and all problems come back at once so
 * a catalog is fixed in one edit, not one run per typo.
 *
 * Message convention for schemas validated here: a custom message on a schema or check is
 * the "expected …" clause (the formatter appends ", got …"), except for `custom` issues
 * (refinements), whose message is complete and printed as is; refinements often look at
 * secrets, which must never be echoed back.
 *
 * Neutral, at the bottom of the house: catalogs, tickets, suites, instance and Harbor suites,
 * backlogs, engines files and `--compare` summaries are all read through it.
 */
import {
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Document,
  type Node as YamlNode,
} from 'yaml';
import type { z } from 'zod';
import { ConfigError } from './errors.js';

export interface ValidationProblem {
  file: string;
  line: number;
  column: number;
  /** Dotted YAML path (`agent.testCommand[1].name`); empty for the document itself. */
  path: string;
  message: string;
}

export interface YamlValidateOptions {
  /** The file name shown in problems (e.g. relative to the working directory). */
  displayPath?: string;
}

export type YamlPath = readonly PropertyKey[];

/** A parsed YAML document plus the means to point at any of its nodes. */
export interface ParsedYaml {
  file: string;
  doc: Document.Parsed;
  data: unknown;
  /** Syntax errors, already located. */
  problems: ValidationProblem[];
  /** Line/column (1-based) of the node at `path`, or of its nearest existing ancestor. */
  locate(path: YamlPath, target?: 'value' | 'key'): { line: number; column: number };
}

export type ValidationResult<T> =
  | { ok: true; value: T; parsed: ParsedYaml }
  | { ok: false; problems: ValidationProblem[]; parsed: ParsedYaml };

export function parseYaml(file: string, text: string, options: YamlValidateOptions = {}): ParsedYaml {
  const shown = options.displayPath ?? file;
  const lineCounter = new LineCounter();
  // prettyErrors would fold multi-line source excerpts into messages; problems are one line each.
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const position = (offset: number): { line: number; column: number } => {
    const { line, col } = lineCounter.linePos(offset);
    return { line: Math.max(line, 1), column: Math.max(col, 1) };
  };
  const problems: ValidationProblem[] = doc.errors.map((error) => ({
    file: shown,
    ...position(error.pos[0]),
    path: '',
    message: `YAML syntax error: ${firstLine(error.message)}`,
  }));

  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    // toJS refuses alias bombs and the like; the document is unusable, say so once.
    data = undefined;
    problems.push({
      file: shown,
      line: 1,
      column: 1,
      path: '',
      message: `cannot read YAML: ${firstLine(String(error))}`,
    });
  }

  const locate = (path: YamlPath, target: 'value' | 'key' = 'value'): { line: number; column: number } => {
    const found = findNode(doc, path);
    const node = target === 'key' && found.exact && found.keyNode ? found.keyNode : found.node;
    const offset = node?.range?.[0];
    return offset === undefined ? { line: 1, column: 1 } : position(offset);
  };

  return { file: shown, doc, data, problems, locate };
}

/** Validates without throwing, so callers can add problems of their own (e.g. a missing repo). */
export function validateYaml<T>(
  file: string,
  text: string,
  schema: z.ZodType<T>,
  options: YamlValidateOptions = {},
): ValidationResult<T> {
  const parsed = parseYaml(file, text, options);
  const problems = [...parsed.problems];
  if (parsed.data === undefined && problems.length > 0) {
    // Nothing usable was read; schema problems would only restate that.
    return { ok: false, problems, parsed };
  }
  const result = schema.safeParse(parsed.data, { error: expectedMessage });
  if (!result.success) {
    for (const issue of result.error.issues) problems.push(...problemsForIssue(issue, parsed));
  }
  problems.sort((a, b) => a.line - b.line || a.column - b.column);
  if (problems.length > 0 || !result.success) return { ok: false, problems, parsed };
  return { ok: true, value: result.data, parsed };
}

/**
 * Parses YAML text and validates it with a zod schema. On failure throws a ConfigError
 * whose `problems` are `file:line:col path: message` strings, all of them at once.
 */
export function parseYamlWithSchema<T>(
  file: string,
  text: string,
  schema: z.ZodType<T>,
  options: YamlValidateOptions = {},
): T {
  const result = validateYaml(file, text, schema, options);
  if (!result.ok) throw problemsError(result.parsed.file, result.problems);
  return result.value;
}

export function formatProblem(problem: ValidationProblem): string {
  const where = `${problem.file}:${problem.line}:${problem.column}`;
  return problem.path ? `${where} ${problem.path}: ${problem.message}` : `${where} ${problem.message}`;
}

/** One ConfigError for a set of problems: a summary line, then one line per problem. */
export function problemsError(file: string, problems: ValidationProblem[]): ConfigError {
  const lines = problems.map(formatProblem);
  const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
  const message = [`${file} is not valid (${count}):`, ...lines.map((l) => `  ${l}`)].join('\n');
  return new ConfigError(message, lines, { details: { file, problems } });
}

/** `agent.testCommand[1].name`; keys that are not plain identifiers are quoted. */
export function formatPath(path: YamlPath): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else {
      const key = String(segment);
      if (/^[A-Za-z_][\w-]*$/.test(key)) out += out ? `.${key}` : key;
      else out += `[${JSON.stringify(key)}]`;
    }
  }
  return out;
}

/** How a found value is shown after "got": strings JSON-quoted, containers by their kind. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'an empty value (null)';
  if (typeof value === 'string') {
    const shown = value.length > 60 ? `${value.slice(0, 57)}...` : value;
    return JSON.stringify(shown);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  if (Array.isArray(value)) return value.length === 0 ? 'an empty list' : `a list of ${value.length}`;
  if (typeof value === 'object') return 'a mapping';
  return typeof value;
}

// ---------------------------------------------------------------------------------------

type Issue = z.core.$ZodIssue;
type RawIssue = z.core.$ZodRawIssue;

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  object: 'a mapping (key: value)',
  record: 'a mapping (key: value)',
  array: 'a list',
  tuple: 'a list',
  null: 'an empty value',
  undefined: 'nothing',
  nonoptional: 'a value',
  never: 'nothing here',
};

const KNOWN_KEYS = 'known keys here: ';

function expectedMessage(issue: RawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      return `expected ${TYPE_WORDS[issue.expected] ?? issue.expected}`;
    case 'too_small':
      return `expected ${bound(numberOrigin(issue), issue.minimum, issue.inclusive ?? true, 'min', issue.exact)}`;
    case 'too_big':
      return `expected ${bound(numberOrigin(issue), issue.maximum, issue.inclusive ?? true, 'max', issue.exact)}`;
    case 'invalid_value':
      return `expected ${oneOf(issue.values)}`;
    case 'invalid_format':
      return issue.format === 'regex' && issue.pattern
        ? `expected a string matching ${issue.pattern}`
        : `expected a string in ${issue.format} format`;
    case 'not_multiple_of':
      return `expected a multiple of ${issue.divisor}`;
    case 'invalid_union':
      return 'expected a value of one of the allowed forms';
    case 'invalid_key':
      return 'expected a valid key';
    case 'unrecognized_keys': {
      // Union branches finalise their issues before paths are known, so the known keys
      // travel in the message rather than in a side table keyed by path.
      const shape = objectShape(issue.inst);
      return shape ? `${KNOWN_KEYS}${shape.join(', ')}` : 'unknown key';
    }
    default:
      return undefined;
  }
}

/** z.int() reports its range as a "number" origin; the owning schema knows it is an integer. */
function numberOrigin(issue: RawIssue & { origin: string }): string {
  if (issue.origin !== 'number') return issue.origin;
  const format = (issue.schema as { _zod?: { def?: { format?: unknown } } } | undefined)?._zod?.def?.format;
  return typeof format === 'string' && format.includes('int') ? 'int' : 'number';
}

function objectShape(inst: unknown): string[] | undefined {
  const zod = (inst as { _zod?: { def?: { shape?: unknown } } } | undefined)?._zod;
  const shape = zod?.def?.shape;
  return shape && typeof shape === 'object' ? Object.keys(shape) : undefined;
}

function bound(
  origin: string,
  limit: number | bigint,
  inclusive: boolean,
  side: 'min' | 'max',
  exact?: boolean,
): string {
  const n = Number(limit);
  if (origin === 'array' || origin === 'set') {
    if (exact) return `a list of exactly ${n}`;
    if (side === 'min' && n === 1 && inclusive) return 'a non-empty list';
    return side === 'min' ? `a list of at least ${n}` : `a list of at most ${n}`;
  }
  if (origin === 'string') {
    if (exact) return `a string of exactly ${n} characters`;
    if (side === 'min' && n === 1 && inclusive) return 'a non-empty string';
    return side === 'min' ? `a string of at least ${n} characters` : `a string of at most ${n} characters`;
  }
  const kind = origin === 'int' ? 'an integer' : 'a number';
  if (side === 'min') return inclusive ? `${kind} of at least ${n}` : `${kind} greater than ${n}`;
  return inclusive ? `${kind} of at most ${n}` : `${kind} less than ${n}`;
}

function oneOf(values: readonly unknown[]): string {
  const shown = values.map((v) => (typeof v === 'string' ? JSON.stringify(v) : String(v)));
  if (shown.length === 1) return shown[0] ?? 'a specific value';
  return `one of ${shown.slice(0, -1).join(', ')} or ${shown[shown.length - 1]}`;
}

function problemsForIssue(
  issue: Issue,
  parsed: ParsedYaml,
  prefix: readonly PropertyKey[] = [],
): ValidationProblem[] {
  const path = [...prefix, ...issue.path];
  const base = { file: parsed.file, path: formatPath(path) };

  if (issue.code === 'invalid_union' && issue.errors.length > 0) {
    // When the value has the shape of exactly one alternative (say, a list of layers), the
    // problems inside that alternative say far more than "none of the forms matched".
    const fitting = issue.errors.filter(
      (branch) => branch.length > 0 && branch.every((i) => i.path.length > 0),
    );
    const only = fitting.length === 1 ? fitting[0] : undefined;
    if (only) return only.flatMap((inner) => problemsForIssue(inner, parsed, path));
  }

  if (issue.code === 'unrecognized_keys') {
    const allowed = issue.message.startsWith(KNOWN_KEYS)
      ? issue.message.slice(KNOWN_KEYS.length).split(', ')
      : undefined;
    return issue.keys.map((key) => {
      const keyPath = [...path, key];
      const suggestion = allowed ? closest(key, allowed) : undefined;
      const hint = suggestion ? ` (did you mean "${suggestion}"?)` : '';
      const known = allowed ? `; known keys here: ${allowed.join(', ')}` : '';
      return {
        ...base,
        ...parsed.locate(keyPath, 'key'),
        path: formatPath(keyPath),
        message: `unknown key${hint}${known}`,
      };
    });
  }

  if (issue.code === 'custom') return [{ ...base, ...parsed.locate(path), message: issue.message }];

  const value = valueAt(parsed.data, path);
  if (value.missing) {
    // A missing key has no node of its own; the enclosing mapping is the closest place to point at.
    return [
      { ...base, ...parsed.locate(path.slice(0, -1)), message: `missing required field, ${issue.message}` },
    ];
  }
  return [
    { ...base, ...parsed.locate(path), message: `${issue.message}, got ${describeValue(value.value)}` },
  ];
}

function valueAt(data: unknown, path: YamlPath): { missing: boolean; value: unknown } {
  let current: unknown = data;
  for (const segment of path) {
    if (current === null || typeof current !== 'object') return { missing: true, value: undefined };
    const container = current as Record<PropertyKey, unknown>;
    const key = Array.isArray(current) ? Number(segment) : String(segment);
    if (!Object.prototype.hasOwnProperty.call(container, key)) return { missing: true, value: undefined };
    current = container[key];
  }
  return { missing: false, value: current };
}

interface FoundNode {
  node: YamlNode | null | undefined;
  keyNode?: YamlNode | undefined;
  exact: boolean;
}

/** Walks by string comparison so numeric-looking map keys (`3:`) still match zod's string path. */
function findNode(doc: Document.Parsed, path: YamlPath): FoundNode {
  let node: unknown = doc.contents;
  let keyNode: YamlNode | undefined;
  for (const segment of path) {
    let next: unknown;
    let nextKey: YamlNode | undefined;
    if (isMap(node)) {
      const pair = node.items.find((p) => String(isScalar(p.key) ? p.key.value : p.key) === String(segment));
      if (pair) {
        next = pair.value;
        nextKey = isNode(pair.key) ? pair.key : undefined;
        // `key:` with no value: point at the key, there is no value node.
        if (next === null || next === undefined) next = pair.key;
      }
    } else if (isSeq(node) && typeof segment === 'number') {
      next = node.items[segment];
    }
    if (!isNode(next)) return { node: isNode(node) ? node : undefined, keyNode, exact: false };
    node = next;
    keyNode = nextKey;
  }
  return { node: isNode(node) ? node : undefined, keyNode, exact: true };
}

function isNode(value: unknown): value is YamlNode {
  return typeof value === 'object' && value !== null && 'range' in value;
}

function firstLine(text: string): string {
  return (text.split('\n')[0] ?? text).replace(/ at line \d+, column \d+:?$/, '').trim();
}

/** Closest known key within a small edit distance, for "did you mean" on typos. */
function closest(key: string, candidates: string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = editDistance(key.toLowerCase(), name.toLowerCase());
    if (
      distance <= Math.floor(Math.max(key.length, name.length) / 3) &&
      (!best || distance < best.distance)
    ) {
      best = { name, distance };
    }
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
