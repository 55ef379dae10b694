/**
 * Checks a model's tool input against an MCP tool's input schema before the call reaches
 * the server, so the model reads what it got wrong in our words. The schema is the server's
 * (hostile data): only a bounded subset of JSON Schema is read (`type`, `required`,
 * `properties`, `additionalProperties: false`, `items`, `enum`), to a bounded depth, and
 * nothing in it is compiled or run. What the subset does not cover the server checks itself.
 */

/** Nesting a check follows before it trusts the server with the rest. */
const MAX_DEPTH = 8;
/** Problems reported per call. */
const MAX_PROBLEMS = 5;

type Json = unknown;

function isObject(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function typeOf(value: Json): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(value: Json, type: string): boolean {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

function where(path: readonly string[]): string {
  return path.length === 0 ? '(input)' : path.join('.');
}

function check(schema: Json, value: Json, path: string[], problems: string[], depth: number): void {
  if (problems.length >= MAX_PROBLEMS || depth > MAX_DEPTH || !isObject(schema)) return;
  const types = (Array.isArray(schema['type']) ? schema['type'] : [schema['type']]).filter(
    (t): t is string => typeof t === 'string',
  );
  if (types.length > 0 && !types.some((t) => matchesType(value, t))) {
    problems.push(`${where(path)}: expected ${types.join(' or ')}, got ${typeOf(value)}`);
    return;
  }
  const choices = schema['enum'];
  if (Array.isArray(choices) && choices.length > 0) {
    const seen = JSON.stringify(value);
    if (!choices.some((choice) => JSON.stringify(choice) === seen)) {
      const listed = choices
        .slice(0, 10)
        .map((c) => JSON.stringify(c))
        .join(', ');
      problems.push(`${where(path)}: expected one of ${listed.slice(0, 300)}`);
      return;
    }
  }
  if (isObject(value)) {
    const properties = isObject(schema['properties']) ? schema['properties'] : {};
    const required = Array.isArray(schema['required']) ? schema['required'] : [];
    for (const name of required) {
      if (typeof name === 'string' && !Object.hasOwn(value, name))
        problems.push(`${where([...path, name])}: required`);
    }
    for (const [name, item] of Object.entries(value)) {
      if (Object.hasOwn(properties, name))
        check(properties[name], item, [...path, name], problems, depth + 1);
      else if (schema['additionalProperties'] === false)
        problems.push(`${where([...path, name])}: not a known field`);
    }
  } else if (Array.isArray(value) && isObject(schema['items'])) {
    value.forEach((item, i) => check(schema['items'], item, [...path, String(i)], problems, depth + 1));
  }
}

/** What is wrong with `input` for `schema` ("a.b: expected string, got number; c: required"), or undefined. */
export function inputProblems(schema: Json, input: Json): string | undefined {
  const problems: string[] = [];
  check(schema, input, [], problems, 0);
  return problems.length > 0 ? problems.slice(0, MAX_PROBLEMS).join('; ') : undefined;
}
